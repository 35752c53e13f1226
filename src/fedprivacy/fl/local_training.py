"""Local training of many model copies at once: the one vectorised trainer.

Every local training of the package trains *groups* of rows from the same global model, each
with its own minibatch order (:mod:`fedprivacy.fl.minibatches`): FedAvg's clients
(:mod:`fedprivacy.fl.engine`), ULDP-FL's (silo, user) pairs and, for DEFAULT and ULDP-NAIVE,
whole silos (:mod:`fedprivacy.uldp.families`). :class:`VectorisedTrainer` trains them all at
once:

* the groups' parameters are stacked into a ``(k, P)`` tensor; every local step gathers the
  minibatch of every active group with one indexing operation into a padded
  ``(k, b, *input_shape)`` tensor with a 0/1 mask, and :func:`torch.func.vmap` over
  :func:`torch.func.grad` of :func:`torch.func.functional_call`
  (:func:`~fedprivacy.fl.stacked_grad.stacked_gradient`), or on a GPU the model's layers as
  batched matrix products (:func:`~fedprivacy.fl.stacked_layers.bmm_gradient`,
  ``gradient="bmm"``), gives all the groups' gradients of their *masked mean* loss (the mean
  over the real rows of the batch, exactly the loss of the smaller batch); one SGD update
  (momentum and weight decay as :class:`torch.optim.SGD`) then moves the whole stack;
* groups are sorted by their number of steps, so the groups still training at a step are a
  prefix of the stack (a view: no gather, no scatter), and processed in chunks of at most
  ``max_rows`` rows per call, which bounds memory and keeps padding small (neighbouring groups
  in the sorted order have similar sizes); the batch width is cut to the largest real batch of
  the chunk (users with 2 records and a batch size of 64 cost 2 rows, not 64);
* the trainer yields the groups' deltas chunk by chunk, so that a caller can clip and sum them
  without the ``(k, P)`` deltas of all the groups ever existing at once
  (:func:`fedprivacy.uldp.clipped_sums.clipped_sums`).

:func:`~fedprivacy.fl.training_loops.train_groups_loop` and
:func:`~fedprivacy.fl.training_loops.group_gradients_loop` are the oracles: one deep copy of the
model and one :class:`torch.optim.SGD` per group, one ``backward()`` per batch, as the papers'
code does. The vectorised trainer reproduces them to float rounding
(``tests/fl/test_local_training.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray
from torch import nn

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.fl.gradients import gradient_function
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.minibatches import check_offsets

__all__ = ["DEFAULT_MAX_ROWS", "GPU_MAX_ROWS", "VectorisedTrainer", "default_max_rows"]

_I64 = NDArray[np.int64]

#: Default bound on rows (groups x batch width) per vectorised call on a CPU. On a 2-core CPU,
#: one silo of MNIST (7,322 users, 12,000 records) trained fastest with 512-1,024 (cache-sized
#: chunks; 4,096 was 1.5-2x slower).
DEFAULT_MAX_ROWS = 1024
#: The same on a GPU: a whole ULDP-AVG round of MNIST (10,000 users, 5 silos, zipf) with the
#: GPU's ``bmm`` gradient took 0.61 s with 16,384 rows (6.0 GB) and 0.77 s with 4,096 (2.5 GB)
#: on one H200; with ``vmap``, 2.09 / 2.11 s; 65,536 rows pad too much (4.08 s with ``vmap`` on an
#: H100); silo by silo with 1,024 rows, 3.55 s (benchmarks/RESULTS.md, 2026-11-27).
GPU_MAX_ROWS = 16384


def default_max_rows(device: str | torch.device) -> int:
    """:data:`GPU_MAX_ROWS` on a CUDA device, else :data:`DEFAULT_MAX_ROWS`.

    Examples
    --------
    >>> default_max_rows("cpu"), default_max_rows("cuda:0")
    (1024, 16384)
    """
    return GPU_MAX_ROWS if torch.device(device).type == "cuda" else DEFAULT_MAX_ROWS


class VectorisedTrainer:
    """Vectorised local SGD and full-batch gradients of many groups (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        Architecture; only its structure is used (it is not modified). It must be a pure
        function of its parameters: no buffers (no BatchNorm), no dropout, as are all the
        models of :mod:`fedprivacy.models`.
    loss : MaskedLoss
        ``loss(output, target, mask)``, the masked mean loss of a batch.
    max_rows : int or None
        Largest number of rows (groups x batch width) per chunk of groups trained together; a
        group larger than this is still processed whole. ``None``: all the groups in one chunk.
    chunk_size : int or None
        Largest number of groups per ``vmap`` call within a step (:func:`torch.func.vmap`'s
        ``chunk_size``), which bounds the memory of the activations; ``None``: all at once.
        Any value gives the same result up to float rounding.
    gradient : {"vmap", "bmm"}
        How the stack is differentiated (:data:`~fedprivacy.fl.gradients.GRADIENTS`):
        ``vmap`` (any model; the CPU's default) or ``bmm`` (batched matrix products; the GPU's,
        :func:`~fedprivacy.fl.gradients.default_gradient`). The same result to float rounding.

    Attributes
    ----------
    calls : int
        Vectorised gradient calls made so far (each a fixed number of kernel launches).
    rows : int
        Rows (records and padding) differentiated so far; with the real rows, the padding cost.

    Notes
    -----
    Where the arithmetic is small (MLPs, small batches) the per-step Python, autograd and
    optimiser overhead of a per-group loop dominates, and this trainer is several times faster
    (5.7x the papers' DataLoader loop for :class:`~fedprivacy.models.images.DigitsMLP`, batch
    10). On a CPU, ``vmap`` turns a convolution with per-group weights into one *grouped*
    convolution, which oneDNN ran about twice as slowly as the same convolutions group by group
    (PyTorch 2.13, 2 cores): for :class:`~fedprivacy.models.images.MnistCNN` and
    :class:`~fedprivacy.models.images.LeNet5` FedAvg's per-client loop is 1.5-1.8x faster
    (``benchmarks/training.py``).
    """

    def __init__(
        self,
        model: nn.Module,
        loss: MaskedLoss,
        *,
        max_rows: int | None = DEFAULT_MAX_ROWS,
        chunk_size: int | None = None,
        gradient: str = "vmap",
    ) -> None:
        if max_rows is not None:
            max_rows = require_int("max_rows", max_rows, minimum=1)
        if chunk_size is not None:
            chunk_size = require_int("chunk_size", chunk_size, minimum=1)
        self.model = model
        self.loss = loss
        self.max_rows = max_rows
        self.chunk_size = chunk_size
        self.gradient = gradient
        self._grad, self.num_params = gradient_function(gradient, model, loss, chunk_size)
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
        """Raise :class:`ParameterError` unless ``global_flat`` fits the model and ``y`` ``x``."""
        if global_flat.shape != (self.num_params,) or global_flat.dtype != torch.float32:
            raise ParameterError(
                "global_flat",
                f"must be float32 of shape ({self.num_params},), "
                f"got {global_flat.dtype} {tuple(global_flat.shape)}",
            )
        if x.dim() < 1 or y.dim() < 1 or x.shape[0] != y.shape[0]:
            raise ParameterError("y", f"has {tuple(y.shape)} rows for {tuple(x.shape)} inputs")

    @staticmethod
    def _check_orders(
        orders: ArrayLike, offsets: ArrayLike, epochs: int, rows: int
    ) -> tuple[_I64, _I64]:
        """Return ``(offsets, orders)`` as int64 after checking them against the rows."""
        arr = np.asarray(orders)
        if arr.ndim != 2 or arr.shape[0] != epochs or not np.issubdtype(arr.dtype, np.integer):
            raise ParameterError(
                "orders", f"must be an integer array ({epochs}, positions), got {arr.shape}"
            )
        if arr.size and (arr.min() < 0 or arr.max() >= rows):
            raise ParameterError("orders", f"entries must be rows of x, in [0, {rows})")
        return check_offsets(offsets, arr.shape[1]), arr.astype(np.int64, copy=False)

    def _chunks(self, order: _I64, width_of: _I64) -> Iterator[_I64]:
        """Consecutive slices of ``order`` with at most ``max_rows`` rows each."""
        if self.max_rows is None:
            if len(order):
                yield order
            return
        i = 0
        while i < len(order):
            width = max(int(width_of[order[i]]), 1)
            size = max(1, self.max_rows // width)
            yield order[i : i + size]
            i += size

    def _dense(
        self, chunks: Iterator[tuple[_I64, torch.Tensor]], groups: int, like: torch.Tensor
    ) -> torch.Tensor:
        """Scatter per-chunk rows into a ``(groups, P)`` tensor, zero for groups not yielded."""
        out = torch.zeros((groups, self.num_params), dtype=like.dtype, device=like.device)
        for ids, rows in chunks:
            out[torch.from_numpy(ids).to(out.device)] = rows
        return out

    # -- local SGD -------------------------------------------------------------------------

    def iter_deltas(
        self,
        global_flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        offsets: ArrayLike,
        orders: ArrayLike,
        spec: LocalTrainingSpec,
        groups: ArrayLike | None = None,
    ) -> Iterator[tuple[_I64, torch.Tensor]]:
        """Train the groups chunk by chunk; yield ``(group_ids, deltas)`` per chunk.

        Parameters
        ----------
        global_flat : torch.Tensor
            The starting model, float32 ``(P,)``.
        x, y : torch.Tensor
            The rows (inputs and targets), on the same device as ``global_flat``.
        offsets : array_like of int, shape (k + 1,)
            Group ``g`` owns the positions ``offsets[g]:offsets[g + 1]`` of ``orders``.
        orders : array_like of int, shape (spec.epochs, m)
            Rows of ``x`` in minibatch order (:mod:`fedprivacy.fl.minibatches`).
        spec : LocalTrainingSpec
            Epochs, batch size, learning rate, momentum and weight decay.
        groups : array_like of int, optional
            Train only these groups (e.g. the sampled users); default all. Empty groups are
            skipped (their delta is zero and they are not yielded).

        Yields
        ------
        tuple of (numpy.ndarray, torch.Tensor)
            Group indices and their deltas ``x_g - x_t``, float32 ``(len(ids), P)``.

        Raises
        ------
        ParameterError
            If ``spec`` is invalid or the shapes, dtypes or indices are inconsistent.
        """
        spec.validate()
        self._check(global_flat, x, y)
        off, rows = self._check_orders(orders, offsets, spec.epochs, int(x.shape[0]))
        counts = np.diff(off)
        chosen = np.arange(len(counts)) if groups is None else np.asarray(groups, dtype=np.int64)
        chosen = chosen[counts[chosen] > 0]
        steps = -(-counts // spec.batch_size)  # batches per epoch
        # most steps first, then most rows: the groups still training are a prefix
        order = chosen[np.lexsort((-counts[chosen], -steps[chosen]))]
        width_of = np.minimum(counts, spec.batch_size)
        with torch.no_grad():
            for ids in self._chunks(order, width_of):
                params = global_flat.detach().unsqueeze(0).repeat(len(ids), 1)
                self._train_chunk(params, x, y, rows, off[ids], counts[ids], spec)
                yield ids, params.sub_(global_flat.detach())

    def _train_chunk(
        self,
        params: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        orders: _I64,
        start: _I64,
        n_g: _I64,
        spec: LocalTrainingSpec,
    ) -> None:
        """Train one chunk of groups in place (``params``, their stack, sorted as above)."""
        bsz = spec.batch_size
        k_g = -(-n_g // bsz)
        total = spec.epochs * k_g  # steps of each group, non-increasing along the chunk
        lanes = np.arange(bsz, dtype=np.int64)
        buf = torch.zeros_like(params) if spec.momentum > 0 else None
        for t in range(int(total[0])):
            a = int(np.searchsorted(-total, -t, side="left"))  # groups with total > t
            e, j = t // k_g[:a], t % k_g[:a]
            pos = j[:, None] * bsz + lanes[None, :]
            valid = pos < n_g[:a, None]
            width = int(valid.sum(axis=1).max())
            pos, valid = pos[:, :width], valid[:, :width]
            local = np.minimum(pos, n_g[:a, None] - 1)
            idx = torch.from_numpy(orders[e[:, None], start[:a, None] + local]).to(x.device)
            mask = torch.from_numpy(valid).to(device=x.device, dtype=x.dtype)
            p = params[:a]
            d_p = self._gradient(p, x[idx], y[idx], mask)
            # the update of torch.optim.SGD (dampening 0, no Nesterov), on the stack's prefix
            if spec.weight_decay != 0:
                d_p = d_p.add(p, alpha=spec.weight_decay)
            if buf is not None:
                d_p = buf[:a].mul_(spec.momentum).add_(d_p)
            p.sub_(d_p, alpha=spec.lr)

    def train(
        self,
        global_flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        offsets: ArrayLike,
        orders: ArrayLike,
        spec: LocalTrainingSpec,
    ) -> torch.Tensor:
        """Return every group's delta ``x_g - x_t`` after local SGD, float32 ``(k, P)``.

        Empty groups get a zero row. See :meth:`iter_deltas` for the parameters.
        """
        off = np.asarray(offsets)
        chunks = self.iter_deltas(global_flat, x, y, off, orders, spec)
        return self._dense(chunks, len(off) - 1, global_flat)

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

        The loss of a group is the mean over all its rows (full batch): group ``g`` owns the
        rows ``offsets[g]:offsets[g + 1]`` of ``x``. Parameters as in :meth:`iter_deltas` (no
        ``orders``, ``spec``).
        """
        self._check(global_flat, x, y)
        off = check_offsets(offsets, int(x.shape[0]))
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
