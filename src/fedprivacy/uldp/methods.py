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
    minibatch SGD, :class:`fedprivacy.fl.local_training.VectorisedTrainer`); the silo sends
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
for the ``-s`` variants (Remark 1), accounted from the round loop's ledger
(:class:`fedprivacy.uldp.accounting.GaussianRounds`: RDP, converted at ``delta`` by Lemma 2);
GROUP-k: :func:`fedprivacy.uldp.group_dp.group_epsilon`.

Randomness of a round, all from the caller's :class:`numpy.random.Generator` s, in this order:
the user sample (``rng.random(U) < q``, by user id), the per-record keys that shuffle the local
minibatches (``rng.random((Q, pool_size))``, indexed by pool index), and the noise
(``noise_rng.normal`` per silo: seeded, reproducible, and no privacy against whoever holds the
seed). With the private weighting protocol (``secure``) the silos draw their noise themselves from
OS randomness instead, as discrete Gaussians on the protocol's integer grid. A user's minibatches
do not depend on the other users' records.

Each family is one short entry of :data:`fedprivacy.uldp.families.FAMILIES` (a
:class:`~fedprivacy.uldp.families.MethodFamily`: its round, noise and accounting);
:class:`MethodRunner` looks its method's family up there. What a name means is the table
:data:`fedprivacy.uldp.method_specs.SPECS`; :class:`RoundHyper` and :class:`RoundOutput` are in
:mod:`fedprivacy.uldp.rounds`.

:meth:`MethodRunner.run_round` runs one round on a federation; the tests' oracle
(``presum_oracle`` in ``tests/uldp/conftest.py``) recomputes a round's pre-noise aggregate
of ULDP-AVG / ULDP-SGD with the per-user loop (the authors' way).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import Aggregator
from fedprivacy.fl.aggregators import make_aggregator
from fedprivacy.fl.canary_users import CanaryUsers
from fedprivacy.fl.local_spec import require_plain_sgd
from fedprivacy.fl.local_training import DEFAULT_MAX_ROWS, VectorisedTrainer
from fedprivacy.fl.mechanism import Mechanism
from fedprivacy.uldp.accounting import UldpAccounting
from fedprivacy.uldp.families import FAMILIES, MethodFamily, check_mechanism
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.group_dp import SiloDpSgdState
from fedprivacy.uldp.method_specs import MethodSpec, method_spec
from fedprivacy.uldp.rounds import RoundHyper, RoundOutput

if TYPE_CHECKING:
    from fedprivacy.secagg.private_weighting import SecureWeighting

__all__ = ["MethodRunner"]


@dataclass
class MethodRunner:
    """Runs the rounds of one method on a federation; its accounting reads the loop's ledger.

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
    gradient : {"vmap", "bmm"}
        How the per-user trainer differentiates its users
        (:data:`~fedprivacy.fl.gradients.GRADIENTS`); the same result to float rounding.
    secure : SecureWeighting, optional
        Aggregate the ``-w`` methods through the private weighting protocol (Protocol 1):
        each silo hands its clipped per-user deltas to the protocol instead of weighting them in
        the clear, and the protocol's silos add their own noise (a discrete Gaussian of standard
        deviation ``sigma C / sqrt(|S|)`` on the protocol's grid, from OS randomness, not from
        ``noise_rng``); the protocol's output is the round's noisy aggregate. The plaintext
        aggregate of the same round is still computed, to report the protocol's deviation from
        it (``secure_log``). Must be set up (the accounting needs its parameters).
    mechanism : Mechanism, optional
        The clipping and noise of the per-user methods (ULDP-AVG / ULDP-SGD and their variants),
        a registered :class:`~fedprivacy.fl.mechanism.Mechanism` (the same classes as
        FedAvg's): by default ``distributed`` with noise multiplier ``sigma`` and clip ``C``,
        the silos adding the noise (the paper). ``central``: the server adds it to the sum over
        silos (no guarantee against the server then); ``none``: no clipping, no noise (epsilon
        infinite). The other families add their own noise and take none.
    amplified : bool
        Whether a ``-s`` method's user sample is Poisson sampling hidden from whoever sees the
        released models (the paper; its epsilon is amplified by ``q``). ``False`` when the
        server chooses the sample (a selection scheme such as Multi-RoundSecAgg's batch
        partitioning): its epsilon is then the one against the server, the unsampled Gaussian
        mechanism composed over the rounds of the most-selected user.
    aggregator : Aggregator, optional
        How the server sums the silos' (noised) contributions, a registered
        :class:`~fedprivacy.fl.aggregation.Aggregator` (the same classes as FedAvg's), the
        silos its parties with weight 1 each (:meth:`sum_silos`), as
        :func:`~fedprivacy.fl.aggregators.make_aggregator` builds it. By default the registry's
        ``float`` entry without clipping: the exact sum. ``secagg``: SecAgg between the silos,
        so the server learns only the sum (its fixed-point encoding needs a finite
        ``update_clip``). The private weighting protocol (``secure``) is the ``-w`` methods'
        own weighted secure aggregation and replaces it.

    canaries : CanaryUsers, optional
        Canary users after the federation's (the user-level methods in the clear-weighted
        sums): a round's sample over users and canaries gives the selected canaries, each
        adding its direction, at the clip, to one silo's sum
        (:meth:`~fedprivacy.uldp.families.user_level.UserLevelFamily.round`).

    Attributes
    ----------
    spec : MethodSpec
        What the method name means.
    family : MethodFamily
        The method's entry of :data:`~fedprivacy.uldp.families.FAMILIES`: every round, the
        noise and the accounting are its hooks, called with this runner.
    accounting : UldpAccounting
        How a user's cost follows from the rounds released and the ledger (the family's
        :meth:`~fedprivacy.uldp.families.MethodFamily.accounting`).
    rounds : int
        Rounds run so far (the aggregator's round index is ``rounds + 1``).
    group_k, group_fed, group_state
        ULDP-GROUP-k's ``k``, kept records and per-silo DP-SGD step histories (``None`` for the
        other methods).
    """

    method: str | MethodSpec
    fed: Federation
    hyper: RoundHyper
    delta: float = 1e-5
    model: nn.Module | None = None
    max_rows: int = DEFAULT_MAX_ROWS
    gradient: str = "vmap"
    spec: MethodSpec = field(init=False)
    family: MethodFamily = field(init=False, repr=False)
    trainer: VectorisedTrainer = field(init=False)
    group_k: int | None = field(init=False, default=None)
    group_fed: Federation | None = field(init=False, default=None)
    group_state: SiloDpSgdState | None = field(init=False, default=None)
    secure: SecureWeighting | None = None
    mechanism: Mechanism | None = None
    amplified: bool = True
    secure_log: list[dict[str, float]] = field(init=False, default_factory=list)
    aggregator: Aggregator | None = None
    canaries: CanaryUsers | None = None
    accounting: UldpAccounting = field(init=False, repr=False)
    rounds: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.spec = self.method if isinstance(self.method, MethodSpec) else method_spec(self.method)
        self.family = FAMILIES[self.spec.family]
        require_plain_sgd(self.hyper.local)
        h = self.hyper
        for name in ("global_lr", "clip", "noise_multiplier"):
            value = getattr(h, name)
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(name, f"must be a finite number > 0, got {value!r}")
        if not 0 < h.sampling_rate <= 1:
            raise ParameterError("sampling_rate", f"must lie in (0, 1], got {h.sampling_rate!r}")
        if h.naive_noise not in ("corrected", "paper"):
            raise ParameterError(
                "naive_noise", f"must be 'corrected' or 'paper', got {h.naive_noise!r}"
            )
        if self.canaries is not None and (self.secure is not None or not self.family.per_user):
            raise ParameterError(
                "canaries", "join the user-level methods' clear-weighted silo sums only"
            )
        if self.secure is not None and not (self.spec.weighted and self.family.per_user):
            raise ParameterError(
                "secure_weighting", f"applies to the weighted methods only, not {self.spec.name}"
            )
        self.mechanism = self._mechanism()
        if self.aggregator is None:  # the exact sum in the clear
            s = self.fed.num_silos
            self.aggregator = make_aggregator(
                False, clip=math.inf, per_round=s, bits=32, seed=0, encoding="float"
            )
        if self.secure is not None:
            self.effective_noise_multiplier  # noqa: B018 - fails early if tau is not negligible
        if self.model is None:
            self.model = self.fed.task.build_model()
        self.trainer = VectorisedTrainer(
            self.model, self.fed.task.loss, max_rows=self.max_rows, gradient=self.gradient
        )
        self.family.setup(self)
        self.accounting = self.family.accounting(self)

    def _mechanism(self) -> Mechanism | None:
        """The given mechanism, checked (:func:`check_mechanism`), or the family's default."""
        if self.mechanism is None:
            return self.family.default_mechanism(self.hyper)
        check_mechanism(self.spec.name, self.mechanism, self.secure is not None)
        return self.mechanism

    @property
    def noise_hidden_from_server(self) -> bool:
        """Whether the parties (silos) add the noise, so that the server sees only noisy sums."""
        m = self.mechanism
        return m is None or m.adds_noise_in_aggregation

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
        return self.family.noise_multiplier(self)

    # -- one round -------------------------------------------------------------------------

    def run_round(
        self,
        global_flat: torch.Tensor,
        rng: np.random.Generator,
        noise_rng: np.random.Generator | None = None,
        *,
        sampled: NDArray[np.bool_] | None = None,
    ) -> RoundOutput:
        """Run one round from ``global_flat`` (its cost is the ledger's, :attr:`accounting`).

        Parameters
        ----------
        global_flat : torch.Tensor
            ``x_t``, float32 ``(P,)`` on the federation's device.
        rng : numpy.random.Generator
            Sampling and minibatch randomness.
        noise_rng : numpy.random.Generator, optional
            Noise randomness (default ``rng``).
        sampled : numpy.ndarray of bool, optional
            The user sample of a ``-s`` method, chosen by the round loop's selector (drawn
            from ``rng`` when not given).

        Returns
        -------
        RoundOutput
            The new model and the round's aggregates.
        """
        started = time.perf_counter()
        nrng = rng if noise_rng is None else noise_rng
        out = self.family.round(self, global_flat, rng, nrng, sampled=sampled)
        self.rounds += 1
        out.seconds = time.perf_counter() - started
        return out

    def sum_silos(self, contributions: Sequence[torch.Tensor]) -> torch.Tensor:
        """The server's sum of the silos' contributions, through :attr:`aggregator`.

        Each silo is one party of weight 1; the aggregate is computed in float64 and returned
        as the contributions' dtype, on their device.

        Raises
        ------
        ParameterError
            Naming ``aggregator`` if it aggregated fewer than every silo (a silo that drops
            takes its share of the noise, which the accounting counts).
        """
        like = contributions[0]
        deltas = {s: c.detach().cpu().numpy() for s, c in enumerate(contributions)}
        assert self.aggregator is not None
        outcome = self.aggregator.aggregate(self.rounds + 1, deltas, dict.fromkeys(deltas, 1.0))
        if outcome.weighted_sum is None or len(outcome.aggregated) != len(deltas):
            raise ParameterError(
                "aggregator",
                f"aggregated {len(outcome.aggregated)} of {len(deltas)} silos "
                f"({outcome.aborted or 'dropped'}); every silo's noise share must be in the sum",
            )
        return torch.from_numpy(outcome.weighted_sum).to(device=like.device, dtype=like.dtype)

    def presum(self, global_flat: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        """The pre-noise aggregate of a round from ``global_flat``, without updating anything.

        Raises
        ------
        ParameterError
            For ULDP-GROUP-k (see :func:`fedprivacy.uldp.group_dp.clipped_per_sample_sum`).
        """
        return self.family.presum(self, global_flat, rng)
