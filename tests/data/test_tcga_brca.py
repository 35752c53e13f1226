import shutil
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.data import sources
from fedprivacy.data.sources import clear_digest_cache
from fedprivacy.data.tabular import EVENT, TIME
from fedprivacy.data.tcga_brca import TCGA_REGIONS, load_tcga_brca
from fedprivacy.errors import ChecksumError, DataNotFoundError

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture
def data_dir() -> Path:
    if not (DATA / "tcga_brca").is_dir():
        pytest.skip(f"shared data directory {DATA} not available")
    return DATA


def test_regions_and_split(data_dir):
    ds = load_tcga_brca(data_dir)
    assert ds.silo_names == TCGA_REGIONS
    assert ds.task == "survival" and ds.num_classes == 0 and ds.fixed_silos
    totals = dict(zip(ds.silo_names, (ds.train_sizes() + ds.test_sizes()).tolist(), strict=True))
    assert totals == {
        "Northeast": 311,
        "South": 196,
        "West": 206,
        "Midwest": 162,
        "Europe": 162,
        "Canada": 51,
    }
    assert sum(totals.values()) == 1088
    assert int(ds.train_sizes().sum()) == 866 and int(ds.test_sizes().sum()) == 222
    assert ds.train_sizes().tolist() == [248, 156, 164, 129, 129, 40]
    assert ds.input_shape == (39,) and len(ds.feature_names) == 39
    assert ds.feature_names[0] == "age_at_index"
    y = np.concatenate(ds.train_y + ds.test_y)
    assert y.shape == (1088, 2) and y.dtype == np.float32
    assert set(np.unique(y[:, EVENT]).tolist()) == {0.0, 1.0}
    assert float(y[:, TIME].min()) >= 0


def test_missing_and_corrupt(data_dir, tmp_path):
    shutil.copytree(data_dir / "tcga_brca", tmp_path / "tcga_brca")
    split = tmp_path / "tcga_brca" / "train_test_split.csv"
    split.chmod(0o644)
    split.write_text(split.read_text().replace("train_0", "train_1", 1))
    clear_digest_cache()
    with pytest.raises(ChecksumError, match="train_test_split.csv"):
        load_tcga_brca(tmp_path)
    (tmp_path / "tcga_brca" / "brca.csv").unlink()
    with pytest.raises(DataNotFoundError) as info:
        load_tcga_brca(tmp_path)
    assert "brca.csv" in str(info.value) and "FLamby" in str(info.value)


def test_inconsistent_region_detected(data_dir, tmp_path, monkeypatch):
    # a split file that moves a Northeast patient to region 1 (South), with its digest trusted
    shutil.copytree(data_dir / "tcga_brca", tmp_path / "tcga_brca")
    split = tmp_path / "tcga_brca" / "train_test_split.csv"
    split.chmod(0o644)
    split.write_text(split.read_text().replace("train,train_0", "train,train_1", 1))
    clear_digest_cache()
    rel = "tcga_brca/train_test_split.csv"
    entry = sources.KNOWN_FILES[rel]
    monkeypatch.setitem(
        sources.KNOWN_FILES,
        rel,
        type(entry)(entry.relpath, entry.what, entry.url, sha256=sources.sha256_file(split)),
    )
    with pytest.raises(ChecksumError, match="Northeast"):
        load_tcga_brca(tmp_path)
