"""The ULDP-FL methods (Algorithms 1-4 of Kato et al.): one round each, and their accounting.

Notation: ``x_t`` the global model, ``S`` silos, ``U`` users (:attr:`Federation.num_users`),
``C`` the clipping bound, ``sigma`` the noise multiplier, ``Q`` local epochs, ``eta_l`` /
``eta_g`` the local / global learning rates, ``q`` the user-level sampling rate.

``DEFAULT`` -- FedAvg with two-sided learning rates (Reddi et al.)
    Each silo runs ``Q`` epochs of minibatch SGD on its records; ``x_{t+1} = x_t + eta_g *
    mean_s Delta_s``. Not private: epsilon is infinite.
``ULDP-NAIVE`` -- Algorithm 1
    As DEFAULT, but each silo clips its delta to ``C`` and adds Gaussian noise. The paper adds
    ``N(0, sigma^2 C^2 |S|)`` per silo and argues a user-level sensitivity of ``|S| C``
    (Theorem 1). That undercounts by a factor 2: removing a user's records changes the other
    records' contribution to the silo delta too, so a silo's clipped delta can move from one
    vector of norm ``C`` to another, by up to ``2C`` (``tests/uldp/test_sensitivity.py``
    builds such a case). We add ``N(0, (2 sigma C)^2 |S|)`` per silo, so that ``sigma`` is the
    noise multiplier of the true sensitivity ``2 |S| C`` and Theorem 1's epsilon holds
    (``naive_noise="corrected"``); ``naive_noise="paper"`` adds the paper's noise and reports
    the epsilon of noise multiplier ``sigma / 2``.
``ULDP-GROUP-k`` -- Algorithm 2, see :mod:`fedprivacy.uldp.group_dp`
    ``x_{t+1} = x_t + eta_g * mean_s Delta_s`` with each ``Delta_s`` from DP-SGD.
``ULDP-AVG``, ``-w``, ``-s``, ``-ws`` -- Algorithms 3 and 4
    In every silo every user trains its own copy from ``x_t`` on its own records (``Q`` epochs,
    minibatch SGD, :mod:`fedprivacy.uldp.per_user_training`); the silo sends
    ``Delta_s = sum_u w_{s,u} clip_C(Delta^{s,u}) + N(0, sigma^2 C^2 / |S|)`` and
    ``x_{t+1} = x_t + eta_g / (q |U| |S|) * sum_s Delta_s``. Weights: ``1/|S|`` (plain) or
    ``n_{s,u} / N_u`` (``-w``, Eq. (3)); ``-s``: users are Poisson-sampled with rate ``q`` each
    round (unsampled users have weight 0) -- the authors' code raises NotImplementedError for
    ULDP-AVG-s. User-level sensitivity: ``sum_s w_{s,u} C = C``.
``ULDP-SGD``, ``-w``, ``-s``, ``-ws`` -- Algorithm 3 (SGD client)
    Each user's gradient of its mean loss over its records in the silo, at ``x_t`` (full batch),
    is clipped and weighted as above; ``x_{t+1} = x_t - eta_g / (q |U| |S|) * sum_s Delta_s``:
    a *descent* step for every variant (the authors' ULDP-SGD-ws adds the gradient).

User-level epsilon per round: DEFAULT ``inf``; NAIVE, AVG and SGD: one Gaussian mechanism of
noise multiplier ``sigma`` per round (Theorems 1 and 3), Poisson-sub-sampled with rate ``q``
for the ``-s`` variants (Remark 1), composed by
:class:`fedprivacy.dp.accounting.PrivacyAccountant` (RDP, dp-accounting) and converted at
``delta`` (Lemma 2); GROUP-k: :func:`fedprivacy.uldp.group_dp.group_epsilon`.

Randomness of a round, all from the caller's :class:`numpy.random.Generator` s, in this order:
the user sample (``rng.random(U) < q``, by user id), the per-record keys that shuffle the local
minibatches (``rng.random((Q, pool_size))``, indexed by pool index), and the noise
(``noise_rng.normal`` per silo: seeded, reproducible, and no privacy against whoever holds the
seed). With the private weighting protocol (``secure``) the silos draw their noise themselves from
OS randomness instead, as discrete Gaussians on the protocol's integer grid. A user's minibatches
do not depend on the other users' records.

:func:`run_round` runs one round on a :class:`~fedprivacy.uldp.federation.Federation`
(what a benchmark times); :func:`reference_presum` recomputes a round's pre-noise aggregate of
ULDP-AVG / ULDP-SGD with the per-user loop (the authors' way).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy._validation import require_int
from fedprivacy.dp.accounting import PrivacyAccountant, quiet_accounting
from fedprivacy.errors import ParameterError
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.method_names import METHODS

if TYPE_CHECKING:
    from fedprivacy.uldp.private_weighting import SecureWeighting
from fedprivacy.uldp.group_dp import (
    SiloDpSgdState,
    dp_sgd_silo,
    group_epsilon,
    group_flags,
    group_size,
    new_state,
)
from fedprivacy.uldp.per_user_loops import group_gradients_loop, train_groups_loop
from fedprivacy.uldp.per_user_training import (
    DEFAULT_MAX_ROWS,
    LocalSGD,
    PerUserTrainer,
    clip_rows,
    epoch_orders,
)

__all__ = [
    "METHODS",
    "MethodRunner",
    "MethodSpec",
    "RoundHyper",
    "RoundOutput",
    "method_spec",
    "reference_presum",
    "run_round",
]

Family = Literal["default", "naive", "group", "avg", "sgd"]


@dataclass(frozen=True)
class MethodSpec:
    """What a method name means.

    Attributes
    ----------
    name : str
        The paper's name.
    family : {"default", "naive", "group", "avg", "sgd"}
        The algorithm.
    weighted : bool
        ``w_{s,u} = n_{s,u} / N_u`` instead of ``1 / |S|`` (``-w``).
    sampled : bool
        User-level Poisson sub-sampling (``-s``).
    group : str or None
        ``"max"``, ``"median"``, ``"2"``, ``"8"`` for ULDP-GROUP-k.
    """

    name: str
    family: Family
    weighted: bool = False
    sampled: bool = False
    group: str | None = None

    @property
    def private(self) -> bool:
        """Whether the method is differentially private (all but DEFAULT)."""
        return self.family != "default"


def method_spec(name: str) -> MethodSpec:
    """Return the :class:`MethodSpec` of a method name.

    Raises
    ------
    ParameterError
        If the name is not one of :data:`METHODS` (the message lists them).
    """
    if name not in METHODS:
        raise ParameterError("method", f"must be one of {', '.join(METHODS)}; got {name!r}")
    if name == "DEFAULT":
        return MethodSpec(name, "default")
    if name == "ULDP-NAIVE":
        return MethodSpec(name, "naive")
    if name.startswith("ULDP-GROUP-"):
        return MethodSpec(name, "group", group=name.removeprefix("ULDP-GROUP-"))
    family: Family = "avg" if name.startswith("ULDP-AVG") else "sgd"
    suffix = name.split("-")[2] if name.count("-") == 2 else ""
    return MethodSpec(name, family, weighted="w" in suffix, sampled="s" in suffix)


@dataclass(frozen=True)
class RoundHyper:
    """Hyper-parameters of a round.

    Attributes
    ----------
    local : LocalSGD
        Local epochs ``Q``, batch size ``B``, local learning rate ``eta_l`` (ULDP-SGD uses none
        of them: one full-batch gradient per user).
    global_lr : float
        ``eta_g``.
    clip : float
        ``C``.
    sigma : float
        Noise multiplier.
    sampling_rate : float
        ``q`` of the ``-s`` variants (ignored otherwise).
    naive_noise : {"corrected", "paper"}
        ULDP-NAIVE's noise, see the module docstring.
    """

    local: LocalSGD
    global_lr: float = 1.0
    clip: float = 1.0
    sigma: float = 5.0
    sampling_rate: float = 1.0
    naive_noise: Literal["corrected", "paper"] = "corrected"


@dataclass
class RoundOutput:
    """The result of one round.

    Attributes
    ----------
    flat : torch.Tensor
        ``x_{t+1}``.
    presum : torch.Tensor
        ``sum_s`` of the silos' contributions before noise (for ULDP-GROUP-k, whose noise is
        added inside DP-SGD, the noisy deltas).
    noisy_sum : torch.Tensor
        ``sum_s Delta_s`` as the server receives it.
    sampled : numpy.ndarray or None
        Boolean mask of the sampled users (``-s`` variants).
    groups : int
        Users (AVG / SGD) or silos that contributed.
    clipped : int
        How many of their updates were clipped.
    mean_norm : float
        Mean norm of the updates before clipping.
    seconds : float
        Wall time of the round.
    """

    flat: torch.Tensor
    presum: torch.Tensor
    noisy_sum: torch.Tensor
    sampled: NDArray[np.bool_] | None = None
    groups: int = 0
    clipped: int = 0
    mean_norm: float = math.nan
    seconds: float = 0.0


@dataclass
class MethodRunner:
    """Runs the rounds of one method on a federation and keeps its privacy accounting.

    Parameters
    ----------
    method : str or MethodSpec
        A name of :data:`METHODS`.
    fed : Federation
        The data.
    hyper : RoundHyper
        Hyper-parameters.
    delta : float
        Target delta of the reported epsilon.
    model : torch.nn.Module, optional
        Architecture (default: the task's model).
    max_rows : int
        Rows per vectorised call of the per-user trainer.
    secure : SecureWeighting, optional
        Aggregate the ``-w`` methods through the private weighting protocol (Protocol 1):
        each silo hands its clipped per-user deltas to the protocol instead of weighting them in
        the clear, and the protocol's silos add their own noise (a discrete Gaussian of standard
        deviation ``sigma C / sqrt(|S|)`` on the protocol's grid, from OS randomness, not from
        ``noise_rng``); the protocol's output is the round's noisy aggregate. The plaintext
        aggregate of the same round is still computed, to report the protocol's deviation from
        it (``secure_log``). Must be set up (the accounting needs its parameters).
    """

    method: str | MethodSpec
    fed: Federation
    hyper: RoundHyper
    delta: float = 1e-5
    model: nn.Module | None = None
    max_rows: int = DEFAULT_MAX_ROWS
    spec: MethodSpec = field(init=False)
    trainer: PerUserTrainer = field(init=False)
    accountant: PrivacyAccountant = field(init=False)
    group_k: int | None = field(init=False, default=None)
    group_fed: Federation | None = field(init=False, default=None)
    group_state: SiloDpSgdState | None = field(init=False, default=None)
    rounds: int = field(init=False, default=0)
    secure: SecureWeighting | None = None
    secure_log: list[dict[str, float]] = field(init=False, default_factory=list)
    times_sampled: NDArray[np.int64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.spec = self.method if isinstance(self.method, MethodSpec) else method_spec(self.method)
        self.hyper.local.validate()
        h = self.hyper
        for name in ("global_lr", "clip", "sigma"):
            value = getattr(h, name)
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(name, f"must be a finite number > 0, got {value!r}")
        if not 0 < h.sampling_rate <= 1:
            raise ParameterError("sampling_rate", f"must lie in (0, 1], got {h.sampling_rate!r}")
        if h.naive_noise not in ("corrected", "paper"):
            raise ParameterError(
                "naive_noise", f"must be 'corrected' or 'paper', got {h.naive_noise!r}"
            )
        if self.secure is not None and not (
            self.spec.weighted and self.spec.family in ("avg", "sgd")
        ):
            raise ParameterError(
                "secure_weighting", f"applies to the weighted methods only, not {self.spec.name}"
            )
        if self.secure is not None:
            self.effective_noise_multiplier  # noqa: B018 - fails early if tau is not negligible
        if self.model is None:
            self.model = self.fed.task.build_model()
        self.trainer = PerUserTrainer(self.model, self.fed.task.loss, max_rows=self.max_rows)
        self.times_sampled = np.zeros(self.fed.num_users, dtype=np.int64)
        self.accountant = PrivacyAccountant("rdp")
        if self.spec.family == "group":
            assert self.spec.group is not None
            self.group_k = group_size(self.fed, self.spec.group)
            m = 2 if self.fed.task.task == "survival" else 1
            self.group_fed = self.fed.keep_rows(group_flags(self.fed, self.group_k, m))
            self.group_state = new_state(self.fed.num_silos)

    # -- accounting ------------------------------------------------------------------------

    @property
    def sampling_rate(self) -> float:
        """``q`` if the method sub-samples users, else 1."""
        return self.hyper.sampling_rate if self.spec.sampled else 1.0

    @property
    def effective_noise_multiplier(self) -> float:
        """Noise standard deviation over the user-level sensitivity of the aggregate.

        With the private weighting protocol the noise is a sum of the silos' discrete Gaussians
        on the protocol's integer grid, whose sensitivity includes the encoding's rounding:
        :meth:`SecureWeighting.noise_multiplier` (slightly below ``sigma``) is used.
        """
        h = self.hyper
        if self.spec.family == "naive" and h.naive_noise == "paper":
            return h.sigma / 2.0
        if self.secure is not None:
            std = h.sigma * h.clip / math.sqrt(self.fed.num_silos)
            return min(h.sigma, self.secure.noise_multiplier(std, h.clip))
        return h.sigma

    def epsilon(self) -> float:
        """User-level epsilon of the rounds run so far at :attr:`delta` (``inf`` for DEFAULT)."""
        if self.spec.family == "default":
            return math.inf
        if self.spec.family == "group":
            assert self.group_state is not None and self.group_k is not None
            histories = [self.group_state.history(s) for s in range(self.fed.num_silos)]
            return group_epsilon(histories, self.group_k, self.delta)
        return self.accountant.epsilon(self.delta)

    def epsilon_server(self) -> float:
        """User-level epsilon against the aggregation server (``inf`` for DEFAULT).

        :meth:`epsilon` is the guarantee of the released models against anyone who does not
        know which users were sampled: with user-level sub-sampling (``-s``) it is amplified by
        the sampling rate ``q``. The server chooses and knows the sample, so against the server
        there is no amplification: a user's privacy loss is that of the unsampled Gaussian
        mechanism composed over the rounds in which that user was sampled. The sample does not
        depend on the data, so conditioning on it is allowed; the bound reported is that of the
        most-sampled user. Methods without user sub-sampling have the same epsilon against
        both adversaries. Both assume, as the paper does, that the server sees only the sum
        over silos of each round (Protocol 1 or secure aggregation).

        Returns
        -------
        float
            Epsilon at :attr:`delta` of the rounds run so far against the server.
        """
        if not self.spec.sampled:
            return self.epsilon()
        return self._unsampled_epsilon(int(self.times_sampled.max(initial=0)))

    def epsilon_server_after(self, rounds: int) -> float:
        """Epsilon against the server after ``rounds`` rounds, in the worst case.

        A user may be sampled in every future round, so the bound composes the unsampled
        Gaussian mechanism ``rounds`` times (methods without user sub-sampling: as
        :meth:`epsilon_after`).

        Raises
        ------
        ParameterError
            If ``rounds`` is not a positive integer or no round has run yet.
        """
        if not self.spec.sampled:
            return self.epsilon_after(rounds)
        return self._unsampled_epsilon(require_int("rounds", rounds, minimum=1))

    def _unsampled_epsilon(self, rounds: int) -> float:
        """Epsilon of ``rounds`` runs of the Gaussian mechanism without sub-sampling."""
        if rounds == 0:
            return 0.0
        with quiet_accounting():
            accountant = PrivacyAccountant("rdp").compose_gaussian(
                self.effective_noise_multiplier, rounds, 1.0
            )
            return accountant.epsilon(self.delta)

    def epsilon_after(self, rounds: int) -> float:
        """User-level epsilon after ``rounds`` rounds like those run so far (``inf`` for DEFAULT).

        Every round of a method has the same privacy cost (the same noise, user sampling rate
        and, for ULDP-GROUP, DP-SGD steps per silo), and RDP adds up over rounds, so this is
        the epsilon :meth:`epsilon` would report after ``rounds`` rounds: the composed curve
        scaled by ``rounds / self.rounds``. It gives the privacy half of a figure at the
        paper's number of rounds when fewer are trained.

        Raises
        ------
        ParameterError
            If ``rounds`` is not a positive integer or no round has run yet.
        """
        target = require_int("rounds", rounds, minimum=1)
        if self.spec.family == "default":
            return math.inf
        if self.rounds == 0:
            raise ParameterError("rounds", "needs at least one round run first")
        repeat = target / self.rounds
        if self.spec.family == "group":
            assert self.group_state is not None and self.group_k is not None
            histories = [self.group_state.history(s) for s in range(self.fed.num_silos)]
            return group_epsilon(histories, self.group_k, self.delta, repeat=repeat)
        orders, rho = self.accountant.rdp()
        scaled = PrivacyAccountant("rdp", orders=orders).compose_rdp(orders, repeat * rho)
        return scaled.epsilon(self.delta)

    # -- one round -------------------------------------------------------------------------

    def run_round(
        self,
        global_flat: torch.Tensor,
        rng: np.random.Generator,
        noise_rng: np.random.Generator | None = None,
    ) -> RoundOutput:
        """Run one round from ``global_flat``; compose its privacy cost.

        Parameters
        ----------
        global_flat : torch.Tensor
            ``x_t``, float32 ``(P,)`` on the federation's device.
        rng : numpy.random.Generator
            Sampling and minibatch randomness.
        noise_rng : numpy.random.Generator, optional
            Noise randomness (default ``rng``).

        Returns
        -------
        RoundOutput
            The new model and the round's aggregates.
        """
        started = time.perf_counter()
        nrng = rng if noise_rng is None else noise_rng
        fam = self.spec.family
        if fam == "group":
            out = self._group_round(global_flat, rng)
        elif fam in ("default", "naive"):
            out = self._silo_round(global_flat, rng, nrng)
        else:
            out = self._user_round(global_flat, rng, nrng)
        if fam in ("naive", "avg", "sgd"):
            with quiet_accounting():
                self.accountant.compose_gaussian(
                    self.effective_noise_multiplier, 1, self.sampling_rate
                )
        self.rounds += 1
        out.seconds = time.perf_counter() - started
        return out

    def presum(self, global_flat: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        """The pre-noise aggregate of a round from ``global_flat``, without updating anything.

        Raises
        ------
        ParameterError
            For ULDP-GROUP-k (see :func:`fedprivacy.uldp.group_dp.clipped_per_sample_sum`).
        """
        if self.spec.family == "group":
            raise ParameterError("method", "ULDP-GROUP-k adds its noise inside DP-SGD")
        dummy = np.random.default_rng(0)
        if self.spec.family in ("default", "naive"):
            return self._silo_round(global_flat, rng, dummy, noise=False).presum
        return self._user_round(global_flat, rng, dummy, noise=False).presum

    def _keys(self, rng: np.random.Generator) -> NDArray[np.float64]:
        return rng.random((self.hyper.local.epochs, self.fed.pool_size))

    def _noise(self, rng: np.random.Generator, std: float, like: torch.Tensor) -> torch.Tensor:
        z = rng.normal(0.0, std, size=like.shape[0])
        return torch.from_numpy(z).to(device=like.device, dtype=like.dtype)

    def _silo_round(
        self,
        global_flat: torch.Tensor,
        rng: np.random.Generator,
        noise_rng: np.random.Generator,
        *,
        noise: bool = True,
    ) -> RoundOutput:
        fed, h, spec = self.fed, self.hyper, self.spec
        keys = self._keys(rng)
        orders = epoch_orders(keys[:, fed.record_index], fed.silo_offsets, h.local.epochs)
        deltas = self.trainer.train(global_flat, fed.x, fed.y, fed.silo_offsets, orders, h.local)
        s = fed.num_silos
        if spec.family == "naive":
            factors, norms = clip_rows(deltas, h.clip)
            contrib = deltas * factors[:, None]
            scale = 2.0 if h.naive_noise == "corrected" else 1.0
            std = scale * h.sigma * h.clip * math.sqrt(s)
            clipped = int((norms > h.clip).sum())
            mean_norm = float(norms.mean())
        else:
            contrib, std, clipped = deltas, 0.0, 0
            mean_norm = float(torch.linalg.vector_norm(deltas, dim=1).mean())
        presum = contrib.sum(dim=0)
        noisy = presum.clone()
        if noise and std > 0:
            for _ in range(s):
                noisy += self._noise(noise_rng, std, presum)
        flat = global_flat + h.global_lr * noisy / s
        return RoundOutput(flat, presum, noisy, None, s, clipped, mean_norm)

    def _user_round(
        self,
        global_flat: torch.Tensor,
        rng: np.random.Generator,
        noise_rng: np.random.Generator,
        *,
        noise: bool = True,
    ) -> RoundOutput:
        fed, h, spec = self.fed, self.hyper, self.spec
        q = self.sampling_rate
        sampled = rng.random(fed.num_users) < q if spec.sampled else None
        if sampled is not None and noise:
            self.times_sampled += sampled
        keys = self._keys(rng) if spec.family == "avg" else None
        weights = fed.weights(spec.weighted)
        if sampled is not None:
            weights = weights * sampled[None, :]
        s = fed.num_silos
        std = h.sigma * h.clip / math.sqrt(s)
        presum = torch.zeros_like(global_flat)
        noisy = torch.zeros_like(global_flat)
        groups = clipped = 0
        norm_total = 0.0
        secure = self.secure if noise else None
        silo_deltas: list[NDArray[np.float64]] = []
        for silo in range(s):
            sl = fed.silo_slice(silo)
            x, y = fed.x[sl], fed.y[sl]
            off, users = fed.user_offsets[silo], fed.silo_users[silo]
            w = weights[silo, users]
            live = np.flatnonzero(w != 0)
            if spec.family == "avg":
                assert keys is not None
                orders = epoch_orders(keys[:, fed.record_index[sl]], off, h.local.epochs)
                chunks = self.trainer.iter_deltas(global_flat, x, y, off, orders, h.local, live)
            else:
                chunks = self.trainer.iter_gradients(global_flat, x, y, off, live)
            if secure is not None:
                chunk_list = list(chunks)
                silo_deltas.append(
                    _dense_clipped(chunk_list, users, fed.num_users, global_flat.numel(), h.clip)
                )
                chunks = iter(chunk_list)
            part = PerUserTrainer.clipped_sum(
                chunks, h.clip, w, num_params=global_flat.numel(), device=global_flat.device
            )
            presum += part.total
            noisy += part.total
            if noise and secure is None:  # the protocol's silos draw their own noise
                noisy += self._noise(noise_rng, std, global_flat)
            groups += part.groups
            clipped += part.clipped
            if part.groups:
                norm_total += part.mean_norm * part.groups
        if secure is not None:
            kept = sampled if spec.sampled else None
            aggregate, seconds = secure.aggregate(self.rounds + 1, silo_deltas, std, kept)
            reference = secure.plaintext_reference(silo_deltas, kept)
            # the engine's float32 pre-noise sum plus the noise the silos report they added
            engine = presum.detach().cpu().numpy().astype(np.float64)
            engine = engine + np.sum(secure.silo_noise(), axis=0)
            self.secure_log.append(
                {
                    "max_abs_deviation": float(np.max(np.abs(aggregate - reference))),
                    "engine_float32_deviation": float(np.max(np.abs(aggregate - engine))),
                    **seconds,
                }
            )
            noisy = torch.from_numpy(aggregate).to(device=noisy.device, dtype=noisy.dtype)
        step = h.global_lr / (q * fed.num_users * s)
        sign = 1.0 if spec.family == "avg" else -1.0
        flat = global_flat + sign * step * noisy
        mean_norm = norm_total / groups if groups else math.nan
        return RoundOutput(flat, presum, noisy, sampled, groups, clipped, mean_norm)

    def _group_round(self, global_flat: torch.Tensor, rng: np.random.Generator) -> RoundOutput:
        fed, h = self.group_fed, self.hyper
        assert fed is not None and self.group_state is not None and self.model is not None
        total = torch.zeros_like(global_flat)
        norms = []
        for silo in range(fed.num_silos):
            sl = fed.silo_slice(silo)
            delta = dp_sgd_silo(
                self.model,
                fed.task.loss,
                global_flat,
                fed.x[sl],
                fed.y[sl],
                epochs=h.local.epochs,
                batch_size=h.local.batch_size,
                lr=h.local.lr,
                clip=h.clip,
                sigma=h.sigma,
                accountant=self.group_state.accountants[silo],
                rng=rng,
            )
            total += delta
            norms.append(float(torch.linalg.vector_norm(delta)))
        flat = global_flat + h.global_lr * total / fed.num_silos
        return RoundOutput(
            flat, total, total.clone(), None, fed.num_silos, 0, float(np.mean(norms))
        )


def _dense_clipped(
    chunks: list[tuple[NDArray[np.int64], torch.Tensor]],
    silo_users: NDArray[np.int64],
    num_users: int,
    num_params: int,
    clip: float,
) -> NDArray[np.float64]:
    """The clipped per-user vectors of one silo as a dense ``(num_users, P)`` array.

    Rows of users without records in the silo (or not trained this round) are zero; the
    private weighting protocol multiplies them by their encrypted weights.
    """
    out = np.zeros((num_users, num_params), dtype=np.float64)
    for ids, vectors in chunks:
        wide = vectors.to(torch.float64)
        # clipped in float64: the L2 bound the accounting assumes then holds to a few ulps (a
        # float32 factor would let norms exceed the clip by ~1e-7 relative)
        norms = torch.linalg.vector_norm(wide, dim=1)
        factors = torch.clamp(clip / torch.clamp(norms, min=1e-300), max=1.0)
        out[np.asarray(silo_users)[np.asarray(ids)]] = (wide * factors[:, None]).cpu().numpy()
    return out


def run_round(
    method: str,
    fed: Federation,
    global_flat: torch.Tensor,
    hyper: RoundHyper,
    rng: np.random.Generator,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> RoundOutput:
    """Run one round of ``method`` on ``fed`` from ``global_flat`` (for benchmarks).

    A fresh :class:`MethodRunner` is made (for ULDP-GROUP-k this computes the flags and new
    accountants); noise comes from ``rng`` too.

    Returns
    -------
    RoundOutput
        The new model and the round's aggregates and timing.
    """
    runner = MethodRunner(method, fed, hyper, max_rows=max_rows)
    return runner.run_round(global_flat, rng)


def reference_presum(
    method: str,
    fed: Federation,
    global_flat: torch.Tensor,
    hyper: RoundHyper,
    rng: np.random.Generator,
    *,
    model: nn.Module | None = None,
) -> torch.Tensor:
    """The pre-noise aggregate of a ULDP-AVG / ULDP-SGD round, computed with per-user loops.

    Draws the same randomness as :meth:`MethodRunner.run_round` (sample, then keys) and, in
    every silo, trains each user with :func:`~fedprivacy.uldp.per_user_loops.train_groups_loop`
    (a model copy and an optimiser per user, the authors' way) or takes its gradient with
    :func:`~fedprivacy.uldp.per_user_loops.group_gradients_loop`, then clips, weights and
    sums in float64.

    Returns
    -------
    torch.Tensor
        Float32 ``(P,)``.

    Raises
    ------
    ParameterError
        For other methods.
    """
    spec = method_spec(method)
    if spec.family not in ("avg", "sgd"):
        raise ParameterError("method", "reference_presum covers ULDP-AVG and ULDP-SGD only")
    arch = model if model is not None else fed.task.build_model()
    loss = fed.task.loss
    h = hyper
    q = h.sampling_rate if spec.sampled else 1.0
    sampled = rng.random(fed.num_users) < q if spec.sampled else None
    keys = rng.random((h.local.epochs, fed.pool_size)) if spec.family == "avg" else None
    weights = fed.weights(spec.weighted)
    if sampled is not None:
        weights = weights * sampled[None, :]
    total = torch.zeros(global_flat.numel(), dtype=torch.float64)
    for silo in range(fed.num_silos):
        sl = fed.silo_slice(silo)
        x, y = fed.x[sl].cpu(), fed.y[sl].cpu()
        off, users = fed.user_offsets[silo], fed.silo_users[silo]
        g0 = global_flat.cpu()
        if keys is not None:
            orders = epoch_orders(keys[:, fed.record_index[sl]], off, h.local.epochs)
            vectors = train_groups_loop(arch, loss, g0, x, y, off, orders, h.local)
        else:
            vectors = group_gradients_loop(arch, loss, g0, x, y, off)
        for j, u in enumerate(users):
            w = float(weights[silo, u])
            if w == 0:
                continue
            v = vectors[j].to(torch.float64)
            norm = float(torch.linalg.vector_norm(v))
            factor = h.clip / norm if norm > h.clip else 1.0
            total += w * factor * v
    return total.to(torch.float32)
