import shutil

import numpy as np
import pytest

from fedprivacy.data import sources
from fedprivacy.data.digests import clear_digest_cache, sha256_file
from fedprivacy.data.silo_dataset import EVENT, TIME
from fedprivacy.data.tcga_brca import TCGA_REGIONS, load_tcga_brca
from fedprivacy.errors import ChecksumError, DataNotFoundError

NEEDED_DATA = ("tcga_brca",)


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
        type(entry)(entry.relpath, entry.what, entry.url, sha256=sha256_file(split)),
    )
    with pytest.raises(ChecksumError, match="Northeast"):
        load_tcga_brca(tmp_path)


def test_age_centring_is_a_reparametrisation_of_the_cox_model(data_dir):
    import torch

    from fedprivacy.data.tcga_brca import TCGA_AGE_CENTRE
    from fedprivacy.fl.losses import cox_loss

    raw = load_tcga_brca(data_dir, centre_age=False)
    ds = load_tcga_brca(data_dir)
    assert "age centred at 60" in ds.source and "centred" not in raw.source
    for a, b in zip(raw.train_x, ds.train_x, strict=True):
        np.testing.assert_array_equal(b[:, 0], a[:, 0] - TCGA_AGE_CENTRE)
        np.testing.assert_array_equal(b[:, 1:], a[:, 1:])
    assert 26 <= float(np.concatenate(raw.train_x)[:, 0].min()) < 40
    # same weights: same loss and same weight gradient (the scores move by a constant)
    w = torch.linspace(-0.05, 0.05, 39, dtype=torch.float64, requires_grad=True)
    y = torch.from_numpy(raw.train_y[0].astype(np.float64))
    mask = torch.ones(len(y), dtype=torch.float64)
    values, grads = [], []
    for x in (raw.train_x[0], ds.train_x[0]):
        loss = cox_loss(torch.from_numpy(x.astype(np.float64)) @ w, y, mask)
        (g,) = torch.autograd.grad(loss, w)
        values.append(float(loss.detach()))
        grads.append(g)
    assert values[0] == pytest.approx(values[1], rel=1e-9)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-7, atol=1e-10)
    # per-record terms a_i x_i cancel only in the sum: clipping each one breaks the invariance
    scores = (torch.from_numpy(raw.train_x[0].astype(np.float64)) @ w).detach()
    scores.requires_grad_(True)
    (a,) = torch.autograd.grad(cox_loss(scores, y, mask), scores)
    assert float(a.sum()) == pytest.approx(0.0, abs=1e-12)
