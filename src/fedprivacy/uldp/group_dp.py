"""ULDP-GROUP-k (Algorithm 2): record limits across silos, DP-SGD in each silo, group privacy.

1. **Flags B** (:func:`group_flags`). Every user keeps at most ``k`` records over all silos.
   The paper only says the flags are "generated for existing records to minimize waste on
   filtered out records"; the authors' ``Coordinator.build_user_bound_histograms`` hands out a
   user's budget round-robin over the silos, ``m`` records at a time, and each silo then keeps
   the user's first records in its data order. We do the same with two precisions: a user's
   round-robin starts at the silo where it holds the most records (ties: lowest index) and only
   visits silos where it still has records, so exactly ``min(k, N_u)`` records are kept, and a
   silo keeps either none or at least ``m`` records of a user (``m = 2`` for TCGA-BRCA, whose
   Cox loss needs two records; the authors' loop can leave one). Kept records are the user's
   first in pool order, as in the authors' code.
2. **Group size** (:func:`group_size`): ``max`` = the largest ``N_u`` (no record is dropped),
   ``median`` = ``int(median N_u)`` over users with records (the authors' ``int(np.median)``),
   or a number.
3. **DP-SGD in each silo** (:func:`dp_sgd_silo`) with Opacus: the model is wrapped in
   :class:`opacus.GradSampleModule` (per-sample gradients), the optimiser in
   :class:`opacus.optimizers.DPOptimizer` (per-sample clipping to ``C``, Gaussian noise of
   standard deviation ``sigma * C`` from a seeded torch generator, averaging by the expected
   batch size). A step hook of the optimiser records each step in the silo's history of
   ``(noise_multiplier, sample_rate, steps)`` (:class:`SiloDpSgdState`, kept across rounds;
   consecutive steps with the same noise and rate are merged, as in Opacus' histories). Batches
   are Poisson samples of the silo's records with rate ``gamma = 1 / ceil(n_s / B)`` and an epoch
   is ``ceil(n_s / B)`` steps, which is what Opacus' ``make_private`` does with a
   ``DataLoader(batch_size=B)``; empty batches still take a (noise only) step, as the analysis
   of the sampled Gaussian requires (the authors' loop skips them).
4. **Accounting** (:func:`group_epsilon`, Theorem 2): each silo's RDP curve is the composition
   of its history's sub-sampled Gaussian steps at :data:`fedprivacy.dp.rdp.DEFAULT_ORDERS`
   (:func:`fedprivacy.dp.rdp.gaussian_rdp`, dp-accounting, as the package's
   :class:`~fedprivacy.dp.accounting.PrivacyAccountant` composes them); the silos hold disjoint
   records, so the federation is ``(alpha, max_s rho_s(alpha))``-RDP (parallel composition); the
   curve goes into a :class:`~fedprivacy.dp.accounting.PrivacyAccountant` (``compose_rdp``) whose
   ``group_privacy(k, delta)`` gives the tightest *valid* group bound (Lemma 6 with the order
   condition, rounding ``k`` up to a power of two, or Lemma 5). By Proposition 1 it is the
   user-level epsilon. The paper instead reports, for ``k`` not a power of two, the bound of the
   largest power of two *below* ``k``, a lower bound on its own analysis. Opacus is used for the
   per-sample gradients, clipping and noise only, not for the accounting.

Caveat for TCGA-BRCA: the Cox loss of a batch couples its records (each record is in the
others' risk sets), so Opacus' "per-sample gradient" of a record (the gradient through its own
score) does not bound the record's whole influence on the batch gradient; per-sample clipping
then does not give the record-level sensitivity ``C`` that DP-SGD's analysis assumes. The
authors' code has the same issue; the reported epsilon is the one the algorithm claims.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.dp.rdp import DEFAULT_ORDERS, gaussian_rdp
from fedprivacy.errors import ParameterError
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.mechanism import l2_clip_factors
from fedprivacy.fl.params import load_flat_
from fedprivacy.uldp.federation import Federation

__all__ = [
    "History",
    "SiloDpSgdState",
    "clipped_per_sample_sum",
    "dp_sgd_silo",
    "group_epsilon",
    "group_flags",
    "group_size",
    "new_state",
    "record_step",
    "silo_rdp",
]

_I64 = NDArray[np.int64]


def group_size(fed: Federation, which: str) -> int:
    """Return the group size ``k`` of ULDP-GROUP-``which``.

    Parameters
    ----------
    fed : Federation
        The (unfiltered) federation.
    which : str
        ``"max"``, ``"median"`` or a positive integer as text (``"2"``, ``"8"``).

    Returns
    -------
    int
        ``k >= 1``.
    """
    n_u = fed.records_per_user()
    active = n_u[n_u > 0]
    if which == "max":
        return int(active.max()) if len(active) else 1
    if which == "median":
        return max(1, int(np.median(active))) if len(active) else 1
    try:
        k = int(which)
    except ValueError:
        raise ParameterError(
            "group", f"must be 'max', 'median' or an integer, got {which!r}"
        ) from None
    if k < 1:
        raise ParameterError("group", f"must be >= 1, got {k}")
    return k


def group_flags(fed: Federation, k: int, min_per_silo: int = 1) -> NDArray[np.bool_]:
    """Return the flags B: which rows ULDP-GROUP-k keeps (see the module docstring).

    Parameters
    ----------
    fed : Federation
        The federation.
    k : int
        Records each user may keep over all silos.
    min_per_silo : int
        ``m``: a user keeps either none or at least ``m`` records in a silo.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
        ``True`` for the kept rows; every user keeps at most ``k`` rows.
    """
    if k < 1 or min_per_silo < 1:
        raise ParameterError("k", f"k and min_per_silo must be >= 1, got {k}, {min_per_silo}")
    hist = fed.histogram()
    kept = np.zeros_like(hist)
    for u in np.flatnonzero(hist.sum(axis=0) > 0):
        remaining = hist[:, u].copy()
        silos = [int(s) for s in np.lexsort((np.arange(len(remaining)), -remaining))]
        taken, progress = 0, True
        while taken < k and progress:
            progress = False
            for s in silos:
                if taken >= k or remaining[s] == 0:
                    continue
                t = min(min_per_silo, int(remaining[s]), k - taken)
                if kept[s, u] + t < min_per_silo:
                    continue
                kept[s, u] += t
                remaining[s] -= t
                taken += t
                progress = True
    keep = np.zeros(fed.num_records, dtype=bool)
    for s in range(fed.num_silos):
        users, off = fed.silo_users[s], fed.user_offsets[s]
        base = int(fed.silo_offsets[s])
        counts = np.diff(off)
        pos = np.arange(int(off[-1])) - np.repeat(off[:-1], counts)
        limit = np.repeat(kept[s, users], counts)
        keep[base : base + int(off[-1])] = pos < limit
    return keep


History = list[tuple[float, float, int]]
"""A silo's DP-SGD steps: ``(noise_multiplier, sample_rate, steps)`` runs, in order."""


def record_step(history: History, noise_multiplier: float, sample_rate: float) -> None:
    """Append one step to ``history``, merged into the last run if its noise and rate match.

    The same merging as Opacus' ``RDPAccountant.history``.

    Examples
    --------
    >>> h: History = []
    >>> for z, q in [(5.0, 0.1), (5.0, 0.1), (5.0, 0.2)]:
    ...     record_step(h, z, q)
    >>> h
    [(5.0, 0.1, 2), (5.0, 0.2, 1)]
    """
    if history and history[-1][0] == noise_multiplier and history[-1][1] == sample_rate:
        history[-1] = (noise_multiplier, sample_rate, history[-1][2] + 1)
    else:
        history.append((noise_multiplier, sample_rate, 1))


@dataclass
class SiloDpSgdState:
    """Per-silo state of ULDP-GROUP-k kept across rounds: every silo's DP-SGD history."""

    histories: list[History] = field(default_factory=list)

    def history(self, silo: int) -> History:
        """The ``(noise_multiplier, sample_rate, steps)`` history of a silo (a copy)."""
        return list(self.histories[silo])


def _opacus() -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
    return GradSampleModule, DPOptimizer


def new_state(num_silos: int) -> SiloDpSgdState:
    """Return a fresh state with an empty history per silo."""
    return SiloDpSgdState([[] for _ in range(num_silos)])


def _step_recorder(history: History, sample_rate: float) -> Callable[[Any], None]:
    """A ``DPOptimizer`` step hook (called with the optimiser) recording each step."""

    def hook(optimizer: Any) -> None:
        record_step(history, float(optimizer.noise_multiplier), sample_rate)

    return hook


def dp_sgd_silo(
    model: nn.Module,
    loss: MaskedLoss,
    global_flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    clip: float,
    sigma: float,
    history: History,
    rng: np.random.Generator,
) -> torch.Tensor:
    """Run DP-SGD (Abadi et al.) on one silo's records with Opacus; return the model delta.

    Parameters
    ----------
    model : torch.nn.Module
        Architecture (not modified; a copy is trained).
    loss : MaskedLoss
        Masked mean loss.
    global_flat : torch.Tensor
        Starting model ``(P,)``.
    x, y : torch.Tensor
        The silo's (filtered) records; an empty silo returns a zero delta and takes no step.
    epochs, batch_size, lr : int, int, float
        ``Q`` epochs of ``ceil(n / B)`` Poisson-sampled steps (rate ``1 / ceil(n / B)``),
        learning rate ``eta_l``.
    clip, sigma : float
        Per-sample clipping bound and noise multiplier.
    history : list of (noise_multiplier, sample_rate, steps)
        The silo's history: every step is recorded in it (:func:`record_step`, from a step hook
        of the ``DPOptimizer``), across rounds.
    rng : numpy.random.Generator
        Poisson sampling and the seed of the torch noise generator.

    Returns
    -------
    torch.Tensor
        ``x_Q - x_t``, float32 ``(P,)``.
    """
    grad_sample_module, dp_optimizer = _opacus()
    n = int(x.shape[0])
    if n == 0:
        return torch.zeros_like(global_flat)
    steps = math.ceil(n / batch_size)
    rate = 1.0 / steps
    local = copy.deepcopy(model)
    load_flat_(local, global_flat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm = grad_sample_module(local, loss_reduction="mean")
        generator = torch.Generator(device=global_flat.device)
        generator.manual_seed(int(rng.integers(2**62)))
        opt = dp_optimizer(
            torch.optim.SGD(gsm.parameters(), lr=lr),
            noise_multiplier=sigma,
            max_grad_norm=clip,
            expected_batch_size=max(1, round(rate * n)),
            generator=generator,
        )
        opt.attach_step_hook(_step_recorder(history, rate))
        for _ in range(epochs * steps):
            pick = torch.from_numpy(np.flatnonzero(rng.random(n) < rate)).to(x.device)
            xb, yb = x[pick], y[pick]
            opt.zero_grad()
            value = loss(gsm(xb), yb, torch.ones(len(pick), dtype=x.dtype, device=x.device))
            torch.autograd.backward(value)
            opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in gsm._module.parameters()])
    return flat - global_flat


def clipped_per_sample_sum(
    model: nn.Module,
    loss: MaskedLoss,
    global_flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    clip: float,
) -> torch.Tensor:
    """Return ``sum_i clip_C(g_i)``: the pre-noise sum of one DP-SGD step over all of ``x``.

    Per-sample gradients ``g_i`` come from Opacus' ``GradSampleModule`` (``loss_reduction=
    "sum"`` on the masked mean loss times the number of rows, i.e. each record's own loss
    gradient); each is clipped to L2 norm ``C`` with the factor ``min(1, C / ||g_i||)``.

    Returns
    -------
    torch.Tensor
        Float32 ``(P,)``.
    """
    grad_sample_module, _ = _opacus()
    local = copy.deepcopy(model)
    load_flat_(local, global_flat)
    n = int(x.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm = grad_sample_module(local, loss_reduction="sum")
    if n == 0:
        return torch.zeros_like(global_flat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus' full backward hooks on inputs without grad
        value = loss(gsm(x), y, torch.ones(n, dtype=x.dtype, device=x.device)) * n
        torch.autograd.backward(value)
    per_sample = torch.cat(
        [p.grad_sample.reshape(n, -1) for p in gsm._module.parameters()],
        dim=1,
    )
    factors = l2_clip_factors(torch.linalg.vector_norm(per_sample, dim=1), clip)
    return (factors[:, None] * per_sample).sum(dim=0)


@functools.lru_cache(maxsize=256)
def _step_rdp(sample_rate: float, noise_multiplier: float) -> NDArray[np.float64]:
    """One sub-sampled Gaussian step at :data:`DEFAULT_ORDERS` (read-only, cached)."""
    out = gaussian_rdp(noise_multiplier, sample_rate)
    out[~(out >= 0)] = np.inf  # no finite bound at an order (inf, or NaN from a series): inf
    out.setflags(write=False)
    return out


def silo_rdp(history: History) -> NDArray[np.float64]:
    """RDP of a silo's DP-SGD history at :data:`DEFAULT_ORDERS`.

    The composition of its sub-sampled Gaussian steps, each from
    :func:`fedprivacy.dp.rdp.gaussian_rdp` (dp-accounting), as
    :meth:`fedprivacy.dp.accounting.PrivacyAccountant.compose_gaussian` composes them; orders
    without a finite bound are ``inf``.

    Parameters
    ----------
    history : list of (noise_multiplier, sample_rate, steps)
        As :meth:`SiloDpSgdState.history`.

    Returns
    -------
    numpy.ndarray of float64
        ``rho(alpha)`` per order (zeros for an empty history).

    Examples
    --------
    >>> rho = silo_rdp([(5.0, 0.1, 40)])
    >>> bool(np.all(rho == 40 * silo_rdp([(5.0, 0.1, 1)])))
    True
    """
    total = np.zeros(len(DEFAULT_ORDERS), dtype=np.float64)
    for noise, rate, steps in history:
        total = total + steps * _step_rdp(float(rate), float(noise))
    return total


def group_epsilon(histories: list[History], k: int, delta: float, *, repeat: float = 1.0) -> float:
    """User-level epsilon of ULDP-GROUP-k (Theorem 2) from the silos' DP-SGD histories.

    Parameters
    ----------
    histories : list
        One history per silo (:meth:`SiloDpSgdState.history`).
    k : int
        Group size (records per user).
    delta : float
        Target delta.
    repeat : float
        Compose each silo's history this many times (RDP adds up): the epsilon after
        ``repeat`` times as many identical rounds.

    Returns
    -------
    float
        The tightest valid group-privacy epsilon of the curve ``max_s rho_s`` (0 before any
        step).
    """
    curves = [silo_rdp(h) for h in histories if h]
    if not curves:
        return 0.0
    acc = PrivacyAccountant("rdp")
    acc.compose_rdp(DEFAULT_ORDERS, repeat * np.max(np.stack(curves), axis=0))
    return float(acc.group_privacy(k, delta).epsilon)
