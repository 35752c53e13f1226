"""The training data of a ULDP-FL run on torch: all silos' records grouped by silo, then user.

A :class:`Federation` is what the methods (:mod:`fedprivacy.uldp.methods`) consume. It holds
one feature tensor with the records of silo 0 (grouped by user, each user's rows contiguous),
then silo 1, ..., as :func:`fedprivacy.data.shards.silo_shards` lays them out, with the
offsets of every silo and, inside each silo, of every present user; the pool index of every
row (per-record random keys are indexed by it, so that a user's minibatches do not depend on
the other users' records); and the pooled test set.

:meth:`Federation.without_user` and :meth:`Federation.keep_rows` build neighbouring or filtered
federations with the same pool indices and the same number of users (the sensitivity tests and
the record limits of ULDP-GROUP-k use them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.data.allocation import Allocation
from fedprivacy.data.shards import silo_shards
from fedprivacy.data.silo_dataset import SiloDataset
from fedprivacy.errors import ParameterError
from fedprivacy.uldp.tasks import TaskSpec, task_for

__all__ = ["Federation", "build_federation"]

_I64 = NDArray[np.int64]


def _readonly(a: NDArray[Any]) -> NDArray[Any]:
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class Federation:
    """Records of every silo grouped by user, as torch tensors, and the test set.

    Parameters
    ----------
    dataset : str
        Dataset name.
    source : str
        The dataset's provenance (``synthetic stand-in`` for generated data).
    task : TaskSpec
        Model, loss and metric.
    x, y : torch.Tensor
        Training inputs and targets, silo 0's rows first; within a silo, users ascending with
        contiguous rows.
    silo_names : tuple of str
        One name per silo.
    silo_offsets : numpy.ndarray of int64, shape (S + 1,)
        Silo ``s`` owns rows ``silo_offsets[s]:silo_offsets[s + 1]``.
    silo_users : tuple of numpy.ndarray
        Per silo, the users present (ascending).
    user_offsets : tuple of numpy.ndarray
        Per silo, offsets of its users *relative to the silo's first row*, shape ``(k_s + 1,)``.
    record_index : numpy.ndarray of int64, shape (n,)
        Pool index of every row.
    num_users : int
        Number of users ``|U|`` (some may hold no record).
    pool_size : int
        Size of the training pool (pool indices lie below it).
    test_x, test_y : torch.Tensor
        Pooled test set.
    """

    dataset: str
    source: str
    task: TaskSpec
    x: torch.Tensor
    y: torch.Tensor
    silo_names: tuple[str, ...]
    silo_offsets: _I64
    silo_users: tuple[_I64, ...]
    user_offsets: tuple[_I64, ...]
    record_index: _I64
    num_users: int
    pool_size: int
    test_x: torch.Tensor
    test_y: torch.Tensor

    def __post_init__(self) -> None:
        s = len(self.silo_names)
        if len(self.silo_offsets) != s + 1 or len(self.silo_users) != s:
            raise ParameterError("silo_offsets", "must describe every silo")
        if int(self.silo_offsets[-1]) != self.x.shape[0] or self.y.shape[0] != self.x.shape[0]:
            raise ParameterError("x", "rows do not match the offsets")
        for k in range(s):
            size = int(self.silo_offsets[k + 1] - self.silo_offsets[k])
            off = self.user_offsets[k]
            if len(off) != len(self.silo_users[k]) + 1 or int(off[-1]) != size:
                raise ParameterError("user_offsets", f"silo {k} does not match its rows")

    # -- sizes -----------------------------------------------------------------------------

    @property
    def num_silos(self) -> int:
        """Number of silos ``|S|``."""
        return len(self.silo_names)

    @property
    def num_records(self) -> int:
        """Number of training rows."""
        return int(self.x.shape[0])

    @property
    def device(self) -> torch.device:
        """Device of the tensors."""
        return self.x.device

    def silo_slice(self, silo: int) -> slice:
        """Rows of ``silo``."""
        return slice(int(self.silo_offsets[silo]), int(self.silo_offsets[silo + 1]))

    @cached_property
    def group_offsets(self) -> _I64:
        """Row offsets of every (silo, user) *group* over all silos, shape ``(G + 1,)``.

        Group ``g`` is the records of user :attr:`group_user` ``[g]`` in silo
        :attr:`group_silo` ``[g]``: silo 0's users first (ascending), then silo 1's, ...
        The in-process rounds train every group of every silo in one vectorised pass.
        """
        starts = [self.silo_offsets[s] + self.user_offsets[s][:-1] for s in range(self.num_silos)]
        tail = np.array([self.num_records], dtype=np.int64)
        return _readonly(np.concatenate([*starts, tail]).astype(np.int64))

    @cached_property
    def group_silo(self) -> _I64:
        """The silo of every group, shape ``(G,)`` (see :attr:`group_offsets`)."""
        sizes = [len(u) for u in self.silo_users]
        return _readonly(np.repeat(np.arange(self.num_silos, dtype=np.int64), sizes))

    @cached_property
    def group_user(self) -> _I64:
        """The user of every group, shape ``(G,)`` (see :attr:`group_offsets`)."""
        return _readonly(np.concatenate(self.silo_users).astype(np.int64))

    def histogram(self) -> _I64:
        """Return ``n_{s,u}``, shape ``(S, U)``."""
        h = np.zeros((self.num_silos, self.num_users), dtype=np.int64)
        for s in range(self.num_silos):
            h[s, self.silo_users[s]] = np.diff(self.user_offsets[s])
        return h

    def records_per_user(self) -> _I64:
        """Return ``N_u``, shape ``(U,)``."""
        out: _I64 = self.histogram().sum(axis=0)
        return out

    def weights(self, weighted: bool) -> NDArray[np.float64]:
        """Return the clipping weights ``w_{s,u}``, shape ``(S, U)``.

        Parameters
        ----------
        weighted : bool
            ``False``: ``1 / |S|`` for every pair (ULDP-AVG / SGD). ``True``: ``n_{s,u} / N_u``
            (ULDP-AVG-w / SGD-w, Eq. (3)), computed in the clear; 0 for users without records.

        Returns
        -------
        numpy.ndarray of float64
            Each user's column sums to 1 (0 for a user without records when weighted).
        """
        if not weighted:
            return np.full((self.num_silos, self.num_users), 1.0 / self.num_silos)
        h = self.histogram().astype(np.float64)
        total = h.sum(axis=0)
        out: NDArray[np.float64] = np.divide(h, total, out=np.zeros_like(h), where=total > 0)
        return out

    # -- neighbours and filters ------------------------------------------------------------

    def keep_rows(self, keep: ArrayLike) -> Federation:
        """Return the federation restricted to the rows where ``keep`` is true.

        Users, pool indices and the test set are unchanged; users left without rows in a silo
        disappear from that silo.

        Parameters
        ----------
        keep : array_like of bool, shape (n,)
            Rows to keep.

        Returns
        -------
        Federation
            A new federation (tensors indexed, not shared).
        """
        mask = np.asarray(keep, dtype=bool)
        if mask.shape != (self.num_records,):
            raise ParameterError("keep", f"must have shape ({self.num_records},)")
        silo_offsets = [0]
        users: list[_I64] = []
        offsets: list[_I64] = []
        for s in range(self.num_silos):
            sl = self.silo_slice(s)
            m = mask[sl]
            counts = (
                np.add.reduceat(m.astype(np.int64), self.user_offsets[s][:-1])
                if len(self.silo_users[s])
                else np.zeros(0, dtype=np.int64)
            )
            present = counts > 0
            users.append(_readonly(self.silo_users[s][present].copy()))
            offsets.append(_readonly(np.concatenate([[0], np.cumsum(counts[present])])))
            silo_offsets.append(silo_offsets[-1] + int(m.sum()))
        idx = torch.from_numpy(np.flatnonzero(mask)).to(self.device)
        return Federation(
            dataset=self.dataset,
            source=self.source,
            task=self.task,
            x=self.x[idx],
            y=self.y[idx],
            silo_names=self.silo_names,
            silo_offsets=_readonly(np.asarray(silo_offsets, dtype=np.int64)),
            silo_users=tuple(users),
            user_offsets=tuple(o.astype(np.int64) for o in offsets),
            record_index=_readonly(self.record_index[mask].copy()),
            num_users=self.num_users,
            pool_size=self.pool_size,
            test_x=self.test_x,
            test_y=self.test_y,
        )

    def user_rows(self, user: int) -> _I64:
        """Return the rows of ``user`` in every silo, ascending."""
        u = require_int("user", user, 0, self.num_users - 1)
        rows: list[_I64] = []
        for s in range(self.num_silos):
            j = int(np.searchsorted(self.silo_users[s], u))
            if j < len(self.silo_users[s]) and int(self.silo_users[s][j]) == u:
                base = int(self.silo_offsets[s])
                off = self.user_offsets[s]
                rows.append(np.arange(base + off[j], base + off[j + 1], dtype=np.int64))
        return np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)

    def without_user(self, user: int) -> Federation:
        """Return the neighbouring federation without any record of ``user`` (in every silo)."""
        keep = np.ones(self.num_records, dtype=bool)
        keep[self.user_rows(user)] = False
        return self.keep_rows(keep)


def build_federation(
    dataset: SiloDataset,
    allocation: Allocation,
    *,
    device: str | torch.device = "cpu",
) -> Federation:
    """Put a dataset and its allocation on torch, grouped by silo and user.

    Parameters
    ----------
    dataset : SiloDataset
        From :func:`fedprivacy.data.tabular.load_silo_dataset`.
    allocation : Allocation
        An allocation of its training pool (:mod:`fedprivacy.data.allocation`).
    device : str or torch.device
        Where the tensors live.

    Returns
    -------
    Federation
        The federation; the test set is the dataset's pooled test set.

    Raises
    ------
    ParameterError
        If the allocation does not match the dataset.
    """
    shards = silo_shards(dataset, allocation)
    task: TaskSpec = task_for(dataset.name, dataset.task, dataset.num_features, dataset.num_classes)
    xs = [np.asarray(sh.x) for sh in shards]
    ys = [np.asarray(sh.y) for sh in shards]
    sizes = [len(v) for v in xs]
    x = np.concatenate(xs) if xs else np.zeros((0, *dataset.input_shape), dtype=np.float32)
    y = np.concatenate(ys)
    test_x, test_y = dataset.pooled_test()
    dev = torch.device(device)
    return Federation(
        dataset=dataset.name,
        source=dataset.source,
        task=task,
        x=torch.from_numpy(np.ascontiguousarray(x)).to(dev),
        y=torch.from_numpy(np.ascontiguousarray(y)).to(dev),
        silo_names=tuple(sh.name for sh in shards),
        silo_offsets=_readonly(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)),
        silo_users=tuple(sh.users for sh in shards),
        user_offsets=tuple(sh.offsets for sh in shards),
        record_index=_readonly(np.concatenate([sh.record_index for sh in shards])),
        num_users=allocation.num_users,
        pool_size=allocation.num_records,
        test_x=torch.from_numpy(np.array(test_x)).to(dev),
        test_y=torch.from_numpy(np.array(test_y)).to(dev),
    )
