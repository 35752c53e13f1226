"""The container of cross-silo data: :class:`SiloDataset` and :func:`make_silo_dataset`.

A :class:`SiloDataset` holds, per silo, the training and test features and targets. Two kinds:

- **fixed silos** (``fixed_silos=True``): the silos come with the data, as in FLamby's
  Fed-Heart-Disease (4 hospitals, :mod:`fedprivacy.data.heart_disease`) and Fed-TCGA-BRCA
  (6 regions, :mod:`fedprivacy.data.tcga_brca`). Only users are allocated afterwards
  (:func:`fedprivacy.data.fixed_silos.allocate_fixed_silos`).
- **a pool** (``fixed_silos=False``, one pseudo-silo named ``"pool"``): MNIST and Creditcard
  (:mod:`fedprivacy.data.creditcard`). Users *and* silos are allocated afterwards
  (:func:`fedprivacy.data.allocators.allocate_pool`), which makes the silos.

Record ``i`` of the training pool (:meth:`SiloDataset.pooled_train`) is record ``i`` of an
allocation: for fixed silos the pool is the concatenation of the silos' training sets in silo
order.

Targets: ``"binary"`` and ``"multiclass"`` tasks hold ``int64`` labels of shape ``(n,)``;
``"survival"`` holds ``float32`` arrays of shape ``(n, 2)`` whose columns are the event indicator
``E`` (column :data:`EVENT`) and the time ``T`` (column :data:`TIME`), as in FLamby.

Every array is read-only; copy before modifying. ``source`` says where the data came from and
must travel with every result (it says ``synthetic stand-in`` for generated data).

The loaders (:mod:`fedprivacy.data.heart_disease`, :mod:`fedprivacy.data.tcga_brca`,
:mod:`fedprivacy.data.creditcard`) build one here; :mod:`fedprivacy.data.tabular` names them
(``load_silo_dataset``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError

__all__ = ["EVENT", "POOL_NAME", "TASKS", "TIME", "SiloDataset", "make_silo_dataset"]

#: Tasks a :class:`SiloDataset` can carry.
TASKS: tuple[str, ...] = ("binary", "multiclass", "survival")

#: Column of a survival target holding the event indicator ``E`` (1 = event observed).
EVENT = 0
#: Column of a survival target holding the time ``T``.
TIME = 1

#: Name of the single pseudo-silo of a pool dataset.
POOL_NAME = "pool"

_F32 = NDArray[np.float32]
_I64 = NDArray[np.int64]


def readonly(a: NDArray[Any]) -> NDArray[Any]:
    """Make ``a`` read-only in place and return it."""
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class SiloDataset:
    """Training and test data split into silos (or one pool).

    Instances compare and hash by identity (the fields are arrays).

    Parameters
    ----------
    name : str
        Dataset name, e.g. ``"heart_disease"``.
    source : str
        Human-readable provenance; any result computed on the data should carry it.
    task : {"binary", "multiclass", "survival"}
        The learning task (see the module docstring for the target layout).
    silo_names : tuple of str
        One name per silo; ``("pool",)`` for a pool dataset.
    train_x, test_x : tuple of numpy.ndarray
        Per silo, ``float32`` features of shape ``(n_s, *input_shape)``, read-only.
    train_y, test_y : tuple of numpy.ndarray
        Per silo, the targets: ``int64`` labels ``(n_s,)`` or, for survival, ``float32``
        ``(n_s, 2)`` with columns ``(E, T)``. Read-only.
    feature_names : tuple of str
        Names of the feature columns of tabular data; empty for images.
    num_classes : int
        Number of classes (2 for binary); 0 for survival.
    fixed_silos : bool
        Whether the silos come with the data (FLamby) rather than from an allocation.

    Raises
    ------
    ParameterError
        If the fields are inconsistent (lengths, dtypes, shapes, label range).
    """

    name: str
    source: str
    task: str
    silo_names: tuple[str, ...]
    train_x: tuple[_F32, ...]
    train_y: tuple[NDArray[Any], ...]
    test_x: tuple[_F32, ...]
    test_y: tuple[NDArray[Any], ...]
    feature_names: tuple[str, ...]
    num_classes: int
    fixed_silos: bool

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ParameterError("task", f"must be one of {', '.join(TASKS)}; got {self.task!r}")
        s = len(self.silo_names)
        if s == 0:
            raise ParameterError("silo_names", "must name at least one silo")
        if not self.fixed_silos and s != 1:
            raise ParameterError("silo_names", "a pool dataset has exactly one pseudo-silo")
        for field in ("train_x", "train_y", "test_x", "test_y"):
            if len(getattr(self, field)) != s:
                raise ParameterError(field, f"must hold one array per silo ({s})")
        if self.task == "survival":
            if self.num_classes != 0:
                raise ParameterError("num_classes", "must be 0 for a survival task")
        elif self.num_classes < 2 or (self.task == "binary" and self.num_classes != 2):
            raise ParameterError("num_classes", f"invalid for task {self.task!r}")
        shape = self.train_x[0].shape[1:]
        for split in ("train", "test"):
            for k, (x, y) in enumerate(
                zip(getattr(self, f"{split}_x"), getattr(self, f"{split}_y"), strict=True)
            ):
                where = f"{split}_x[{k}]"
                if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim < 2:
                    raise ParameterError(where, "must be a float32 array (n, *input_shape)")
                if x.shape[1:] != shape:
                    raise ParameterError(where, f"has input shape {x.shape[1:]}, expected {shape}")
                self._check_targets(f"{split}_y[{k}]", y, len(x))
        if self.feature_names and (len(shape) != 1 or len(self.feature_names) != shape[0]):
            raise ParameterError(
                "feature_names", f"has {len(self.feature_names)} names for inputs of shape {shape}"
            )

    def _check_targets(self, where: str, y: object, n: int) -> None:
        if not isinstance(y, np.ndarray):
            raise ParameterError(where, "must be a numpy array")
        if self.task == "survival":
            if y.dtype != np.float32 or y.shape != (n, 2):
                raise ParameterError(where, f"must be a float32 array of shape ({n}, 2): (E, T)")
            return
        if y.dtype != np.int64 or y.shape != (n,):
            raise ParameterError(where, f"must be an int64 array of shape ({n},)")
        if n and (int(y.min()) < 0 or int(y.max()) >= self.num_classes):
            raise ParameterError(where, f"labels must lie in [0, {self.num_classes})")

    @property
    def num_silos(self) -> int:
        """Number of silos (1 for a pool)."""
        return len(self.silo_names)

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one record's features, e.g. ``(13,)`` or ``(1, 28, 28)``."""
        return tuple(int(d) for d in self.train_x[0].shape[1:])

    @property
    def num_features(self) -> int:
        """Number of scalar inputs per record (product of :attr:`input_shape`)."""
        return int(np.prod(self.input_shape, dtype=np.int64))

    def train_sizes(self) -> _I64:
        """Return the number of training records of each silo, shape ``(num_silos,)``."""
        return np.array([len(x) for x in self.train_x], dtype=np.int64)

    def test_sizes(self) -> _I64:
        """Return the number of test records of each silo, shape ``(num_silos,)``."""
        return np.array([len(x) for x in self.test_x], dtype=np.int64)

    def pooled_train(self) -> tuple[_F32, NDArray[Any]]:
        """Return all training records, silos concatenated in silo order.

        This is the record order of an allocation. A pool dataset returns its arrays without
        copying.

        Returns
        -------
        tuple of numpy.ndarray
            ``(x, y)``, read-only.
        """
        return self._pooled(self.train_x, self.train_y)

    def pooled_test(self) -> tuple[_F32, NDArray[Any]]:
        """Return all test records, silos concatenated in silo order (FLamby's pooled test).

        Returns
        -------
        tuple of numpy.ndarray
            ``(x, y)``, read-only.
        """
        return self._pooled(self.test_x, self.test_y)

    @staticmethod
    def _pooled(xs: tuple[_F32, ...], ys: tuple[NDArray[Any], ...]) -> tuple[_F32, NDArray[Any]]:
        if len(xs) == 1:
            return xs[0], ys[0]
        return readonly(np.concatenate(xs)), readonly(np.concatenate(ys))

    def describe(self) -> dict[str, object]:
        """Return a JSON-ready summary: name, source, task, silos and their sizes.

        Returns
        -------
        dict
            Keys ``name``, ``source``, ``task``, ``fixed_silos``, ``silos`` (list of
            ``{"name", "train", "test"}``), ``input_shape``, ``num_classes``.
        """
        return {
            "name": self.name,
            "source": self.source,
            "task": self.task,
            "fixed_silos": self.fixed_silos,
            "silos": [
                {"name": n, "train": int(a), "test": int(b)}
                for n, a, b in zip(
                    self.silo_names, self.train_sizes(), self.test_sizes(), strict=True
                )
            ],
            "input_shape": list(self.input_shape),
            "num_classes": self.num_classes,
        }


def make_silo_dataset(
    *,
    name: str,
    source: str,
    task: str,
    silo_names: tuple[str, ...],
    train: list[tuple[NDArray[Any], NDArray[Any]]],
    test: list[tuple[NDArray[Any], NDArray[Any]]],
    feature_names: tuple[str, ...],
    num_classes: int,
    fixed_silos: bool,
) -> SiloDataset:
    """Build a :class:`SiloDataset`, casting to the canonical dtypes and freezing the arrays.

    Parameters
    ----------
    name, source, task, silo_names, feature_names, num_classes, fixed_silos
        As in :class:`SiloDataset`.
    train, test : list of (x, y)
        Per silo, features and targets (any numeric dtype; copied when a cast is needed).

    Returns
    -------
    SiloDataset
        The dataset, arrays C-contiguous and read-only.
    """
    y_dtype = np.float32 if task == "survival" else np.int64

    def fix(pairs: list[tuple[NDArray[Any], NDArray[Any]]], i: int) -> tuple[NDArray[Any], ...]:
        dtype = np.float32 if i == 0 else y_dtype
        return tuple(readonly(np.ascontiguousarray(p[i], dtype=dtype)) for p in pairs)

    return SiloDataset(
        name=name,
        source=source,
        task=task,
        silo_names=silo_names,
        train_x=fix(train, 0),
        train_y=fix(train, 1),
        test_x=fix(test, 0),
        test_y=fix(test, 1),
        feature_names=feature_names,
        num_classes=num_classes,
        fixed_silos=fixed_silos,
    )
