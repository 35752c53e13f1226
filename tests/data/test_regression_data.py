import shutil

import numpy as np
import pytest

from fedprivacy.data.digests import clear_digest_cache
from fedprivacy.data.regression_data import (
    CALIFORNIA_SILOS,
    NIO_NOTE,
    REGRESSION_LOADERS,
    RegressionSilos,
    load_california_housing,
    load_diabetes,
    load_regression_dataset,
)
from fedprivacy.data.sources import DATA_ENV
from fedprivacy.errors import ChecksumError, DataNotFoundError, ParameterError

NEEDED_DATA = ("california_housing", "diabetes_sklearn")


def test_california_silos_missing_and_scaling(data_dir):
    ds = load_california_housing(data_dir)
    assert ds.silo_names == CALIFORNIA_SILOS
    assert ds.sizes.tolist() == [9136, 6551, 2658, 2290, 5]
    assert ds.dimension == 9 and ds.feature_names[-1] == "intercept"
    x, y = np.concatenate(ds.x), np.concatenate(ds.y)
    assert np.all(np.isfinite(x)) and np.allclose(x[:, -1], 1.0)
    assert np.allclose(x[:, :-1].mean(axis=0), 0, atol=1e-9)
    assert np.allclose(x[:, :-1].std(axis=0), 1) and np.isclose(y.std(), 1)
    assert NIO_NOTE in ds.notes and any("207 missing" in n for n in ds.notes)
    dropped = load_california_housing(data_dir, missing="drop")
    assert int(dropped.sizes.sum()) == 20640 - 207
    with pytest.raises(ParameterError, match="missing"):
        load_california_housing(data_dir, missing="mean")


def test_diabetes_split(data_dir, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(data_dir))
    ds = load_regression_dataset("diabetes", clients=4, seed=1)
    assert ds.sizes.tolist() == [111, 111, 110, 110] and ds.dimension == 11
    again = load_diabetes(clients=4, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(ds.y, again.y, strict=True))
    assert NIO_NOTE in ds.notes
    with pytest.raises(ParameterError, match="clients"):
        load_diabetes(data_dir, clients=0)


def test_missing_file_named(data_dir, tmp_path):
    shutil.copytree(data_dir / "diabetes_sklearn", tmp_path / "diabetes_sklearn")
    (tmp_path / "diabetes_sklearn" / "diabetes_target.csv.gz").unlink()
    with pytest.raises(DataNotFoundError) as info:
        load_diabetes(tmp_path)
    assert "diabetes_target.csv.gz" in str(info.value) and "scikit-learn" in str(info.value)
    with pytest.raises(DataNotFoundError, match="housing.tgz"):
        load_california_housing(tmp_path)


def test_corrupt_file_rejected(data_dir, tmp_path):
    clear_digest_cache()
    target = tmp_path / "california_housing"
    target.mkdir()
    raw = (data_dir / "california_housing" / "housing.tgz").read_bytes()
    (target / "housing.tgz").write_bytes(raw[:-10] + b"0123456789")
    with pytest.raises(ChecksumError, match="checksum mismatch"):
        load_california_housing(tmp_path)


@pytest.fixture
def saved_regression_loaders():
    with REGRESSION_LOADERS.restoring():
        yield REGRESSION_LOADERS


def test_regression_dataset_registry(saved_regression_loaders, tmp_path):
    assert list(REGRESSION_LOADERS) == ["california", "diabetes"]
    with pytest.raises(ParameterError, match="'diabetes' is registered already") as info:
        REGRESSION_LOADERS.register("diabetes", REGRESSION_LOADERS["california"])
    assert info.value.name == "dataset"
    with pytest.raises(ParameterError) as info:
        load_regression_dataset("boston")
    assert str(info.value) == "dataset: must be 'california' or 'diabetes', got 'boston'"
    calls = []
    toy = RegressionSilos(
        "toy", ("s0",), (np.ones((3, 2)),), (np.zeros(3),), ("a", "intercept"), "toy", (NIO_NOTE,)
    )

    def load(data_dir, clients, seed, missing):
        calls.append((data_dir, clients, seed, missing))
        return toy

    assert REGRESSION_LOADERS.register("toy", load) is load
    assert load_regression_dataset("toy", tmp_path, clients=3, seed=2, missing="drop") is toy
    assert calls == [(tmp_path, 3, 2, "drop")]
    with pytest.raises(ParameterError) as info:
        load_regression_dataset("boston")
    assert str(info.value) == ("dataset: must be 'california', 'diabetes' or 'toy', got 'boston'")
