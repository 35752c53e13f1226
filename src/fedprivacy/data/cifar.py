"""CIFAR-10 and CIFAR-100 files: the original python tarballs and the lossy CIFAR-10 JPEG copy.

The readers return raw ``uint8`` images in ``(n, 3, 32, 32)`` layout and ``int64`` labels for the
training and test sets; :func:`fedprivacy.data.images.load_dataset` normalises them into an
:class:`~fedprivacy.data.images.ImageDataset` (and memoises it). Every file is checked against its
published digest before it is read.

* The python tarballs hold pickled batches; they are read with a restricted unpickler that only
  builds plain containers and numpy arrays (a pickle that would run code is rejected).
* The JPEG copy (``cifar10_jpeg/CIFAR-10-images.tar.gz``, ``<split>/<class>/<file>.jpg``) is
  decoded once, in (class, filename) order, and the arrays are cached as an ``.npz`` in
  :func:`fedprivacy.data.sources.cache_dir` under the tarball's SHA-256.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import tarfile
import tempfile
import warnings
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.data.digests import sha256_file
from fedprivacy.data.sources import KNOWN_FILES, cache_dir, verify_known_file
from fedprivacy.errors import ChecksumError, DataNotFoundError

__all__ = [
    "CIFAR100_TARBALL",
    "CIFAR10_CLASSES",
    "CIFAR10_JPEG_TARBALL",
    "CIFAR10_TARBALL",
    "SOURCE_CIFAR10",
    "SOURCE_CIFAR100",
    "SOURCE_CIFAR10_JPEG",
    "read_cifar10",
    "read_cifar100",
]

#: CIFAR-10 class names in label order (label ``k`` is ``CIFAR10_CLASSES[k]``).
CIFAR10_CLASSES: tuple[str, ...] = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)

CIFAR10_TARBALL = "cifar-10-python.tar.gz"
CIFAR10_JPEG_TARBALL = "cifar10_jpeg/CIFAR-10-images.tar.gz"
CIFAR100_TARBALL = "cifar-100-python.tar.gz"

SOURCE_CIFAR10 = "CIFAR-10 (original python tarball)"
SOURCE_CIFAR10_JPEG = "CIFAR-10 (lossy JPEG copy, quality 75 - not the original pixels)"
SOURCE_CIFAR100 = "CIFAR-100 (original python tarball)"

_JPEG_CACHE_VERSION = 1

_U8 = NDArray[np.uint8]
_I64 = NDArray[np.int64]
_Split = tuple[_U8, _I64]


def read_cifar10(root: Path) -> tuple[str, _Split, _Split]:
    """Read CIFAR-10: the original python tarball if present, else the lossy JPEG copy.

    Parameters
    ----------
    root : pathlib.Path
        The data directory.

    Returns
    -------
    source : str
        :data:`SOURCE_CIFAR10` or :data:`SOURCE_CIFAR10_JPEG`: which copy was read.
    train, test : tuple of numpy.ndarray
        ``(images, labels)``: ``uint8`` images ``(n, 3, 32, 32)`` and ``int64`` labels.

    Raises
    ------
    DataNotFoundError
        If neither copy is in ``root``.
    ChecksumError
        If the file read is not the published version (or cannot be parsed).
    """
    if (root / CIFAR10_TARBALL).is_file():
        return (SOURCE_CIFAR10, *_read_cifar10_original(root))
    if (root / CIFAR10_JPEG_TARBALL).is_file():
        return (SOURCE_CIFAR10_JPEG, *_read_cifar10_jpeg(root))
    known = KNOWN_FILES[CIFAR10_TARBALL]
    raise DataNotFoundError(
        f"CIFAR-10 not found: expected {str(root / CIFAR10_TARBALL)!r} (the original python "
        f"version, download it from {known.url}) or the lossy JPEG copy "
        f"{str(root / CIFAR10_JPEG_TARBALL)!r}."
    )


def read_cifar100(root: Path) -> tuple[_Split, _Split]:
    """Read CIFAR-100 (fine labels, 100 classes) from its original python tarball.

    Parameters
    ----------
    root : pathlib.Path
        The data directory.

    Returns
    -------
    train, test : tuple of numpy.ndarray
        ``(images, labels)``: ``uint8`` images ``(n, 3, 32, 32)`` and ``int64`` labels.

    Raises
    ------
    DataNotFoundError
        If the tarball is missing.
    ChecksumError
        If it is not the published version (or cannot be parsed).
    """
    path = verify_known_file(root, CIFAR100_TARBALL)
    folder = "cifar-100-python"
    train = _read_cifar_batches(path, folder, ("train",), b"fine_labels")
    test = _read_cifar_batches(path, folder, ("test",), b"fine_labels")
    return train, test


# ---------------------------------------------------------------------------------------------
# original python tarballs


def _numpy_core_module(module: str) -> str:
    core = "numpy._core" if hasattr(np, "_core") else "numpy.core"
    for prefix in ("numpy._core", "numpy.core"):
        if module == prefix or module.startswith(prefix + "."):
            return core + module[len(prefix) :]
    return module


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler that only builds plain containers and numpy arrays (no arbitrary code)."""

    _ALLOWED = frozenset(
        {
            ("_codecs", "encode"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.numeric", "_frombuffer"),
            ("numpy._core.numeric", "_frombuffer"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"forbidden global {module}.{name} in a CIFAR batch")
        return super().find_class(_numpy_core_module(module), name)


def _read_cifar_batches(
    path: Path, folder: str, members: tuple[str, ...], label_key: bytes
) -> tuple[_U8, _I64]:
    xs: list[_U8] = []
    ys: list[_I64] = []
    try:
        with tarfile.open(path, "r:gz") as tf:
            for member in members:
                try:
                    fh = tf.extractfile(f"{folder}/{member}")
                except KeyError:
                    fh = None
                if fh is None:
                    raise ChecksumError(f"{str(path)!r} has no file {folder}/{member}")
                with fh:
                    batch = _ArrayUnpickler(fh, encoding="bytes").load()
                if not isinstance(batch, dict) or b"data" not in batch or label_key not in batch:
                    raise ChecksumError(
                        f"{str(path)!r}: {folder}/{member} lacks the keys data / {label_key!r}"
                    )
                data = np.asarray(batch[b"data"], dtype=np.uint8)
                labels = np.asarray(batch[label_key], dtype=np.int64)
                if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or labels.shape != (len(data),):
                    raise ChecksumError(
                        f"{str(path)!r}: {folder}/{member} holds data of shape {data.shape} and "
                        f"{labels.shape} labels, expected (n, 3072) and (n,)"
                    )
                xs.append(data.reshape(-1, 3, 32, 32))
                ys.append(labels)
    except (tarfile.TarError, OSError, EOFError, pickle.UnpicklingError) as exc:
        raise ChecksumError(f"cannot read {str(path)!r}: {exc}") from exc
    return np.concatenate(xs), np.concatenate(ys)


def _read_cifar10_original(root: Path) -> tuple[_Split, _Split]:
    path = verify_known_file(root, CIFAR10_TARBALL)
    folder = "cifar-10-batches-py"
    train = _read_cifar_batches(
        path, folder, tuple(f"data_batch_{i}" for i in range(1, 6)), b"labels"
    )
    test = _read_cifar_batches(path, folder, ("test_batch",), b"labels")
    return train, test


# ---------------------------------------------------------------------------------------------
# CIFAR-10, lossy JPEG copy


def _decode_cifar10_jpeg(path: Path) -> tuple[tuple[_U8, _I64], tuple[_U8, _I64]]:
    """Decode every ``<split>/<class>/<file>.jpg`` of the tarball, in (class, filename) order."""
    from PIL import Image

    class_index = {c: i for i, c in enumerate(CIFAR10_CLASSES)}
    found: dict[str, list[tuple[int, str, _U8]]] = {"train": [], "test": []}
    try:
        # Decompress once and slice members out of memory: much faster than tarfile's reader.
        with gzip.open(path, "rb") as gz:
            raw = gz.read()
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tf:
            for member in tf:
                if not member.isreg() or member.issparse():
                    continue
                parts = PurePosixPath(member.name).parts
                if (
                    len(parts) < 3
                    or not parts[-1].lower().endswith(".jpg")
                    or parts[-3] not in found
                    or parts[-2] not in class_index
                ):
                    continue
                blob = raw[member.offset_data : member.offset_data + member.size]
                with Image.open(io.BytesIO(blob)) as im:
                    rgb = im if im.mode == "RGB" else im.convert("RGB")
                    arr = np.asarray(rgb, dtype=np.uint8)
                if arr.shape != (32, 32, 3):
                    raise ChecksumError(f"{str(path)!r}: {member.name} is not a 32x32 image")
                found[parts[-3]].append((class_index[parts[-2]], parts[-1], arr))
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise ChecksumError(f"cannot read {str(path)!r}: {exc}") from exc
    out = []
    for split in ("train", "test"):
        items = sorted(found[split], key=lambda t: (t[0], t[1]))
        if not items:
            raise ChecksumError(f"{str(path)!r} holds no {split}/<class>/*.jpg image")
        x = np.stack([t[2] for t in items]).transpose(0, 3, 1, 2)
        y = np.array([t[0] for t in items], dtype=np.int64)
        out.append((np.ascontiguousarray(x), y))
    return out[0], out[1]


def _jpeg_cache_path(sha256: str) -> Path:
    return cache_dir() / f"cifar10_jpeg-{sha256[:16]}-v{_JPEG_CACHE_VERSION}.npz"


def _read_jpeg_cache(path: Path) -> tuple[tuple[_U8, _I64], tuple[_U8, _I64]] | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in ("train_x", "train_y", "test_x", "test_y")}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    for split in ("train", "test"):
        x, y = arrays[f"{split}_x"], arrays[f"{split}_y"]
        if (
            x.dtype != np.uint8
            or x.shape[1:] != (3, 32, 32)
            or y.dtype != np.int64
            or y.shape != (len(x),)
        ):
            return None
    return (arrays["train_x"], arrays["train_y"]), (arrays["test_x"], arrays["test_y"])


def _write_jpeg_cache(path: Path, train: tuple[_U8, _I64], test: tuple[_U8, _I64]) -> None:
    """Write the decoded arrays atomically; a cache that cannot be written is only a warning."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, train_x=train[0], train_y=train[1], test_x=test[0], test_y=test[1])
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        warnings.warn(
            f"could not write the decoded CIFAR-10 cache {str(path)!r}: {exc}",
            RuntimeWarning,
            stacklevel=3,
        )


def _read_cifar10_jpeg(root: Path) -> tuple[_Split, _Split]:
    path = verify_known_file(root, CIFAR10_JPEG_TARBALL)
    cache = _jpeg_cache_path(sha256_file(path))
    arrays = _read_jpeg_cache(cache)
    if arrays is None:
        arrays = _decode_cifar10_jpeg(path)
        _write_jpeg_cache(cache, *arrays)
    return arrays
