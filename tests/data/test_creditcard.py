import numpy as np
import pytest

from fedprivacy.data.creditcard import (
    CREDITCARD_COLUMNS,
    CREDITCARD_FEATURES,
    creditcard_pool,
    load_creditcard,
    read_creditcard,
    synthetic_creditcard,
    write_creditcard_csv,
)
from fedprivacy.data.tabular import load_silo_dataset
from fedprivacy.errors import ChecksumError, DataNotFoundError, ParameterError


@pytest.fixture(scope="module")
def table():
    return synthetic_creditcard(4000, seed=3, fraud_rate=0.02)


def test_synthetic_schema_and_mark(table):
    assert table.features.shape == (4000, 30) and table.labels.shape == (4000,)
    assert table.num_frauds == 80
    assert "synthetic stand-in" in table.source and table.is_synthetic
    assert np.all(np.diff(table.features[:, 0]) >= 0)  # Time is sorted
    again = synthetic_creditcard(4000, seed=3, fraud_rate=0.02)
    assert np.array_equal(again.features, table.features)
    assert np.array_equal(again.labels, table.labels)
    assert not np.array_equal(synthetic_creditcard(4000, seed=4).labels, table.labels)


def test_roundtrip_through_kaggle_format(table, tmp_path):
    path = write_creditcard_csv(table, tmp_path / "creditcard" / "creditcard.csv")
    header = path.read_text().splitlines()[0]
    assert header == ",".join(f'"{c}"' for c in CREDITCARD_COLUMNS)
    back = read_creditcard(path)
    assert np.array_equal(back.features, table.features)
    assert np.array_equal(back.labels, table.labels)
    assert "user-supplied file with the Kaggle creditcard.csv schema" in back.source
    assert "4,000 rows" in back.source
    ds = load_creditcard(tmp_path)  # <data-dir>/creditcard/creditcard.csv
    assert ds.name == "creditcard" and ds.task == "binary"
    from fedprivacy.data.digests import sha256_file

    pinned = read_creditcard(path, sha256=sha256_file(path))
    assert np.array_equal(pinned.labels, table.labels)
    with pytest.raises(ChecksumError, match="SHA-256"):
        read_creditcard(path, sha256="0" * 64)


def test_wrong_schema_is_a_clear_error(table, tmp_path):
    path = write_creditcard_csv(table, tmp_path / "c.csv")
    text = path.read_text()
    bad = tmp_path / "bad.csv"
    bad.write_text(text.replace('"Amount"', '"Amt"', 1))
    with pytest.raises(ChecksumError) as info:
        read_creditcard(bad)
    msg = str(info.value)
    assert "Kaggle creditcard.csv schema" in msg and "Amount" in msg and "Amt" in msg
    swapped = tmp_path / "swapped.csv"
    swapped.write_text(text.replace('"V1","V2"', '"V2","V1"', 1))
    with pytest.raises(ChecksumError, match="another order"):
        read_creditcard(swapped)
    lines = text.splitlines()
    cls = tmp_path / "class.csv"
    cls.write_text("\n".join([lines[0], lines[1].rsplit(",", 1)[0] + ',"2"', *lines[2:]]))
    with pytest.raises(ChecksumError, match="Class"):
        read_creditcard(cls)
    text_field = tmp_path / "text.csv"
    text_field.write_text("\n".join([lines[0], "abc," + lines[1].split(",", 1)[1], *lines[2:]]))
    with pytest.raises(ChecksumError, match="not a table of numbers"):
        read_creditcard(text_field)


def test_missing_file_names_it_and_kaggle(tmp_path):
    with pytest.raises(DataNotFoundError) as info:
        load_creditcard(tmp_path)
    msg = str(info.value)
    assert "creditcard.csv" in msg and "kaggle.com" in msg


def test_pool_split_scaling_undersampling(table):
    ds = creditcard_pool(table, seed=1)
    assert ds.feature_names == CREDITCARD_FEATURES and ds.input_shape == (30,)
    assert ds.silo_names == ("pool",) and not ds.fixed_silos
    assert "synthetic stand-in" in ds.source
    x_tr, y_tr = ds.pooled_train()
    x_te, y_te = ds.pooled_test()
    assert len(y_te) == 600  # ceil(0.15 * 4000)
    frauds_train = 80 - int(y_te.sum())
    assert int(y_tr.sum()) == frauds_train  # every training fraud kept
    legit_train = 3400 - frauds_train
    assert int((y_tr == 0).sum()) == int(0.1 * legit_train)
    # test keeps the natural imbalance: 2 % frauds stratified
    assert int(y_te.sum()) == 12
    assert abs(float(x_tr[:, 5].mean())) < 0.5  # standardised on the full training part
    again = creditcard_pool(table, seed=1)
    assert np.array_equal(again.train_x[0], ds.train_x[0])
    with pytest.raises(ParameterError):
        creditcard_pool(table, test_fraction=1.5)


def test_dispatcher_marks_synthetic():
    ds = load_silo_dataset("creditcard-synthetic", seed=2)
    assert "synthetic stand-in" in ds.source and "synthetic stand-in" in str(ds.describe())
