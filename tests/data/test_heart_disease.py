import shutil
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.data.digests import clear_digest_cache
from fedprivacy.data.heart_disease import HEART_CENTERS, HEART_FEATURES, load_heart_disease
from fedprivacy.data.sources import DATA_ENV
from fedprivacy.data.tabular import load_silo_dataset
from fedprivacy.errors import ChecksumError, DataNotFoundError

NEEDED_DATA = ("heart_disease",)


def _copy(data_dir: Path, dest: Path) -> Path:
    shutil.copytree(data_dir / "heart_disease", dest / "heart_disease")
    return dest


def test_counts_split_and_features(data_dir):
    ds = load_heart_disease(data_dir)
    assert ds.silo_names == HEART_CENTERS
    assert ds.fixed_silos and ds.task == "binary" and ds.num_classes == 2
    assert ds.train_sizes().tolist() == [199, 172, 30, 85]
    assert ds.test_sizes().tolist() == [104, 89, 16, 45]
    assert (ds.train_sizes() + ds.test_sizes()).tolist() == [303, 261, 46, 130]
    assert int((ds.train_sizes() + ds.test_sizes()).sum()) == 740
    assert ds.input_shape == (13,) and ds.feature_names == HEART_FEATURES
    x, y = ds.pooled_train()
    assert x.shape == (486, 13) and x.dtype == np.float32 and y.dtype == np.int64
    assert set(np.unique(y).tolist()) == {0, 1}
    # binary target num > 0: Switzerland has a single healthy patient (in its test or train part)
    assert int((ds.train_y[2] == 0).sum() + (ds.test_y[2] == 0).sum()) == 1
    assert not x.flags.writeable


def test_normalised_per_center_on_train(data_dir):
    ds = load_heart_disease(data_dir)
    for k, x in enumerate(ds.train_x):
        std = x.std(axis=0, ddof=1)
        assert np.allclose(x.mean(axis=0), 0.0, atol=1e-5)
        # constant features (chol = 0 in Switzerland) become 0, the others have std 1
        assert np.allclose(std[std > 0.5], 1.0, atol=1e-5), k
    chol = HEART_FEATURES.index("chol")
    assert np.all(ds.train_x[2][:, chol] == 0)
    raw = load_heart_disease(data_dir, normalize=False)
    assert "not normalised" in raw.source
    # one-hot columns hold 0/1 and at most one level of cp / restecg per patient
    onehot = raw.train_x[0][:, 8:]
    assert set(np.unique(onehot).tolist()) <= {0.0, 1.0}
    assert onehot[:, :3].sum(axis=1).max() <= 1 and onehot[:, 3:].sum(axis=1).max() <= 1


def test_dispatcher_and_env(data_dir, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(data_dir))
    ds = load_silo_dataset("heart_disease")
    assert ds.describe()["silos"][2] == {"name": "switzerland", "train": 30, "test": 16}


def test_missing_file_named(data_dir, tmp_path):
    root = _copy(data_dir, tmp_path)
    (root / "heart_disease" / "processed.va.data").unlink()
    with pytest.raises(DataNotFoundError) as info:
        load_heart_disease(root)
    msg = str(info.value)
    assert "processed.va.data" in msg and "archive.ics.uci.edu" in msg


def test_corrupt_file_rejected(data_dir, tmp_path):
    root = _copy(data_dir, tmp_path)
    path = root / "heart_disease" / "processed.hungarian.data"
    path.chmod(0o644)
    path.write_text(path.read_text().replace("28,1,2,130", "29,1,2,130", 1))
    clear_digest_cache()
    with pytest.raises(ChecksumError, match="processed.hungarian.data"):
        load_heart_disease(root)
