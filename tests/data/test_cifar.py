import dataclasses
import hashlib
import io
import os
import pickle
import shutil
import tarfile

import numpy as np
import pytest

from fedprivacy.data import cifar, sources
from fedprivacy.data.images import CIFAR10_MEAN_STD, clear_dataset_cache, load_dataset
from fedprivacy.errors import ChecksumError, DataNotFoundError

# -- CIFAR-10, lossy JPEG copy (real data, decoded once per session) -------------------------


@pytest.fixture(scope="module")
def cifar10_jpeg(tmp_path_factory, data_dir):
    cache = tmp_path_factory.mktemp("fedprivacy-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(sources.CACHE_ENV, str(cache))
        dataset = load_dataset("cifar10", data_dir)
    cached = list(cache.glob("cifar10_jpeg-*.npz"))
    assert len(cached) == 1
    arrays = cifar._read_jpeg_cache(cached[0])
    assert arrays is not None
    (train_x, train_y), (test_x, test_y) = arrays
    assert train_x.dtype == np.uint8 and train_x.shape == (50000, 3, 32, 32)
    np.testing.assert_array_equal(train_y, dataset.train_y)
    np.testing.assert_array_equal(test_y, dataset.test_y)
    return dataset


def test_cifar10_jpeg(cifar10_jpeg):
    c = cifar10_jpeg
    assert "JPEG" in c.source and c.name == "cifar10"
    assert c.train_x.shape == (50000, 3, 32, 32) and c.test_x.shape == (10000, 3, 32, 32)
    assert c.input_shape == (3, 32, 32) and c.num_classes == 10
    assert np.bincount(c.train_y).tolist() == [5000] * 10
    assert np.bincount(c.test_y).tolist() == [1000] * 10
    assert np.all(np.diff(c.train_y) >= 0)  # sorted by (class, filename)
    # per-channel means of the JPEG copy are within 1e-3 of the original ones -> ~0 normalised
    np.testing.assert_allclose(c.train_x.mean(axis=(0, 2, 3), dtype=np.float64), 0, atol=0.01)
    assert not c.train_x.flags.writeable and c.train_x.flags.c_contiguous


# -- CIFAR, original tarballs (tiny synthetic stand-ins) -------------------------------------


def _batch(rng, n, label_key, num_classes):
    return {
        b"batch_label": b"synthetic",
        label_key: rng.integers(0, num_classes, size=n).tolist(),
        b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
        b"filenames": [b"f%d.png" % i for i in range(n)],
    }


def _write_tar(path, folder, members):
    with tarfile.open(path, "w:gz") as tf:
        for name, obj in members.items():
            data = obj if isinstance(obj, bytes) else pickle.dumps(obj, protocol=2)
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def _trust(monkeypatch, root, rel):
    md5 = hashlib.md5((root / rel).read_bytes()).hexdigest()
    monkeypatch.setitem(
        sources.KNOWN_FILES, rel, dataclasses.replace(sources.KNOWN_FILES[rel], md5=md5)
    )


def test_cifar10_original_tarball_preferred(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    batches = {f"data_batch_{i}": _batch(rng, 4, b"labels", 10) for i in range(1, 6)}
    batches["test_batch"] = _batch(rng, 3, b"labels", 10)
    batches["batches.meta"] = {b"label_names": [c.encode() for c in cifar.CIFAR10_CLASSES]}
    _write_tar(tmp_path / "cifar-10-python.tar.gz", "cifar-10-batches-py", batches)
    (tmp_path / "cifar10_jpeg").mkdir()
    (tmp_path / "cifar10_jpeg" / "CIFAR-10-images.tar.gz").write_bytes(b"ignored")

    with pytest.raises(ChecksumError, match="MD5"):  # the real md5 does not match
        load_dataset("cifar10", tmp_path)
    _trust(monkeypatch, tmp_path, "cifar-10-python.tar.gz")
    c = load_dataset("cifar10", tmp_path)
    assert c.source == "CIFAR-10 (original python tarball)"
    assert c.train_x.shape == (20, 3, 32, 32) and c.test_x.shape == (3, 3, 32, 32)
    expected_y = np.concatenate([batches[f"data_batch_{i}"][b"labels"] for i in range(1, 6)])
    np.testing.assert_array_equal(c.train_y, expected_y)
    # row-major 3072 bytes = 3 channel planes of 32x32; normalised per channel
    raw = batches["data_batch_1"][b"data"][0].reshape(3, 32, 32).astype(np.float64)
    mean, std = (np.array(v).reshape(3, 1, 1) for v in CIFAR10_MEAN_STD)
    np.testing.assert_allclose(c.train_x[0], (raw / 255 - mean) / std, rtol=1e-5, atol=1e-5)


def test_cifar_pickle_with_code_is_rejected(tmp_path, monkeypatch):
    class Evil:
        def __reduce__(self):
            return (os.getcwd, ())

    members = {f"data_batch_{i}": Evil() for i in range(1, 6)}
    members["test_batch"] = Evil()
    _write_tar(tmp_path / "cifar-10-python.tar.gz", "cifar-10-batches-py", members)
    _trust(monkeypatch, tmp_path, "cifar-10-python.tar.gz")
    with pytest.raises(ChecksumError, match="forbidden"):
        load_dataset("cifar10", tmp_path)


def test_cifar10_missing_names_both_copies(tmp_path):
    with pytest.raises(DataNotFoundError) as info:
        load_dataset("cifar10", tmp_path)
    msg = str(info.value)
    assert "cifar-10-python.tar.gz" in msg and "CIFAR-10-images.tar.gz" in msg
    assert "https://www.cs.toronto.edu/~kriz/cifar.html" in msg


def test_cifar100_missing(tmp_path):
    with pytest.raises(DataNotFoundError) as info:
        load_dataset("cifar100", tmp_path)
    assert "cifar-100-python.tar.gz" in str(info.value)
    assert "https://www.cs.toronto.edu/~kriz/cifar.html" in str(info.value)


def test_cifar100_original_tarball(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    members = {
        "train": _batch(rng, 6, b"fine_labels", 100),
        "test": _batch(rng, 2, b"fine_labels", 100),
        "meta": {b"fine_label_names": []},
    }
    for b in (members["train"], members["test"]):
        b[b"coarse_labels"] = [0] * len(b[b"fine_labels"])
    _write_tar(tmp_path / "cifar-100-python.tar.gz", "cifar-100-python", members)
    _trust(monkeypatch, tmp_path, "cifar-100-python.tar.gz")
    c = load_dataset("cifar100", tmp_path)
    assert c.num_classes == 100 and c.source == "CIFAR-100 (original python tarball)"
    assert c.train_x.shape == (6, 3, 32, 32) and c.test_x.shape == (2, 3, 32, 32)
    np.testing.assert_array_equal(c.test_y, members["test"][b"fine_labels"])


def test_jpeg_tarball_decoding_order(tmp_path, monkeypatch):
    from PIL import Image

    rng = np.random.default_rng(3)
    path = tmp_path / "cifar10_jpeg" / "CIFAR-10-images.tar.gz"
    path.parent.mkdir()
    names = [("train", "truck", "0001"), ("train", "airplane", "0002"), ("test", "cat", "0000")]
    names += [("train", "airplane", "0000"), ("train", "notaclass", "0000")]
    with tarfile.open(path, "w:gz") as tf:
        for split, cls, stem in names:
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(buf, "JPEG")
            info = tarfile.TarInfo(f"CIFAR-10-images/{split}/{cls}/{stem}.jpg")
            info.size = buf.tell()
            buf.seek(0)
            tf.addfile(info, buf)
    (train_x, train_y), (test_x, test_y) = cifar._decode_cifar10_jpeg(path)
    assert train_y.tolist() == [0, 0, 9] and test_y.tolist() == [3]
    assert train_x.shape == (3, 3, 32, 32) and train_x.dtype == np.uint8

    monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path / "cache"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    rel = cifar.CIFAR10_JPEG_TARBALL
    entry = dataclasses.replace(sources.KNOWN_FILES[rel], sha256=digest)
    monkeypatch.setitem(sources.KNOWN_FILES, rel, entry)
    c = load_dataset("cifar10", tmp_path)
    assert "JPEG" in c.source and len(c.train_y) == 3
    assert (tmp_path / "cache" / f"cifar10_jpeg-{digest[:16]}-v1.npz").is_file()

    # a later process reads the .npz instead of decoding again
    clear_dataset_cache()

    def no_decode(path):
        raise AssertionError("decoded again instead of using the cache")

    monkeypatch.setattr(cifar, "_decode_cifar10_jpeg", no_decode)
    again = load_dataset("cifar10", tmp_path)
    assert again is not c
    np.testing.assert_array_equal(again.train_x, c.train_x)
    np.testing.assert_array_equal(again.test_y, c.test_y)

    # a corrupt cache file is ignored and rewritten
    monkeypatch.undo()
    monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setitem(sources.KNOWN_FILES, rel, entry)
    (tmp_path / "cache" / f"cifar10_jpeg-{digest[:16]}-v1.npz").write_bytes(b"garbage")
    clear_dataset_cache()
    np.testing.assert_array_equal(load_dataset("cifar10", tmp_path).train_x, c.train_x)
    shutil.rmtree(tmp_path / "cache")
