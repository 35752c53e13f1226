"""Local training of many federated clients: a vectorised trainer and the reference loop.

Both trainers consume the same *batch plan* (:func:`batch_plan`), an integer array that fixes
which of its samples each client uses at each local SGD step, so they compute the same thing and
can be compared number for number:

* :func:`train_clients_loop` is how the papers' code trains: one deep copy of the model and one
  :class:`torch.optim.SGD` per client, one ``backward()`` per step. It is the correctness oracle.
* :class:`VectorisedTrainer` stacks the clients' parameters into a ``(C, P)`` tensor and takes
  each local step of all the clients at once with :func:`torch.func.vmap` over
  :func:`torch.func.grad` of :func:`torch.func.functional_call`, followed by one SGD update of the
  whole stack.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.fl.losses import cross_entropy_loss
from fedprivacy.fl.params import load_flat_
from fedprivacy.fl.stacked_grad import stacked_gradient
from fedprivacy.models.registry import count_parameters

__all__ = [
    "LocalTrainingSpec",
    "VectorisedTrainer",
    "batch_plan",
    "train_clients_loop",
]


@dataclass(frozen=True)
class LocalTrainingSpec:
    """Hyper-parameters of local training: minibatch SGD, the one spec of every trainer.

    The FedAvg trainers (:class:`VectorisedTrainer`, :func:`train_clients_loop`; cross-entropy)
    and the ULDP-FL per-user trainers (:class:`fedprivacy.uldp.per_user_training.PerUserTrainer`,
    :func:`fedprivacy.uldp.per_user_loops.train_groups_loop`; the dataset's loss) all take it.
    The per-user trainers run plain SGD, as the ULDP-FL paper does: they refuse a non-zero
    ``momentum`` or ``weight_decay``
    (:func:`fedprivacy.uldp.per_user_training.require_plain_sgd`).

    Parameters
    ----------
    epochs : int
        Local epochs ``E`` (passes over the client's data per round), at least 1.
    batch_size : int
        Minibatch size ``B``, at least 1. The last batch of an epoch may be smaller; it is kept.
    lr : float
        Learning rate, finite and positive.
    momentum : float
        Momentum factor in ``[0, 1)`` as :class:`torch.optim.SGD` defines it (dampening 0, no
        Nesterov); 0 is plain SGD. The momentum buffer starts at zero in every round.
    weight_decay : float
        L2 penalty (added to the gradient as in :class:`torch.optim.SGD`), at least 0.

    Examples
    --------
    >>> spec = LocalTrainingSpec(epochs=2, batch_size=8, lr=0.1)
    >>> spec.validate()
    >>> (spec.epochs, spec.batch_size, spec.lr, spec.momentum)
    (2, 8, 0.1, 0.0)

    """

    epochs: int = 1
    batch_size: int = 50
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0

    def validate(self) -> None:
        """Check every field.

        Raises
        ------
        ParameterError
            If ``epochs < 1``, ``batch_size < 1``, ``lr`` is not a finite positive number,
            ``momentum`` is not in ``[0, 1)`` or ``weight_decay`` is negative or not finite.

        """
        require_int("epochs", self.epochs, minimum=1)
        require_int("batch_size", self.batch_size, minimum=1)
        lr = _require_float("lr", self.lr)
        if not lr > 0:
            raise ParameterError("lr", f"must be a finite number > 0, got {self.lr!r}")
        momentum = _require_float("momentum", self.momentum)
        if not 0 <= momentum < 1:
            raise ParameterError("momentum", f"must lie in [0, 1), got {self.momentum!r}")
        weight_decay = _require_float("weight_decay", self.weight_decay)
        if weight_decay < 0:
            raise ParameterError(
                "weight_decay", f"must be a finite number >= 0, got {self.weight_decay!r}"
            )


def _require_float(name: str, value: object) -> float:
    """Return ``value`` as a finite float, or raise :class:`ParameterError`."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ParameterError(name, f"must be a real number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise ParameterError(name, f"must be finite, got {value!r}")
    return out


def batch_plan(
    sizes: Sequence[int], spec: LocalTrainingSpec, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Draw the minibatches of every client's local training.

    For each client ``c`` (in order) and each epoch (in order), a fresh permutation of
    ``range(sizes[c])`` is drawn from ``rng`` and cut into consecutive batches of
    ``spec.batch_size``; the last batch of an epoch is smaller when ``batch_size`` does not
    divide the size (it is kept, as with ``DataLoader(drop_last=False)``), and its missing entries
    are ``-1``. Client ``c`` thus takes ``epochs * ceil(sizes[c] / batch_size)`` steps; clients
    with fewer steps than the most are padded with whole rows of ``-1`` at the end.

    Parameters
    ----------
    sizes : sequence of int
        Number of samples of each client (0 allowed: such a client has no step at all).
    spec : LocalTrainingSpec
        Gives ``epochs`` and ``batch_size``.
    rng : numpy.random.Generator
        Source of the permutations.

    Returns
    -------
    numpy.ndarray of int64, shape (C, S, B)
        Local positions (``0 .. sizes[c] - 1``) into each client's data, ``-1`` for padding;
        ``C = len(sizes)``, ``S`` the largest number of steps of a client, ``B = batch_size``.
        Within a row, the real entries come first.

    Raises
    ------
    ParameterError
        If ``spec`` is invalid or a size is negative.

    Examples
    --------
    >>> plan = batch_plan([3, 1], LocalTrainingSpec(batch_size=2), np.random.default_rng(0))
    >>> plan.shape
    (2, 2, 2)
    >>> plan[1].tolist()
    [[0, -1], [-1, -1]]

    """
    spec.validate()
    counts = [require_int(f"sizes[{c}]", n, minimum=0) for c, n in enumerate(sizes)]
    bsz = spec.batch_size
    steps_per_epoch = [-(-n // bsz) for n in counts]
    total_steps = max((spec.epochs * k for k in steps_per_epoch), default=0)
    plan = np.full((len(counts), total_steps, bsz), -1, dtype=np.int64)
    for c, n in enumerate(counts):
        k = steps_per_epoch[c]
        if k == 0:
            continue
        rows = plan[c].reshape(-1)  # view, (S * B,)
        for e in range(spec.epochs):
            start = e * k * bsz
            block = rows[start : start + k * bsz].reshape(k, bsz)
            perm = rng.permutation(n).astype(np.int64)
            full = (n // bsz) * bsz
            block.reshape(-1)[:full] = perm[:full]
            if full < n:
                block[k - 1, : n - full] = perm[full:]
    return plan


def _check_inputs(
    num_params: int,
    global_flat: torch.Tensor,
    features: torch.Tensor,
    labels: torch.Tensor,
    client_indices: Sequence[np.ndarray],
    plan: np.ndarray,
) -> NDArray[np.int64]:
    """Validate the arguments of a training call; return the plan as global indices.

    Padding entries of the returned ``(C, S, B)`` array are 0 (a valid index); the caller masks
    them out with ``plan >= 0``.
    """
    if global_flat.shape != (num_params,):
        raise ParameterError(
            "global_flat", f"must have shape ({num_params},), got {tuple(global_flat.shape)}"
        )
    if global_flat.dtype != torch.float32:
        raise ParameterError("global_flat", f"must be float32, got {global_flat.dtype}")
    if features.dtype != torch.float32 or features.dim() < 2:
        raise ParameterError(
            "features",
            f"must be a float32 tensor (n, ...), got {features.dtype} {tuple(features.shape)}",
        )
    n = features.shape[0]
    if labels.shape != (n,) or labels.dtype != torch.int64:
        raise ParameterError(
            "labels",
            f"must be an int64 tensor of shape ({n},), got {labels.dtype} {tuple(labels.shape)}",
        )
    plan_arr = np.asarray(plan)
    if plan_arr.ndim != 3 or not np.issubdtype(plan_arr.dtype, np.integer):
        raise ParameterError("plan", f"must be a 3-D integer array (C, S, B), got {plan_arr.shape}")
    if len(client_indices) != plan_arr.shape[0]:
        raise ParameterError(
            "client_indices",
            f"must hold one index array per client of the plan ({plan_arr.shape[0]}), "
            f"got {len(client_indices)}",
        )
    out = np.zeros(plan_arr.shape, dtype=np.int64)
    for c, idx in enumerate(client_indices):
        local = plan_arr[c]
        idx_arr = np.asarray(idx)
        if idx_arr.ndim != 1 or not (idx_arr.size == 0 or np.issubdtype(idx_arr.dtype, np.integer)):
            raise ParameterError(f"client_indices[{c}]", "must be a 1-D integer array")
        if idx_arr.size and (idx_arr.min() < 0 or idx_arr.max() >= n):
            raise ParameterError(f"client_indices[{c}]", f"entries must lie in [0, {n})")
        if local.size and (local.min() < -1 or local.max() >= idx_arr.size):
            raise ParameterError(
                "plan", f"client {c}: entries must lie in [-1, {idx_arr.size}) (its sample count)"
            )
        real = local >= 0
        out[c][real] = idx_arr[local[real]]
    return out


class VectorisedTrainer:
    """Trains many clients at once on stacked parameters.

    The clients' parameters are a ``(C, P)`` float32 tensor. At each local step the batch of every
    client is gathered from the training set with one indexing operation, the per-client
    gradients are computed with ``vmap(grad(loss))`` (:func:`~fedprivacy.fl.stacked_grad.
    stacked_gradient`, the core shared with ULDP-FL's per-user trainer) over the client
    dimension of the parameters,
    inputs, labels and mask (``loss`` calls the model through
    :func:`torch.func.functional_call`), and one SGD update is applied to the whole stack.

    The loss is the cross-entropy averaged over the *real* samples of the batch (a masked mean),
    so a partial batch gives exactly the gradient of the smaller batch, and only the clients that
    have a real batch at that step are updated (their momentum buffers too), which reproduces
    :func:`train_clients_loop` step for step: plain SGD, or momentum and weight decay as
    :class:`torch.optim.SGD` defines them (dampening 0, no Nesterov).

    The model must be a pure function of its parameters (no buffers that change, no BatchNorm or
    dropout), as are all the models of :mod:`fedprivacy.models`.

    Parameters
    ----------
    model : torch.nn.Module
        Architecture of the clients' models; only its structure is used (its parameter values
        are replaced by the stacked ones and it is not modified).
    spec : LocalTrainingSpec
        Local-training hyper-parameters (``lr``, ``momentum``, ``weight_decay``; the plan fixes
        epochs and batches).
    chunk_size : int or None
        Largest number of clients per ``vmap`` call (passed to :func:`torch.func.vmap`), which
        bounds the memory of the activations (it grows linearly with the number of clients
        differentiated at once); ``None`` differentiates all the clients in one call. The batch
        gather and the SGD update still cover all the clients at once. Any value gives the same
        result up to float rounding.

    Notes
    -----
    Where the arithmetic is small (MLPs, small batches) the per-step Python, autograd and
    optimiser overhead of a per-client loop dominates, and this trainer is several times faster
    (5.7x the papers' DataLoader loop for :class:`~fedprivacy.models.images.DigitsMLP`, batch 10).
    Convolutional models are another matter on a CPU: ``vmap`` turns a convolution with
    per-client weights into one *grouped* convolution, and on the 2-core CPU this was measured on
    (PyTorch 2.13, oneDNN) grouped convolutions were about twice as slow, forward and backward, as
    the same convolutions run client by client. With ``chunk_size=None`` this trainer was thus
    1.5-1.8x *slower* than the per-client loop for :class:`~fedprivacy.models.images.MnistCNN` and
    :class:`~fedprivacy.models.images.LeNet5`; ``chunk_size=1`` (ordinary convolutions again, plus
    the per-call overhead of ``vmap``) was still about 15 % slower than the loop. Channels-last
    layouts and disabling oneDNN did not help. See ``benchmarks/training.py``.

    """

    def __init__(
        self, model: nn.Module, spec: LocalTrainingSpec, *, chunk_size: int | None = None
    ) -> None:
        spec.validate()
        if chunk_size is not None:
            chunk_size = require_int("chunk_size", chunk_size, minimum=1)
        self.model = model
        self.spec = spec
        self.chunk_size = chunk_size
        self._grad, self.num_params = stacked_gradient(
            model, cross_entropy_loss, chunk_size=chunk_size
        )

    def train(
        self,
        global_flat: torch.Tensor,
        features: torch.Tensor,
        labels: torch.Tensor,
        client_indices: Sequence[np.ndarray],
        plan: np.ndarray,
    ) -> torch.Tensor:
        """Run every client's local training from the global model.

        Parameters
        ----------
        global_flat : torch.Tensor
            The global model, float32 of shape ``(P,)`` (as made by
            :func:`fedprivacy.fl.params.flatten_parameters`).
        features : torch.Tensor
            The whole training set's inputs, float32 ``(n, *input_shape)`` on the CPU.
        labels : torch.Tensor
            The whole training set's labels, int64 ``(n,)``.
        client_indices : sequence of numpy.ndarray
            ``client_indices[c]`` holds the global indices (into ``features``) of client ``c``'s
            samples; the plan's local positions index into it.
        plan : numpy.ndarray
            Batch plan ``(C, S, B)`` as made by :func:`batch_plan` (``-1`` = padding).

        Returns
        -------
        torch.Tensor
            Float32 ``(C, P)``: row ``c`` is client ``c``'s model after its local training. A
            client whose plan is all padding gets ``global_flat`` unchanged.

        Raises
        ------
        ParameterError
            If the shapes, dtypes or indices are inconsistent.

        """
        gidx = _check_inputs(self.num_params, global_flat, features, labels, client_indices, plan)
        real = np.asarray(plan) >= 0
        params = global_flat.detach().unsqueeze(0).repeat(gidx.shape[0], 1)
        with torch.no_grad():
            self._train_stack(params, features, labels, gidx, real)
        return params

    def _train_stack(
        self,
        params: torch.Tensor,
        features: torch.Tensor,
        labels: torch.Tensor,
        gidx: NDArray[np.int64],
        real: NDArray[np.bool_],
    ) -> None:
        """Train all the clients in place (``params`` is their ``(C, P)`` stack)."""
        spec = self.spec
        num_clients, num_steps, _ = gidx.shape
        buf = torch.zeros_like(params) if spec.momentum > 0 else None
        for s in range(num_steps):
            real_s = real[:, s, :]
            active_rows = real_s.any(axis=1)
            if not active_rows.any():
                continue
            # only the columns up to the last real sample of any client matter
            width = int(np.flatnonzero(real_s.any(axis=0)).max()) + 1
            everyone = bool(active_rows.all())
            if everyone:
                idx_np, mask_np = gidx[:, s, :width], real_s[:, :width]
                p = params
            else:
                active = torch.from_numpy(np.flatnonzero(active_rows)).to(params.device)
                idx_np, mask_np = gidx[active_rows, s, :width], real_s[active_rows, :width]
                p = params[active]
            # one gather for the batches of all the (active) clients
            idx = torch.from_numpy(np.ascontiguousarray(idx_np)).to(features.device)
            x = features[idx]
            y = labels[idx.to(labels.device)]
            mask = torch.from_numpy(mask_np).to(device=features.device, dtype=features.dtype)
            d_p = self._grad(p, x, y, mask)
            # the update of torch.optim.SGD (dampening 0, no Nesterov), on the whole stack
            if spec.weight_decay != 0:
                d_p = d_p.add(p, alpha=spec.weight_decay)
            if buf is not None:
                if everyone:
                    d_p = buf.mul_(spec.momentum).add_(d_p)
                else:
                    b = buf[active].mul_(spec.momentum).add_(d_p)
                    buf[active] = b
                    d_p = b
            if everyone:
                params.add_(d_p, alpha=-spec.lr)
            else:
                params[active] = p.add_(d_p, alpha=-spec.lr)


def train_clients_loop(
    model: nn.Module,
    spec: LocalTrainingSpec,
    global_flat: torch.Tensor,
    features: torch.Tensor,
    labels: torch.Tensor,
    client_indices: Sequence[np.ndarray],
    plan: np.ndarray,
) -> torch.Tensor:
    """Reference per-client local training, as the papers' code does it (the oracle).

    For each client: a :func:`copy.deepcopy` of ``model`` loaded with ``global_flat``, a fresh
    :class:`torch.optim.SGD` (``lr``, ``momentum``, ``weight_decay``), and for each real step of
    its plan: ``zero_grad``, mean cross-entropy on that batch, ``backward``, ``step``.

    Parameters
    ----------
    model : torch.nn.Module
        Architecture of the clients' models (not modified).
    spec : LocalTrainingSpec
        Local-training hyper-parameters.
    global_flat, features, labels, client_indices, plan
        As in :meth:`VectorisedTrainer.train`.

    Returns
    -------
    torch.Tensor
        Float32 ``(C, P)``, each client's model after its local training.

    Raises
    ------
    ParameterError
        If ``spec`` or the inputs are invalid.

    """
    spec.validate()
    num_params = count_parameters(model)
    gidx = _check_inputs(num_params, global_flat, features, labels, client_indices, plan)
    real = np.asarray(plan) >= 0
    out = torch.empty((gidx.shape[0], num_params), dtype=torch.float32, device=global_flat.device)
    for c in range(gidx.shape[0]):
        local = copy.deepcopy(model)
        load_flat_(local, global_flat)
        local.train()
        opt = torch.optim.SGD(
            local.parameters(), lr=spec.lr, momentum=spec.momentum, weight_decay=spec.weight_decay
        )
        for s in range(gidx.shape[1]):
            batch = gidx[c, s][real[c, s]]
            if batch.size == 0:
                continue
            idx = torch.from_numpy(batch).to(features.device)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(local(features[idx]), labels[idx])
            torch.autograd.backward(loss)
            opt.step()
        out[c] = torch.cat([p.detach().reshape(-1) for p in local.parameters()])
    return out
