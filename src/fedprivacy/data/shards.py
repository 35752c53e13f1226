"""Per-silo views of a dataset's training pool, grouped by user, for per-user training.

:func:`silo_shards` cuts the training pool of a
:class:`~fedprivacy.data.tabular.SiloDataset` into one :class:`SiloShard` per silo of an
:class:`~fedprivacy.data.allocation.Allocation`: the silo's records, grouped by user (each
user's rows contiguous), with the offsets that delimit the users.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.data.allocation import Allocation
from fedprivacy.data.silo_dataset import SiloDataset, readonly
from fedprivacy.errors import ParameterError

_I64 = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class SiloShard:
    """The training records of one silo, grouped by user, ready for per-user training.

    Parameters
    ----------
    silo : int
        The silo index.
    name : str
        The silo's name (the dataset's for fixed silos, ``"silo<k>"`` for a pool).
    x : numpy.ndarray
        Features of the silo's records, grouped by user (ascending user, then pool order).
    y : numpy.ndarray
        Their targets.
    user : numpy.ndarray of int64
        The user of each record (ascending).
    record_index : numpy.ndarray of int64
        The pool index of each record.
    users : numpy.ndarray of int64, shape (k,)
        The users present, ascending.
    offsets : numpy.ndarray of int64, shape (k + 1,)
        User ``users[j]`` owns rows ``offsets[j]:offsets[j + 1]``.
    """

    silo: int
    name: str
    x: NDArray[Any]
    y: NDArray[Any]
    user: _I64
    record_index: _I64
    users: _I64
    offsets: _I64

    @property
    def num_records(self) -> int:
        """Number of records in the silo."""
        return int(len(self.user))

    @property
    def counts(self) -> _I64:
        """Records per present user, ``n_{s,u}`` for ``u`` in :attr:`users`."""
        return np.diff(self.offsets)

    def rows_of(self, user: int) -> slice:
        """Return the rows of ``user`` in :attr:`x` / :attr:`y` (an empty slice if absent)."""
        j = int(np.searchsorted(self.users, user))
        if j == len(self.users) or int(self.users[j]) != user:
            return slice(0, 0)
        return slice(int(self.offsets[j]), int(self.offsets[j + 1]))


def silo_shards(dataset: SiloDataset, allocation: Allocation) -> tuple[SiloShard, ...]:
    """Split a dataset's training pool into per-silo shards grouped by user.

    Parameters
    ----------
    dataset : SiloDataset
        The dataset; its :meth:`~fedprivacy.data.tabular.SiloDataset.pooled_train` order is
        the allocation's record order.
    allocation : Allocation
        An allocation of that pool; for fixed silos, one made by :func:`allocate_fixed_silos`
        with the dataset's :meth:`~fedprivacy.data.tabular.SiloDataset.train_sizes`.

    Returns
    -------
    tuple of SiloShard
        One per silo of the allocation (the arrays are copies, read-only).

    Raises
    ------
    ParameterError
        If the allocation does not match the dataset.
    """
    x, y = dataset.pooled_train()
    if allocation.num_records != len(x):
        raise ParameterError(
            "allocation",
            f"covers {allocation.num_records} records, the training pool has {len(x)}",
        )
    if dataset.fixed_silos:
        expected = np.repeat(np.arange(dataset.num_silos), dataset.train_sizes())
        if allocation.num_silos != dataset.num_silos or not np.array_equal(
            allocation.silo, expected
        ):
            raise ParameterError(
                "allocation",
                f"does not keep the fixed silos of {dataset.name!r}: use allocate_fixed_silos "
                f"with silo_sizes={dataset.train_sizes().tolist()}",
            )
    shards = []
    for s in range(allocation.num_silos):
        group = allocation.silo_users(s)
        idx = group.records
        name = dataset.silo_names[s] if dataset.fixed_silos else f"silo{s}"
        shards.append(
            SiloShard(
                silo=s,
                name=name,
                x=readonly(x[idx]),
                y=readonly(y[idx]),
                user=readonly(allocation.user[idx]),
                record_index=idx,
                users=group.users,
                offsets=group.offsets,
            )
        )
    return tuple(shards)
