"""Differential-privacy mechanisms of a federated round, as post-processors around aggregation.

A mechanism acts at two points of the round (as pfl-research's mechanisms do): on the updates
before aggregation (:meth:`Mechanism.prepare`: clipping, the weights the aggregate uses) and on
the aggregate before the server applies it (:meth:`Mechanism.release`: noise). Registered by name
in :data:`MECHANISMS`; :func:`make_mechanism` builds one.

* ``none``: updates aggregated as they are, weighted by data size.
* ``central``: every update clipped to L2 norm ``C``, equal weights, and Gaussian noise of
  standard deviation ``z C`` added by the server to the sum of the aggregated updates (so
  ``z C / |S|`` on the mean). The server sees the noise-free sum; the released models are
  ``(epsilon, delta)``-DP per user. The noise is drawn from a generator seeded by the operating
  system (``secrets``), never from the run's seed.
* ``distributed``: the same clipping and equal weights; every party adds discrete Gaussian noise
  on the integer grid of its fixed-point encoding before masking, inside secure aggregation
  (:mod:`fedprivacy.dp.party_noise`), so the server never sees an unnoised sum. Each party's
  share is over-provisioned for the protocol's threshold, and the accountant uses the noise
  really in each aggregate (:meth:`Mechanism.accounted_noise`).

The same registered class serves every algorithm: FedAvg calls :meth:`Mechanism.prepare` on the
users' updates and :meth:`Mechanism.release` on the mean (in process and on every node of a
Flower deployment); a ULDP-FL method (:mod:`fedprivacy.uldp.families.user_level`) scales each
user's update by :meth:`Mechanism.clip_factors`, has each silo add its share of
:attr:`Mechanism.party_noise` (:meth:`~fedprivacy.dp.party_noise.PartyNoise.std`, continuous
where no SecAgg grid carries it) and calls :meth:`Mechanism.release` on the sum over silos.
A new mechanism is one subclass and one :data:`MECHANISMS` registration
(``tests/pipeline/test_seams.py`` registers a toy one and runs it in every algorithm and
deployment).
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from fedprivacy._registry import Registry
from fedprivacy.dp._checks import require_positive
from fedprivacy.dp.mechanisms import clip_rows_l2
from fedprivacy.dp.noise_modes import DEFAULT_NOISE_MODE, NOISE_MODES
from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import AggregateOutcome

if TYPE_CHECKING:
    import torch

    from fedprivacy.dp.accountants import AccountantKind

__all__ = [
    "MECHANISMS",
    "CentralGaussian",
    "DistributedDiscreteGaussian",
    "Mechanism",
    "NoMechanism",
    "l2_clip_factors",
    "make_mechanism",
]

Updates = dict[int, NDArray[np.float32]]


def l2_clip_factors(norms: torch.Tensor, bound: float) -> torch.Tensor:
    """``min(1, bound / norm)`` per norm (1 for a zero vector): L2 clipping as a scale factor.

    Examples
    --------
    >>> import torch
    >>> l2_clip_factors(torch.tensor([5.0, 0.5, 0.0]), 1.0).tolist()
    [0.20000000298023224, 1.0, 1.0]
    """
    import torch

    return torch.where(norms > bound, bound / norms.clamp_min(1e-30), torch.ones_like(norms))


class Mechanism(ABC):
    """What a round does to the updates around aggregation.

    A subclass gives :attr:`name`, :meth:`release` and :meth:`from_options`, and
    :meth:`clip_factors` if it clips; :meth:`prepare` (scale by :meth:`clip_factors`, equal
    weights when :attr:`equal_weights`) and :attr:`party_noise` (no noise at the parties) have
    defaults. :attr:`description` and :attr:`who_sees_what` are what the privacy report says.
    """

    name: ClassVar[str]
    noise_multiplier: float | None = None
    clip: float | None = None
    #: Distributed DP: how the parties' noise survives dropouts (None: no parties' noise).
    noise_mode: str | None = None
    #: Whether the aggregate weighs every clipped update equally (the sensitivity is ``clip``).
    equal_weights: ClassVar[bool] = True
    #: How the privacy report names the mechanism.
    description: ClassVar[str] = ""
    #: What the privacy report says about who sees the noise-free aggregate.
    who_sees_what: ClassVar[str] = ""
    #: How the report converts each user's composed rounds (a kind of
    #: :data:`~fedprivacy.dp.accountants.ACCOUNTANTS`, its
    #: :meth:`~fedprivacy.dp.accountants.AccountantBackend.user_epsilons`): ``"pld"``, exact, for
    #: continuous Gaussian noise; ``"rdp"`` where only a Renyi bound is known.
    accountant: ClassVar[AccountantKind] = "rdp"

    @property
    def party_noise(self) -> PartyNoise | None:
        """What each party adds (None: nothing): the one noise hook of every algorithm.

        Discrete Gaussians on the encoding's grid where secure aggregation carries the update
        (FedAvg, the deployments, Protocol 1), continuous ones of
        :meth:`~fedprivacy.dp.party_noise.PartyNoise.std` where parties add theirs in the clear
        (the silos of an in-process ULDP-FL round).
        """
        return None

    @property
    def adds_noise_in_aggregation(self) -> bool:
        """Whether the parties add the noise (:attr:`party_noise`), so the server sees none."""
        return self.party_noise is not None

    def accounted_noise(self, outcome: AggregateOutcome) -> float | None:
        """The noise multiplier of the aggregate released in ``outcome`` (None: no DP)."""
        return self.noise_multiplier

    def clip_factors(self, norms: torch.Tensor) -> torch.Tensor:
        """The factor each update is scaled by, from its L2 norm (default 1: no clipping)."""
        import torch

        return torch.ones_like(norms)

    def prepare(
        self, updates: Updates, weights: dict[int, float]
    ) -> tuple[Updates, dict[int, float]]:
        """The updates scaled by :meth:`clip_factors` (float64, sent as float32) and weights."""
        import torch

        users = list(updates)
        if not users:
            return updates, weights
        rows = np.stack([np.asarray(updates[u], dtype=np.float64) for u in users])
        factors = self.clip_factors(torch.linalg.vector_norm(torch.from_numpy(rows), dim=1))
        scaled = (rows * factors.numpy()[:, None]).astype(np.float32)
        out = {u: scaled[i] for i, u in enumerate(users)}
        return out, dict.fromkeys(users, 1.0) if self.equal_weights else weights

    @abstractmethod
    def release(self, mean: NDArray[np.float64], aggregated: int) -> NDArray[np.float64]:
        """The mean update the server applies, from the aggregator's mean over ``aggregated``."""

    @classmethod
    @abstractmethod
    def from_options(cls, noise_multiplier: float | None, clip: float | None) -> Mechanism:
        """Build from the command line's options (a :class:`ParameterError` names a bad one)."""

    def with_noise_mode(self, mode: str) -> Mechanism:
        """The same mechanism with the parties' noise realised in ``mode`` (distributed DP)."""
        raise ParameterError("noise_mode", "applies to distributed DP (--dp distributed)")


class NoMechanism(Mechanism):
    """No clipping, no noise: the aggregate as the aggregator computed it.

    Examples
    --------
    >>> m = NoMechanism()
    >>> u, w = m.prepare({0: np.ones(2, np.float32)}, {0: 0.5})
    >>> (w, m.release(np.ones(2), 1).tolist())
    ({0: 0.5}, [1.0, 1.0])
    """

    name = "none"
    equal_weights = False

    @classmethod
    def from_options(cls, noise_multiplier: float | None, clip: float | None) -> Mechanism:
        """No parameters: a noise multiplier or a clip is an error naming it."""
        for name, value in (("noise_multiplier", noise_multiplier), ("clip", clip)):
            if value is not None:
                raise ParameterError(name, "needs a DP mechanism (--dp central or distributed)")
        return cls()

    def prepare(
        self, updates: Updates, weights: dict[int, float]
    ) -> tuple[Updates, dict[int, float]]:
        """The updates and weights unchanged."""
        return updates, weights

    def release(self, mean: NDArray[np.float64], aggregated: int) -> NDArray[np.float64]:
        """The mean unchanged."""
        return mean


@dataclass
class _ClippedGaussian(Mechanism):
    """L2 clipping to ``clip``, equal weights, Gaussian noise ``noise_multiplier * clip``."""

    noise_multiplier: float
    clip: float

    @classmethod
    def from_options(cls, noise_multiplier: float | None, clip: float | None) -> Mechanism:
        """The noise multiplier is required; the clip defaults to 1."""
        if noise_multiplier is None:
            raise ParameterError("noise_multiplier", f"is required with --dp {cls.name}")
        return cls(noise_multiplier=noise_multiplier, clip=1.0 if clip is None else clip)

    def __post_init__(self) -> None:
        require_positive("noise_multiplier", self.noise_multiplier)
        require_positive("clip", self.clip)

    def clip_factors(self, norms: torch.Tensor) -> torch.Tensor:
        """L2 clipping to :attr:`clip` (:func:`l2_clip_factors`)."""
        return l2_clip_factors(norms, self.clip)

    def prepare(
        self, updates: Updates, weights: dict[int, float]
    ) -> tuple[Updates, dict[int, float]]:
        """Every update clipped to L2 norm ``clip``; equal weights (sensitivity ``clip``)."""
        users = list(updates)
        if not users:
            return updates, weights
        # clipped in the dtype that is sent, so that every norm is <= clip exactly
        clipped, _ = clip_rows_l2(np.stack([updates[u] for u in users]), self.clip, np.float32)
        out = {u: clipped[i] for i, u in enumerate(users)}
        return out, dict.fromkeys(users, 1.0)


@dataclass
class CentralGaussian(_ClippedGaussian):
    """L2 clipping to ``clip`` and Gaussian noise ``noise_multiplier * clip`` on the sum.

    Examples
    --------
    >>> m = CentralGaussian(noise_multiplier=1.0, clip=0.5)
    >>> u, w = m.prepare({3: np.array([3.0, 4.0], np.float32)}, {3: 0.2})
    >>> ([round(float(x), 3) for x in u[3]], w)
    ([0.3, 0.4], {3: 1.0})
    """

    name: ClassVar[str] = "central"
    description: ClassVar[str] = "central Gaussian (added by the server)"
    accountant: ClassVar[AccountantKind] = "pld"
    who_sees_what: ClassVar[str] = (
        "Central DP: the server adds the noise, so it sees the noise-free sum; the epsilon "
        "holds against everyone who sees only the released models."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self._rng = np.random.default_rng(secrets.randbits(128))

    def release(self, mean: NDArray[np.float64], aggregated: int) -> NDArray[np.float64]:
        """The mean plus Gaussian noise of std ``noise_multiplier * clip / aggregated``."""
        if aggregated < 1:
            raise ParameterError("aggregated", "noise is added to an aggregate of >= 1 user")
        std = self.noise_multiplier * self.clip / aggregated
        noisy: NDArray[np.float64] = mean + self._rng.normal(0.0, std, size=mean.shape)
        return noisy


@dataclass
class DistributedDiscreteGaussian(_ClippedGaussian):
    """L2 clipping; each party adds discrete Gaussian noise inside secure aggregation.

    The aggregate the secure aggregator returns already holds the noise (at least
    ``noise_multiplier * clip`` in standard deviation on the sum), so :meth:`release` passes the
    mean on, and :meth:`accounted_noise` is the noise multiplier of the noise really in it.

    Examples
    --------
    >>> m = DistributedDiscreteGaussian(noise_multiplier=1.0, clip=0.5)
    >>> m.party_noise
    PartyNoise(noise_multiplier=1.0, clip=0.5, mode='over-provisioned')
    >>> m.with_noise_mode("exact").party_noise.mode
    'exact'
    >>> m.release(np.ones(2), 3).tolist()
    [1.0, 1.0]
    """

    name: ClassVar[str] = "distributed"
    description: ClassVar[str] = (
        "distributed discrete Gaussian (added by every party inside SecAgg)"
    )
    who_sees_what: ClassVar[str] = (
        "Distributed DP: every party adds discrete Gaussian noise on the encoding's grid before "
        "masking, so the epsilon also holds against the server, whose every unmaskable sum holds "
        "the noise of at least the protocol's threshold of parties. Each party's noise is "
        "over-provisioned for that threshold (or, in the exact noise mode, the survivors remove "
        "the excess the sum does not need, so it holds exactly the target whoever dropped); the "
        "accountant uses the noise really in the sum. The participation list is public to the "
        "server; epsilon protects the content of each user's update (a user without data would "
        "send a zero update). The epsilon against the server assumes it follows the protocol and "
        "colludes with no party: parties it controls (or Sybils it adds) know their own noise, "
        "and with c of the n aggregated parties colluding only n - c noises protect the rest (in "
        "the exact mode, about (n - c) / n of the target)."
    )

    #: How the parties' noise survives dropouts (:mod:`fedprivacy.dp.noise_modes`).
    noise_mode: str = DEFAULT_NOISE_MODE

    @property
    def party_noise(self) -> PartyNoise:
        """The parties' noise (for :class:`~fedprivacy.fl.secure_aggregation.SecureAggregator`)."""
        return PartyNoise(self.noise_multiplier, self.clip, self.noise_mode)

    def with_noise_mode(self, mode: str) -> Mechanism:
        """The same mechanism with the noise mode ``mode`` (a name of ``NOISE_MODES``)."""
        NOISE_MODES.lookup(mode)
        return replace(self, noise_mode=mode)

    def release(self, mean: NDArray[np.float64], aggregated: int) -> NDArray[np.float64]:
        """The mean unchanged: the parties' noise is already in it."""
        return mean

    def accounted_noise(self, outcome: AggregateOutcome) -> float | None:
        """The aggregate's own noise multiplier, from the parties really aggregated.

        Raises
        ------
        ParameterError
            If the aggregate carries no distributed noise (it did not come from secure
            aggregation with this mechanism's party noise).
        """
        if outcome.noise_multiplier is None:
            raise ParameterError("dp", "distributed DP needs the secure aggregator's party noise")
        return outcome.noise_multiplier


#: The mechanism class of every ``dp`` name.
MECHANISMS: Registry[type[Mechanism]] = Registry("dp", "must be one of {names}, got {name!r}")
for _mechanism in (NoMechanism, CentralGaussian, DistributedDiscreteGaussian):
    MECHANISMS.register(_mechanism.name, _mechanism)


def make_mechanism(
    name: str,
    *,
    noise_multiplier: float | None = None,
    clip: float | None = None,
    noise_mode: str = DEFAULT_NOISE_MODE,
) -> Mechanism:
    """The mechanism registered as ``name`` with its parameters.

    Examples
    --------
    >>> make_mechanism("central", noise_multiplier=1.1, clip=1.0).name
    'central'
    >>> make_mechanism("central", noise_multiplier=1.1, noise_mode="exact")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: noise_mode: applies to distributed DP (--dp distributed)
    """
    mechanism = MECHANISMS.lookup(name).from_options(noise_multiplier, clip)
    return mechanism if noise_mode == DEFAULT_NOISE_MODE else mechanism.with_noise_mode(noise_mode)
