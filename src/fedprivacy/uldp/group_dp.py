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
3. **DP-SGD in each silo** (:func:`dp_sgd_silo`) on the run's mechanism: Opacus'
   :class:`opacus.GradSampleModule` gives the per-sample gradients, each is scaled by the
   mechanism's ``clip_factors`` (``distributed``, the default: L2 clipping to ``C``), the silo
   adds its party noise for one party (``sigma C`` for ``distributed``) per parameter from a
   seeded torch generator, and the sum is averaged by the expected batch size, as Opacus'
   ``DPOptimizer`` does. Each step is recorded in the silo's history of
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
   per-sample gradients only.

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.dp.rdp import DEFAULT_ORDERS, gaussian_rdp
from fedprivacy.errors import ParameterError
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.params import load_flat_
from fedprivacy.uldp.federation import Federation

if TYPE_CHECKING:
    from fedprivacy.fl.mechanism import Mechanism

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


def _grad_sample_module(model: nn.Module, global_flat: torch.Tensor) -> Any:
    """A copy of ``model`` at ``global_flat`` in Opacus' ``GradSampleModule`` (mean reduction)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from opacus import GradSampleModule

        local = copy.deepcopy(model)
        load_flat_(local, global_flat)
        return GradSampleModule(local, loss_reduction="mean")


def new_state(num_silos: int) -> SiloDpSgdState:
    """Return a fresh state with an empty history per silo."""
    return SiloDpSgdState([[] for _ in range(num_silos)])


def _clipped_sums(
    gsm: Any, loss: MaskedLoss, x: torch.Tensor, y: torch.Tensor, mechanism: Mechanism
) -> list[torch.Tensor]:
    """Per parameter, ``sum_i f_i g_i``: the records' gradients scaled by the clip factors.

    ``g_i`` is record ``i``'s own loss gradient (Opacus' per-sample gradients) and ``f_i`` the
    mechanism's :meth:`~fedprivacy.fl.mechanism.Mechanism.clip_factors` of its L2 norm.
    """
    params = [p for p in gsm._module.parameters()]
    n = int(x.shape[0])
    if n == 0:
        return [torch.zeros_like(p) for p in params]
    gsm.zero_grad(set_to_none=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus' full backward hooks on inputs without grad
        value = loss(gsm(x), y, torch.ones(n, dtype=x.dtype, device=x.device))
        torch.autograd.backward(value)
    grads = [p.grad_sample.reshape(n, -1) for p in params]
    norms = torch.stack([g.norm(2, dim=1) for g in grads], dim=1).norm(2, dim=1)
    factors = mechanism.clip_factors(norms).to(grads[0].dtype)
    return [(factors @ g).reshape(p.shape) for g, p in zip(grads, params, strict=True)]


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
    mechanism: Mechanism,
    history: History,
    rng: np.random.Generator,
) -> torch.Tensor:
    """Run DP-SGD (Abadi et al.) on one silo's records; return the model delta.

    Each step scales every sampled record's gradient by the mechanism's clip factors, adds the
    silo's noise (its party noise for one party,
    :meth:`~fedprivacy.dp.party_noise.PartyNoise.std`: ``sigma C`` for ``distributed``, drawn
    per parameter from a torch generator seeded by ``rng``), divides by the expected batch size
    and takes an SGD step; Opacus gives the per-sample gradients.

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
    mechanism : Mechanism
        The per-record clip factors and the silo's noise.
    history : list of (noise_multiplier, sample_rate, steps)
        The silo's history: every step is recorded in it (:func:`record_step`), across rounds;
        a mechanism without a noise multiplier records 0 (no privacy).
    rng : numpy.random.Generator
        Poisson sampling and the seed of the torch noise generator.

    Returns
    -------
    torch.Tensor
        ``x_Q - x_t``, float32 ``(P,)``.
    """
    n = int(x.shape[0])
    if n == 0:
        return torch.zeros_like(global_flat)
    steps = math.ceil(n / batch_size)
    rate = 1.0 / steps
    party = mechanism.party_noise
    std = 0.0 if party is None else party.std(1)
    gsm = _grad_sample_module(model, global_flat)
    generator = torch.Generator(device=global_flat.device)
    generator.manual_seed(int(rng.integers(2**62)))
    expected = max(1, round(rate * n))
    for _ in range(epochs * steps):
        pick = torch.from_numpy(np.flatnonzero(rng.random(n) < rate)).to(x.device)
        sums = _clipped_sums(gsm, loss, x[pick], y[pick], mechanism)
        with torch.no_grad():
            for p, total in zip(gsm._module.parameters(), sums, strict=True):
                noise = torch.normal(0.0, std, p.shape, generator=generator, device=p.device)
                p.add_((total + noise) / expected, alpha=-lr)
        record_step(history, mechanism.noise_multiplier or 0.0, rate)
    flat = torch.cat([p.detach().reshape(-1) for p in gsm._module.parameters()])
    return flat - global_flat


def clipped_per_sample_sum(
    model: nn.Module,
    loss: MaskedLoss,
    global_flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    mechanism: Mechanism,
) -> torch.Tensor:
    """Return ``sum_i f_i g_i``: the pre-noise sum of one DP-SGD step over all of ``x``.

    The records' own loss gradients scaled by the mechanism's clip factors, as every step of
    :func:`dp_sgd_silo` sums them.

    Returns
    -------
    torch.Tensor
        Float32 ``(P,)``.
    """
    gsm = _grad_sample_module(model, global_flat)
    return torch.cat([t.reshape(-1) for t in _clipped_sums(gsm, loss, x, y, mechanism)])


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
