"""Per-user local training inside a silo, vectorised across users, and its reference loop.

ULDP-AVG (Algorithm 3 of Kato et al.) trains one model copy *per user* in every silo, from the
global model, on that user's records only; ULDP-SGD takes one gradient per user. With 10,000
users this is the cost centre of the algorithms. The authors' code loops over users with a deep
copy of the model and an optimiser each; here all the users of a silo (or any set of row
*groups*) are trained at once:

* the records of a silo are grouped by user, each group's rows contiguous (as
  :func:`fedprivacy.data.shards.silo_shards` lays them out); ``offsets`` delimit the groups;
* the groups' parameters are stacked into a ``(k, P)`` tensor; every local step gathers the
  minibatch of every active group with one indexing operation into a padded
  ``(k, b, *input_shape)`` tensor with a 0/1 mask, and :func:`torch.func.vmap` over
  :func:`torch.func.grad` of :func:`torch.func.functional_call` gives all the groups' gradients
  of their *masked mean* loss (the mean over the real rows of the batch, exactly the loss of the
  smaller batch); one SGD update then moves the whole stack;
* groups are sorted by their number of steps, so the groups still training at a step are a
  prefix of the stack (a view: no gather, no scatter), and processed in chunks of at most
  ``max_rows`` rows per call, which bounds memory and keeps padding small (neighbouring groups
  in the sorted order have similar sizes); the batch width is cut to the largest real batch of
  the chunk (users with 2 records and a batch size of 64 cost 2 rows, not 64);
* the per-group deltas are clipped in L2 and weighted on the stack, chunk by chunk, so the
  ``(k, P)`` deltas of all the users never need to exist at once
  (:func:`fedprivacy.uldp.clipped_sums.clipped_sums`).

Minibatches are fixed by an ``orders`` array (:func:`epoch_orders`): for each epoch, a
permutation of the rows that keeps every group in its block. Group ``g``'s batch ``j`` of epoch
``e`` is ``orders[e, offsets[g] + j*B : offsets[g] + min((j+1)*B, n_g)]``: the epochs run in
order, each over ``ceil(n_g / B)`` batches, the last one smaller if ``B`` does not divide
``n_g`` (as ``DataLoader(shuffle=True, drop_last=False)``). The orders come from per-record
random keys, so the batches of a user do not depend on the other users' records (what the
sensitivity tests rely on).

:func:`~fedprivacy.uldp.per_user_loops.train_groups_loop` and
:func:`~fedprivacy.uldp.per_user_loops.group_gradients_loop` are the oracles: one deep copy of the
model and one :class:`torch.optim.SGD` per group, one ``backward()`` per batch, as the
authors' code does. The vectorised trainer reproduces them to float rounding
(``tests/uldp/test_per_user_training.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray
from torch import nn

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_training import LocalTrainingSpec
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.stacked_grad import stacked_gradient

__all__ = [
    "DEFAULT_MAX_ROWS",
    "GPU_MAX_ROWS",
    "PerUserTrainer",
    "default_max_rows",
    "epoch_orders",
    "require_plain_sgd",
]

_I64 = NDArray[np.int64]

#: Default bound on rows (groups x batch width) per vectorised call on a CPU. On a 2-core CPU,
#: one silo of MNIST (7,322 users, 12,000 records) trained fastest with 512-1,024 (cache-sized
#: chunks; 4,096 was 1.5-2x slower).
DEFAULT_MAX_ROWS = 1024
#: The same on a GPU: a whole ULDP-AVG round of MNIST (10,000 users, 5 silos, zipf) on one
#: H100 took 1.92 s with 4,096 rows, 1.97 s with 16,384 (twice the memory) and 4.08 s with
#: 65,536 (more padding), against 3.83 s silo by silo with 1,024 (benchmarks/RESULTS.md).
GPU_MAX_ROWS = 4096


def default_max_rows(device: str | torch.device) -> int:
    """:data:`GPU_MAX_ROWS` on a CUDA device, else :data:`DEFAULT_MAX_ROWS`.

    Examples
    --------
    >>> default_max_rows("cpu"), default_max_rows("cuda:0")
    (1024, 4096)
    """
    return GPU_MAX_ROWS if torch.device(device).type == "cuda" else DEFAULT_MAX_ROWS


def require_plain_sgd(spec: LocalTrainingSpec) -> LocalTrainingSpec:
    """Check ``spec`` for the per-user trainers, which run plain SGD (as the paper); return it.

    Parameters
    ----------
    spec : LocalTrainingSpec
        Local epochs ``Q``, batch size ``B`` and local learning rate ``eta_l``.

    Returns
    -------
    LocalTrainingSpec
        ``spec``.

    Raises
    ------
    ParameterError
        If a field is out of range (:meth:`LocalTrainingSpec.validate`), or ``momentum`` or
        ``weight_decay`` is not 0.

    Examples
    --------
    >>> require_plain_sgd(LocalTrainingSpec(epochs=2, batch_size=8, lr=0.1)).batch_size
    8
    >>> require_plain_sgd(LocalTrainingSpec(momentum=0.9))
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: momentum: must be 0: per-user training is plain SGD, got 0.9
    """
    spec.validate()
    for name in ("momentum", "weight_decay"):
        value = getattr(spec, name)
        if value != 0:
            raise ParameterError(name, f"must be 0: per-user training is plain SGD, got {value!r}")
    return spec


def _check_offsets(offsets: ArrayLike, num_rows: int) -> _I64:
    off = np.asarray(offsets)
    if off.ndim != 1 or len(off) < 1 or not np.issubdtype(off.dtype, np.integer):
        raise ParameterError("offsets", "must be a 1-D integer array (k + 1,)")
    off = off.astype(np.int64)
    if int(off[0]) != 0 or int(off[-1]) != num_rows or np.any(np.diff(off) < 0):
        raise ParameterError(
            "offsets", f"must rise from 0 to the number of rows ({num_rows}), got {off.tolist()}"
        )
    return off


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
    """
    q = require_int("epochs", epochs, minimum=1)
    off = np.asarray(offsets).astype(np.int64)
    n = int(off[-1]) if len(off) else 0
    off = _check_offsets(off, n)
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


class PerUserTrainer:
    """Vectorised per-group local SGD and per-group gradients (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        Architecture; only its structure is used (it is not modified). It must have no buffers.
    loss : MaskedLoss
        ``loss(output, target, mask)``, the masked mean loss of a batch.
    max_rows : int
        Largest number of rows (groups x batch width) per vectorised call. One group larger
        than this is still processed whole.

    Attributes
    ----------
    calls : int
        Vectorised gradient calls made so far (each a fixed number of kernel launches).
    rows : int
        Rows (records and padding) differentiated so far; with the real rows, the padding cost.
    """

    def __init__(self, model: nn.Module, loss: MaskedLoss, *, max_rows: int = DEFAULT_MAX_ROWS):
        self.model = model
        self.loss = loss
        self.max_rows = require_int("max_rows", max_rows, minimum=1)
        self._grad, self.num_params = stacked_gradient(model, loss)
        self.calls = 0
        self.rows = 0

    def _gradient(
        self, params: torch.Tensor, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """One vectorised call of the stacked gradient, counted in :attr:`calls`, :attr:`rows`."""
        self.calls += 1
        self.rows += int(mask.numel())
        return self._grad(params, x, y, mask)

    # -- helpers ---------------------------------------------------------------------------

    def _check(self, global_flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> None:
        if global_flat.shape != (self.num_params,):
            raise ParameterError(
                "global_flat",
                f"must have shape ({self.num_params},), got {tuple(global_flat.shape)}",
            )
        if x.shape[0] != y.shape[0]:
            raise ParameterError("y", f"has {y.shape[0]} rows for {x.shape[0]} inputs")

    def _chunks(self, order: _I64, width_of: NDArray[np.int64]) -> Iterator[_I64]:
        """Consecutive slices of ``order`` with at most ``max_rows`` rows each."""
        i = 0
        while i < len(order):
            width = max(int(width_of[order[i]]), 1)
            size = max(1, self.max_rows // width)
            yield order[i : i + size]
            i += size

    # -- local SGD -------------------------------------------------------------------------

    def iter_deltas(
        self,
        global_flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        offsets: ArrayLike,
        orders: _I64,
        spec: LocalTrainingSpec,
        groups: ArrayLike | None = None,
    ) -> Iterator[tuple[_I64, torch.Tensor]]:
        """Train the groups chunk by chunk; yield ``(group_ids, deltas)`` per chunk.

        Parameters
        ----------
        global_flat : torch.Tensor
            The starting model, float32 ``(P,)``.
        x, y : torch.Tensor
            The rows (all groups), on the same device as ``global_flat``.
        offsets : array_like of int, shape (k + 1,)
            Group boundaries.
        orders : numpy.ndarray of int64, shape (spec.epochs, n)
            From :func:`epoch_orders`.
        spec : LocalTrainingSpec
            Epochs, batch size and learning rate (plain SGD: momentum and weight decay 0).
        groups : array_like of int, optional
            Train only these groups (e.g. the sampled users); default all. Empty groups are
            skipped (their delta is zero and they are not yielded).

        Yields
        ------
        tuple of (numpy.ndarray, torch.Tensor)
            Group indices and their deltas ``x_g - x_t``, float32 ``(len(ids), P)``.
        """
        require_plain_sgd(spec)
        self._check(global_flat, x, y)
        off = _check_offsets(offsets, int(x.shape[0]))
        q, bsz = spec.epochs, spec.batch_size
        if np.asarray(orders).shape != (q, int(x.shape[0])):
            raise ParameterError(
                "orders", f"must have shape ({q}, {x.shape[0]}), got {np.shape(orders)}"
            )
        counts = np.diff(off)
        chosen = np.arange(len(counts)) if groups is None else np.asarray(groups, dtype=np.int64)
        chosen = chosen[counts[chosen] > 0]
        steps = -(-counts // bsz)  # batches per epoch
        # most steps first, then most rows: the groups still training are a prefix
        order = chosen[np.lexsort((-counts[chosen], -steps[chosen]))]
        width_of = np.minimum(counts, bsz)
        device = global_flat.device
        lanes = np.arange(bsz, dtype=np.int64)
        with torch.no_grad():
            for ids in self._chunks(order, width_of):
                n_g, k_g, start = counts[ids], steps[ids], off[ids]
                total = q * k_g  # steps of each group, non-increasing along the chunk
                params = global_flat.detach().unsqueeze(0).repeat(len(ids), 1)
                for t in range(int(total[0])):
                    a = int(np.searchsorted(-total, -t, side="left"))  # groups with total > t
                    e, j = t // k_g[:a], t % k_g[:a]
                    pos = j[:, None] * bsz + lanes[None, :]
                    valid = pos < n_g[:a, None]
                    width = int(valid.sum(axis=1).max())
                    pos, valid = pos[:, :width], valid[:, :width]
                    local = np.minimum(pos, n_g[:a, None] - 1)
                    rows = orders[e[:, None], start[:a, None] + local]
                    idx = torch.from_numpy(rows).to(device)
                    mask = torch.from_numpy(valid).to(device=device, dtype=x.dtype)
                    g = self._gradient(params[:a], x[idx], y[idx], mask)
                    params[:a].sub_(g, alpha=spec.lr)
                yield ids, params.sub_(global_flat.detach())

    def train(
        self,
        global_flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        offsets: ArrayLike,
        orders: _I64,
        spec: LocalTrainingSpec,
    ) -> torch.Tensor:
        """Return every group's delta ``x_g - x_t`` after local SGD, float32 ``(k, P)``.

        Empty groups get a zero row. See :meth:`iter_deltas` for the parameters.
        """
        off = np.asarray(offsets)
        chunks = self.iter_deltas(global_flat, x, y, off, orders, spec)
        return self._dense(chunks, len(off) - 1, global_flat)

    def _dense(
        self, chunks: Iterator[tuple[_I64, torch.Tensor]], groups: int, like: torch.Tensor
    ) -> torch.Tensor:
        """Scatter per-chunk rows into a ``(groups, P)`` tensor, zero for groups not yielded."""
        out = torch.zeros((groups, self.num_params), dtype=like.dtype, device=like.device)
        for ids, rows in chunks:
            out[torch.from_numpy(ids).to(out.device)] = rows
        return out

    # -- gradients (ULDP-SGD) ----------------------------------------------------------------

    def iter_gradients(
        self,
        global_flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        offsets: ArrayLike,
        groups: ArrayLike | None = None,
    ) -> Iterator[tuple[_I64, torch.Tensor]]:
        """Yield ``(group_ids, gradients)``: each group's gradient of its mean loss at ``x_t``.

        The loss of a group is the mean over all its rows (full batch). Parameters as in
        :meth:`iter_deltas` (no ``orders``, ``spec``).
        """
        self._check(global_flat, x, y)
        off = _check_offsets(offsets, int(x.shape[0]))
        counts = np.diff(off)
        chosen = np.arange(len(counts)) if groups is None else np.asarray(groups, dtype=np.int64)
        chosen = chosen[counts[chosen] > 0]
        order = chosen[np.argsort(-counts[chosen], kind="stable")]
        device = global_flat.device
        with torch.no_grad():
            for ids in self._chunks(order, counts):
                width = int(counts[ids].max())
                lanes = np.arange(width, dtype=np.int64)
                valid = lanes[None, :] < counts[ids, None]
                rows = off[ids, None] + np.minimum(lanes[None, :], counts[ids, None] - 1)
                idx = torch.from_numpy(rows).to(device)
                mask = torch.from_numpy(valid).to(device=device, dtype=x.dtype)
                params = global_flat.detach().unsqueeze(0).expand(len(ids), -1)
                yield ids, self._gradient(params, x[idx], y[idx], mask)

    def gradients(
        self, global_flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, offsets: ArrayLike
    ) -> torch.Tensor:
        """Return every group's full-batch gradient at ``global_flat``, float32 ``(k, P)``."""
        off = np.asarray(offsets)
        chunks = self.iter_gradients(global_flat, x, y, off)
        return self._dense(chunks, len(off) - 1, global_flat)
