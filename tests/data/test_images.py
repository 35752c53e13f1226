import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.data import images, sources
from fedprivacy.data.images import (
    DATASETS,
    IMAGE_DATASETS,
    ImageDataset,
    ImageLoader,
    clear_dataset_cache,
    load_dataset,
)
from fedprivacy.errors import ChecksumError, DataNotFoundError, ParameterError

# -- generic ---------------------------------------------------------------------------------


def test_unknown_dataset_lists_choices():
    with pytest.raises(ParameterError) as info:
        load_dataset("imagenet")
    assert info.value.name == "dataset"
    for name in DATASETS:
        assert name in str(info.value)


def test_dataset_validates_arrays():
    x = np.zeros((2, 1, 4, 4), dtype=np.float32)
    y = np.zeros(2, dtype=np.int64)
    ImageDataset("t", "test", x, y, x, y, 1)
    with pytest.raises(ParameterError, match="train_x"):
        ImageDataset("t", "test", x.astype(np.float64), y, x, y, 1)
    with pytest.raises(ParameterError, match="test_y"):
        ImageDataset("t", "test", x, y, x, y[:1], 1)
    with pytest.raises(ParameterError, match="labels must lie"):
        ImageDataset("t", "test", x, y + 1, x, y, 1)


# -- digits ----------------------------------------------------------------------------------


def test_digits_shapes_and_split():
    d = load_dataset("digits")
    assert d.name == "digits" and "digits" in d.source
    assert d.num_classes == 10
    assert d.input_shape == (1, 8, 8)
    assert d.train_x.dtype == np.float32 and d.test_x.dtype == np.float32
    assert d.train_y.dtype == np.int64
    assert d.train_x.flags.c_contiguous and not d.train_x.flags.writeable
    assert len(d.train_x) + len(d.test_x) == 1797
    counts = np.bincount(np.concatenate([d.train_y, d.test_y]), minlength=10)
    test_counts = np.bincount(d.test_y, minlength=10)
    np.testing.assert_array_equal(test_counts, np.round(0.2 * counts).astype(int))
    assert -0.5 <= d.train_x.min() and d.train_x.max() <= 0.5


def test_digits_deterministic_and_needs_no_data_dir(tmp_path):
    a = load_dataset("digits", data_dir=tmp_path / "does-not-exist")
    clear_dataset_cache()
    b = load_dataset("digits")
    assert a is not b
    np.testing.assert_array_equal(a.train_x, b.train_x)
    np.testing.assert_array_equal(a.test_y, b.test_y)
    assert load_dataset("digits") is b  # memoised


# -- MNIST -----------------------------------------------------------------------------------


def test_mnist_real(data_dir, monkeypatch):
    m = load_dataset("mnist", data_dir)
    assert m.source == images.SOURCE_MNIST
    assert m.train_x.shape == (60000, 1, 28, 28) and m.test_x.shape == (10000, 1, 28, 28)
    assert m.train_x.dtype == np.float32 and m.train_y.dtype == np.int64
    assert m.num_classes == 10 and m.input_shape == (1, 28, 28)
    assert np.bincount(m.train_y, minlength=10).sum() == 60000
    assert np.bincount(m.test_y, minlength=10).min() > 800
    # (x/255 - 0.1307)/0.3081 has mean ~0 exactly when the raw train mean is ~0.1307
    raw_mean = float(m.train_x.mean(dtype=np.float64)) * 0.3081 + 0.1307
    assert raw_mean == pytest.approx(0.1307, abs=2e-4)
    assert abs(float(m.train_x.mean(dtype=np.float64))) < 1e-3
    assert not m.train_x.flags.writeable and m.train_x.flags.c_contiguous
    # memoised; the environment variable names the same directory
    monkeypatch.setenv(sources.DATA_ENV, str(data_dir))
    assert load_dataset("mnist") is m


def _mnist_copy(data_dir: Path, target: Path) -> Path:
    (target / "mnist").mkdir(parents=True)
    for rel in images.MNIST_FILES:
        os.symlink(data_dir / rel, target / rel)
    return target


def test_mnist_corrupt_copy_raises(data_dir, tmp_path):
    root = _mnist_copy(data_dir, tmp_path)
    rel = "mnist/train-labels-idx1-ubyte.gz"
    (root / rel).unlink()
    content = bytearray(gzip.decompress((data_dir / rel).read_bytes()))
    content[100] = (content[100] + 1) % 10  # one wrong label
    (root / rel).write_bytes(gzip.compress(bytes(content)))
    with pytest.raises(ChecksumError, match="train-labels-idx1-ubyte.gz"):
        load_dataset("mnist", root)


def test_mnist_missing_files(tmp_path):
    with pytest.raises(DataNotFoundError) as info:
        load_dataset("mnist", tmp_path)
    assert "mnist/train-images-idx3-ubyte.gz" in str(info.value)
    with pytest.raises(DataNotFoundError, match="does not exist"):
        load_dataset("mnist", tmp_path / "missing")


def test_mnist_idx_magic_checked(tmp_path):
    bad = tmp_path / "x.gz"
    bad.write_bytes(gzip.compress((2049).to_bytes(4, "big") + (1).to_bytes(4, "big") + b"\x01"))
    assert images._read_idx(bad, 2049, 1).tolist() == [1]
    with pytest.raises(ChecksumError, match="magic"):
        images._read_idx(bad, 2051, 3)
    bad.write_bytes(gzip.compress((2049).to_bytes(4, "big") + (5).to_bytes(4, "big") + b"\x01"))
    with pytest.raises(ChecksumError, match="announces"):
        images._read_idx(bad, 2049, 1)


# -- registry --------------------------------------------------------------------------------


@pytest.fixture
def saved_image_datasets():
    with IMAGE_DATASETS.restoring():
        yield IMAGE_DATASETS
    clear_dataset_cache()


def _toy(name: str) -> ImageDataset:
    x = np.zeros((2, 1, 2, 2), dtype=np.float32)
    y = np.zeros(2, dtype=np.int64)
    return ImageDataset(name, "toy", x, y, x, y, 1)


def test_image_dataset_registry(saved_image_datasets, tmp_path):
    assert DATASETS == tuple(IMAGE_DATASETS) == ("digits", "mnist", "cifar10", "cifar100")
    with pytest.raises(ParameterError, match="'mnist' is registered already") as info:
        IMAGE_DATASETS.register("mnist", IMAGE_DATASETS["digits"])
    assert info.value.name == "dataset"
    assert IMAGE_DATASETS["mnist"].files == images.MNIST_FILES
    # a dataset needing no data directory: read(None), whatever data_dir says
    bundled = ImageLoader(lambda root: _toy("bundled") if root is None else _toy("?"), None)
    assert IMAGE_DATASETS.register("bundled", bundled) is bundled
    assert load_dataset("bundled", tmp_path / "absent").name == "bundled"
    # one read from the data directory, memoised on its files
    roots = []

    def read(root):
        roots.append(root)
        return _toy("from-dir")

    IMAGE_DATASETS.register("from-dir", ImageLoader(read, ("toy/a.bin",)))
    first = load_dataset("from-dir", tmp_path)
    assert load_dataset("from-dir", tmp_path) is first and roots == [tmp_path]
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "a.bin").write_bytes(b"x")
    assert load_dataset("from-dir", tmp_path) is not first and len(roots) == 2
    with pytest.raises(ParameterError) as info:
        load_dataset("imagenet")
    assert str(info.value) == (
        "dataset: must be one of digits, mnist, cifar10, cifar100, bundled, from-dir; "
        "got 'imagenet'"
    )
