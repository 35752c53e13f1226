"""Image classification datasets: scikit-learn digits, MNIST, CIFAR-10 and CIFAR-100.

Every loader returns an :class:`ImageDataset` of read-only ``float32`` arrays in ``(n, C, H, W)``
layout, normalised with fixed constants, and ``int64`` labels. Files are read from a data
directory (see :func:`fedprivacy.data.sources.resolve_data_dir`) and checked against their
published digests first; nothing is downloaded.

The CIFAR files (original python tarballs, lossy CIFAR-10 JPEG copy) are read by
:mod:`fedprivacy.data.cifar`.

Results are memoised per process on ``(name, data directory, size and mtime of the files read)``,
so repeated calls return the same object. The arrays are read-only so that sharing is safe; copy
them before modifying.
"""

from __future__ import annotations

import functools
import gzip
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from fedprivacy._registry import Registry
from fedprivacy.data.cifar import (
    CIFAR10_JPEG_TARBALL,
    CIFAR10_TARBALL,
    CIFAR100_TARBALL,
    SOURCE_CIFAR100,
    read_cifar10,
    read_cifar100,
)
from fedprivacy.data.silo_dataset import readonly
from fedprivacy.data.sources import resolve_data_dir, verify_known_file
from fedprivacy.errors import ChecksumError, ParameterError

#: Per-channel normalisation constants ``(mean, std)`` applied after scaling pixels to [0, 1].
MNIST_MEAN_STD: tuple[tuple[float, ...], tuple[float, ...]] = ((0.1307,), (0.3081,))
CIFAR10_MEAN_STD: tuple[tuple[float, ...], tuple[float, ...]] = (
    (0.4914, 0.4822, 0.4465),
    (0.2470, 0.2435, 0.2616),
)
CIFAR100_MEAN_STD: tuple[tuple[float, ...], tuple[float, ...]] = (
    (0.5071, 0.4865, 0.4409),
    (0.2673, 0.2564, 0.2762),
)

#: Fraction of each class of the digits data held out as test set, and the seed of its split.
DIGITS_TEST_FRACTION = 0.2
DIGITS_SPLIT_SEED = 0

MNIST_FILES: tuple[str, ...] = (
    "mnist/train-images-idx3-ubyte.gz",
    "mnist/train-labels-idx1-ubyte.gz",
    "mnist/t10k-images-idx3-ubyte.gz",
    "mnist/t10k-labels-idx1-ubyte.gz",
)

SOURCE_DIGITS = "scikit-learn digits (bundled, 8x8)"
SOURCE_MNIST = "MNIST (original IDX files, checksums verified)"

_U8 = NDArray[np.uint8]
_I64 = NDArray[np.int64]
_F32 = NDArray[np.float32]


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """An image classification dataset split into training and test sets.

    Instances compare and hash by identity (the fields are arrays).

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    source : str
        Human-readable provenance, e.g. whether the lossy JPEG copy of CIFAR-10 was used. Any
        result computed on the data should carry this label.
    train_x, test_x : numpy.ndarray
        ``float32`` images, shape ``(n, C, H, W)``, normalised, C-contiguous, read-only.
    train_y, test_y : numpy.ndarray
        ``int64`` labels in ``[0, num_classes)``, shape ``(n,)``, read-only.
    num_classes : int
        Number of classes.

    Raises
    ------
    ParameterError
        If the arrays have the wrong dtype, rank or length, or a label is out of range.
    """

    name: str
    source: str
    train_x: _F32
    train_y: _I64
    test_x: _F32
    test_y: _I64
    num_classes: int

    def __post_init__(self) -> None:
        for split in ("train", "test"):
            x = getattr(self, f"{split}_x")
            y = getattr(self, f"{split}_y")
            if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 4:
                raise ParameterError(f"{split}_x", "must be a 4-D float32 array (n, C, H, W)")
            if not isinstance(y, np.ndarray) or y.dtype != np.int64 or y.ndim != 1:
                raise ParameterError(f"{split}_y", "must be a 1-D int64 array")
            if len(x) != len(y):
                raise ParameterError(
                    f"{split}_y", f"has {len(y)} labels for {len(x)} {split} images"
                )
            if len(y) and (int(y.min()) < 0 or int(y.max()) >= self.num_classes):
                raise ParameterError(f"{split}_y", f"labels must lie in [0, {self.num_classes})")
        if self.train_x.shape[1:] != self.test_x.shape[1:]:
            raise ParameterError("test_x", "train and test images have different shapes")

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """Shape ``(C, H, W)`` of one image."""
        c, h, w = self.train_x.shape[1:]
        return int(c), int(h), int(w)


@dataclass(frozen=True)
class ImageLoader:
    """How :func:`load_dataset` reads one dataset (an entry of :data:`IMAGE_DATASETS`).

    Parameters
    ----------
    read : callable
        ``read(root) -> ImageDataset`` with ``root`` the data directory (a :class:`~pathlib.Path`),
        or ``None`` when ``files`` is ``None``.
    files : tuple of str or None
        The files under the data directory that ``read`` may use, relative to it: the result is
        memoised on their sizes and modification times. ``None`` for data that need no data
        directory (bundled with a library; ``read`` memoises them itself).
    """

    read: Callable[[Path | None], ImageDataset]
    files: tuple[str, ...] | None


def load_dataset(name: str, data_dir: str | os.PathLike[str] | None = None) -> ImageDataset:
    """Load an image dataset by name.

    Parameters
    ----------
    name : {"digits", "mnist", "cifar10", "cifar100"}
        Which dataset (or one added by ``IMAGE_DATASETS.register``):

        - ``"digits"``: scikit-learn's bundled 8x8 digits (1,797 images, no data directory
          needed). Pixels scaled to ``x / 16 - 0.5``. Deterministic stratified split: within
          each class (in label order) the images are permuted by ``numpy.random.default_rng(0)``
          and the first ``round(0.2 * n_class)`` go to the test set; both sets keep the original
          order of the images.
        - ``"mnist"``: ``mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`` (IDX format),
          normalised as ``(x / 255 - 0.1307) / 0.3081``.
        - ``"cifar10"``: the original ``cifar-10-python.tar.gz`` if present, else the lossy JPEG
          copy ``cifar10_jpeg/CIFAR-10-images.tar.gz`` (``source`` says which). Per-channel
          normalisation with mean ``(0.4914, 0.4822, 0.4465)`` and std
          ``(0.2470, 0.2435, 0.2616)``.
        - ``"cifar100"``: ``cifar-100-python.tar.gz`` (fine labels, 100 classes), mean
          ``(0.5071, 0.4865, 0.4409)``, std ``(0.2673, 0.2564, 0.2762)``.
    data_dir : str or os.PathLike or None
        Data directory; ``None`` uses ``$FEDPRIVACY_DATA``. Ignored for ``"digits"``.

    Returns
    -------
    ImageDataset
        The dataset, memoised per process (same object for the same name, directory and files).

    Raises
    ------
    ParameterError
        If ``name`` is not a name of :data:`IMAGE_DATASETS` (the message lists them).
    DataNotFoundError
        If the data directory or a needed file is missing.
    ChecksumError
        If a file is not the published version (or cannot be parsed).

    Examples
    --------
    >>> load_dataset("digits").input_shape
    (1, 8, 8)
    >>> try:
    ...     load_dataset("imagenet")
    ... except ParameterError as exc:
    ...     print(exc)
    dataset: must be one of digits, mnist, cifar10, cifar100; got 'imagenet'
    """
    loader = IMAGE_DATASETS.lookup(name)
    if loader.files is None:
        return loader.read(None)
    root = resolve_data_dir(data_dir)
    return _load_from_dir(name, str(root), _fingerprint(root, loader.files))


def clear_dataset_cache() -> None:
    """Forget the datasets memoised by :func:`load_dataset` (frees their memory)."""
    _load_digits.cache_clear()
    _load_from_dir.cache_clear()


def _fingerprint(root: Path, relpaths: tuple[str, ...]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for rel in relpaths:
        try:
            st = (root / rel).stat()
        except OSError:
            out.append((rel, -1, -1))
        else:
            out.append((rel, st.st_size, st.st_mtime_ns))
    return tuple(out)


@functools.lru_cache(maxsize=4)
def _load_from_dir(
    name: str, root: str, fingerprint: tuple[tuple[str, int, int], ...]
) -> ImageDataset:
    del fingerprint  # part of the memoisation key only
    return IMAGE_DATASETS[name].read(Path(root))


def _normalise(
    images: _U8, mean_std: tuple[tuple[float, ...], tuple[float, ...]]
) -> NDArray[np.float32]:
    """Scale ``uint8`` images ``(n, C, H, W)`` to [0, 1] and standardise each channel."""
    mean = np.asarray(mean_std[0], dtype=np.float32).reshape(1, -1, 1, 1)
    std = np.asarray(mean_std[1], dtype=np.float32).reshape(1, -1, 1, 1)
    x = np.ascontiguousarray(images, dtype=np.float32)
    x /= np.float32(255.0)
    x -= mean
    x /= std
    return x


def _make(
    name: str,
    source: str,
    train: tuple[_U8, _I64],
    test: tuple[_U8, _I64],
    num_classes: int,
    mean_std: tuple[tuple[float, ...], tuple[float, ...]],
) -> ImageDataset:
    return ImageDataset(
        name=name,
        source=source,
        train_x=readonly(_normalise(train[0], mean_std)),
        train_y=readonly(np.ascontiguousarray(train[1], dtype=np.int64)),
        test_x=readonly(_normalise(test[0], mean_std)),
        test_y=readonly(np.ascontiguousarray(test[1], dtype=np.int64)),
        num_classes=num_classes,
    )


# ---------------------------------------------------------------------------------------------
# digits


@functools.lru_cache(maxsize=1)
def _load_digits() -> ImageDataset:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.asarray(bunch.images, dtype=np.float64)  # (1797, 8, 8), values 0..16
    labels = np.asarray(bunch.target, dtype=np.int64)
    num_classes = int(labels.max()) + 1
    rng = np.random.default_rng(DIGITS_SPLIT_SEED)
    is_test = np.zeros(len(labels), dtype=bool)
    for c in range(num_classes):
        idx = rng.permutation(np.flatnonzero(labels == c))
        is_test[idx[: round(DIGITS_TEST_FRACTION * len(idx))]] = True
    x = (images / 16.0 - 0.5).astype(np.float32)[:, None, :, :]

    def part(mask: NDArray[np.bool_]) -> tuple[_F32, _I64]:
        return (
            readonly(np.ascontiguousarray(x[mask])),
            readonly(np.ascontiguousarray(labels[mask])),
        )

    train_x, train_y = part(~is_test)
    test_x, test_y = part(is_test)
    return ImageDataset("digits", SOURCE_DIGITS, train_x, train_y, test_x, test_y, num_classes)


# ---------------------------------------------------------------------------------------------
# MNIST

_IDX_IMAGES_MAGIC = 2051
_IDX_LABELS_MAGIC = 2049


def _read_idx(path: Path, magic: int, ndim: int) -> _U8:
    """Parse a gzipped IDX file of unsigned bytes with ``ndim`` dimensions."""
    try:
        with gzip.open(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError) as exc:
        raise ChecksumError(f"{str(path)!r} is not a valid gzip file ({exc})") from exc
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ChecksumError(f"{str(path)!r}: truncated IDX header")
    found = int.from_bytes(data[:4], "big")
    if found != magic:
        raise ChecksumError(f"{str(path)!r}: IDX magic number is {found}, expected {magic}")
    dims = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    expected = header + int(np.prod(dims, dtype=np.int64))
    if len(data) != expected:
        raise ChecksumError(
            f"{str(path)!r}: IDX header announces dimensions {dims} ({expected} bytes), "
            f"file has {len(data)} bytes"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def _load_mnist(root: Path) -> ImageDataset:
    paths = [verify_known_file(root, rel) for rel in MNIST_FILES]
    splits = []
    for img_path, lab_path in ((paths[0], paths[1]), (paths[2], paths[3])):
        images = _read_idx(img_path, _IDX_IMAGES_MAGIC, 3)
        labels = _read_idx(lab_path, _IDX_LABELS_MAGIC, 1)
        if images.shape[1:] != (28, 28):
            raise ChecksumError(f"{str(img_path)!r}: images are {images.shape[1:]}, not 28x28")
        if len(images) != len(labels):
            raise ChecksumError(
                f"{str(img_path)!r} holds {len(images)} images but {str(lab_path)!r} holds "
                f"{len(labels)} labels"
            )
        if len(labels) and int(labels.max()) > 9:
            raise ChecksumError(f"{str(lab_path)!r}: label {int(labels.max())} is not a digit")
        splits.append((images[:, None, :, :], labels.astype(np.int64)))
    return _make("mnist", SOURCE_MNIST, splits[0], splits[1], 10, MNIST_MEAN_STD)


# ---------------------------------------------------------------------------------------------
# CIFAR (the files are read by fedprivacy.data.cifar)


def _load_cifar10(root: Path) -> ImageDataset:
    source, train, test = read_cifar10(root)
    return _make("cifar10", source, train, test, 10, CIFAR10_MEAN_STD)


def _load_cifar100(root: Path) -> ImageDataset:
    train, test = read_cifar100(root)
    return _make("cifar100", SOURCE_CIFAR100, train, test, 100, CIFAR100_MEAN_STD)


# ---------------------------------------------------------------------------------------------
# registry

#: How :func:`load_dataset` reads every dataset name.
IMAGE_DATASETS: Registry[ImageLoader] = Registry("dataset")


def _needs_dir(read: Callable[[Path], ImageDataset]) -> Callable[[Path | None], ImageDataset]:
    def read_dir(root: Path | None) -> ImageDataset:
        assert root is not None  # load_dataset passes the data directory when files are listed
        return read(root)

    return read_dir


IMAGE_DATASETS.register("digits", ImageLoader(lambda root: _load_digits(), None))
IMAGE_DATASETS.register("mnist", ImageLoader(_needs_dir(_load_mnist), MNIST_FILES))
IMAGE_DATASETS.register(
    "cifar10", ImageLoader(_needs_dir(_load_cifar10), (CIFAR10_TARBALL, CIFAR10_JPEG_TARBALL))
)
IMAGE_DATASETS.register("cifar100", ImageLoader(_needs_dir(_load_cifar100), (CIFAR100_TARBALL,)))

#: Names accepted by :func:`load_dataset` (the built-in datasets of :data:`IMAGE_DATASETS`).
DATASETS: tuple[str, ...] = tuple(IMAGE_DATASETS)
