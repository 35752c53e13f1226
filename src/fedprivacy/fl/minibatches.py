"""Minibatch orders of local training: which rows every group visits, epoch by epoch.

Both trainers (:class:`~fedprivacy.fl.local_training.VectorisedTrainer` and the loop oracle
:func:`~fedprivacy.fl.training_loops.train_groups_loop`) train *groups*: a FedAvg client, a
ULDP-FL (silo, user) pair or a whole silo. Group ``g`` owns the *positions*
``offsets[g]:offsets[g + 1]`` of an ``orders`` array of shape ``(epochs, m)``, whose entries are
row indices into the training rows ``x``. Group ``g``'s batch ``j`` of epoch ``e`` is::

    x[orders[e, offsets[g] + j*B : offsets[g] + min((j+1)*B, n_g)]]

with ``n_g = offsets[g + 1] - offsets[g]``: the epochs run in order, each over
``ceil(n_g / B)`` batches, the last one smaller if ``B`` does not divide ``n_g`` (as
``DataLoader(shuffle=True, drop_last=False)``).

Two draws fill it:

* :func:`client_orders` (FedAvg): a fresh ``rng.permutation`` of every client's samples, client
  by client and epoch by epoch, mapped to the client's global indices;
* :func:`epoch_orders` (ULDP-FL): per-record random keys sort the rows of every group within its
  block, so a user's batches do not depend on the other users' records (what the sensitivity
  tests rely on).

Examples
--------
>>> offsets, orders = client_orders([np.array([7, 8, 9]), np.array([4])], 1,
...                                 np.random.default_rng(0))
>>> offsets.tolist(), sorted(orders[0, :3].tolist()), orders[0, 3:].tolist()
([0, 3, 4], [7, 8, 9], [4])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError

__all__ = ["check_offsets", "client_orders", "epoch_orders"]

_I64 = NDArray[np.int64]


def check_offsets(offsets: ArrayLike, num_positions: int) -> _I64:
    """Return ``offsets`` as int64 after checking that they rise from 0 to ``num_positions``.

    Raises
    ------
    ParameterError
        If ``offsets`` is not a 1-D integer array rising from 0 to ``num_positions``.
    """
    off = np.asarray(offsets)
    if off.ndim != 1 or len(off) < 1 or not np.issubdtype(off.dtype, np.integer):
        raise ParameterError("offsets", "must be a 1-D integer array (k + 1,)")
    off = off.astype(np.int64)
    if int(off[0]) != 0 or int(off[-1]) != num_positions or np.any(np.diff(off) < 0):
        raise ParameterError(
            "offsets",
            f"must rise from 0 to the number of rows ({num_positions}), got {off.tolist()}",
        )
    return off


def client_orders(
    client_indices: Sequence[ArrayLike], epochs: int, rng: np.random.Generator
) -> tuple[_I64, _I64]:
    """Draw the minibatch orders of every client's local training (FedAvg).

    For each client ``c`` (in order) with samples, and each epoch (in order), a fresh
    permutation of ``range(len(client_indices[c]))`` is drawn from ``rng`` and mapped to the
    client's indices; a client without samples draws nothing.

    Parameters
    ----------
    client_indices : sequence of array_like of int
        ``client_indices[c]`` holds the row indices (into the training set) of client ``c``.
    epochs : int
        Local epochs, at least 1.
    rng : numpy.random.Generator
        Source of the permutations.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray) of int64
        ``offsets`` of shape ``(C + 1,)`` and ``orders`` of shape ``(epochs, m)``,
        ``m`` the clients' total number of samples.

    Raises
    ------
    ParameterError
        If ``epochs < 1`` or an index array is not 1-D integer with entries at least 0.
    """
    q = require_int("epochs", epochs, minimum=1)
    arrays = [np.asarray(idx) for idx in client_indices]
    for c, idx in enumerate(arrays):
        integer = idx.size == 0 or np.issubdtype(idx.dtype, np.integer)
        if idx.ndim != 1 or not integer or (idx.size and idx.min() < 0):
            raise ParameterError(f"client_indices[{c}]", "must be a 1-D array of indices >= 0")
    sizes = [len(idx) for idx in arrays]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    orders = np.empty((q, int(offsets[-1])), dtype=np.int64)
    for c, idx in enumerate(arrays):
        lo, hi = int(offsets[c]), int(offsets[c + 1])
        if hi == lo:
            continue
        for e in range(q):
            perm = rng.permutation(hi - lo).astype(np.int64)
            orders[e, lo:hi] = idx[perm]
    return offsets, orders


def epoch_orders(keys: ArrayLike | None, offsets: ArrayLike, epochs: int) -> _I64:
    """Return the row order of every epoch: each group's rows, shuffled within its block.

    Parameters
    ----------
    keys : array_like of float, shape (epochs, n), or None
        One random key per row and epoch; a group's rows are visited by increasing key (ties by
        row). ``None`` keeps the rows in order (no shuffling).
    offsets : array_like of int, shape (k + 1,)
        Group ``g`` owns rows ``offsets[g]:offsets[g + 1]``.
    epochs : int
        Number of epochs.

    Returns
    -------
    numpy.ndarray of int64, shape (epochs, n)
        ``orders[e]`` is a permutation of ``0..n-1`` mapping each block onto itself.

    Raises
    ------
    ParameterError
        If the shapes do not match.

    Examples
    --------
    >>> epoch_orders([[0.9, 0.1, 0.5]], [0, 2, 3], 1).tolist()
    [[1, 0, 2]]
    """
    q = require_int("epochs", epochs, minimum=1)
    off = np.asarray(offsets).astype(np.int64)
    n = int(off[-1]) if len(off) else 0
    off = check_offsets(off, n)
    if keys is None:
        return np.tile(np.arange(n, dtype=np.int64), (q, 1))
    k = np.asarray(keys, dtype=np.float64)
    if k.shape != (q, n):
        raise ParameterError("keys", f"must have shape ({q}, {n}), got {k.shape}")
    group = np.repeat(np.arange(len(off) - 1, dtype=np.int64), np.diff(off))
    out = np.empty((q, n), dtype=np.int64)
    for e in range(q):
        out[e] = np.lexsort((k[e], group))
    return out
