"""The interface of a ULDP-FL method family: a round, its noise and its accounting.

A :class:`MethodFamily` is stateless: every hook takes the :class:`Runner` whose round it
computes (a :class:`~fedprivacy.uldp.methods.MethodRunner`), and reads the federation, the
hyper-parameters and the method's variant flags from it. The defaults here are
those of the families that add one Gaussian mechanism of noise multiplier ``sigma`` per round,
Poisson-sub-sampled at the runner's user sampling rate and accounted from the round loop's
ledger by :class:`~fedprivacy.uldp.accounting.GaussianRounds` (ULDP-NAIVE, ULDP-AVG, ULDP-SGD);
DEFAULT and ULDP-GROUP-k give their own :meth:`MethodFamily.accounting`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.uldp.accounting import GaussianRounds, UldpAccounting

if TYPE_CHECKING:
    from torch import nn

    from fedprivacy.fl.canary_users import CanaryUsers
    from fedprivacy.fl.local_training import VectorisedTrainer
    from fedprivacy.fl.mechanism import Mechanism
    from fedprivacy.secagg.private_weighting import SecureWeighting
    from fedprivacy.uldp.federation import Federation
    from fedprivacy.uldp.group_dp import SiloDpSgdState
    from fedprivacy.uldp.method_specs import Family, MethodSpec
    from fedprivacy.uldp.rounds import RoundHyper, RoundOutput

__all__ = ["MethodFamily", "Runner", "epoch_keys", "gaussian_noise", "silo_sum"]


class Runner(Protocol):
    """What a family's hooks read and set on the runner of its method (a ``MethodRunner``)."""

    fed: Federation
    hyper: RoundHyper
    spec: MethodSpec
    delta: float
    model: nn.Module | None
    trainer: VectorisedTrainer
    group_k: int | None
    group_fed: Federation | None
    group_state: SiloDpSgdState | None
    secure: SecureWeighting | None
    mechanism: Mechanism | None
    amplified: bool
    secure_log: list[dict[str, float]]
    rounds: int
    canaries: CanaryUsers | None

    @property
    def sampling_rate(self) -> float:
        """``q`` if the method sub-samples users, else 1."""

    @property
    def noise_hidden_from_server(self) -> bool:
        """Whether the parties add the noise (the server sees only noisy sums)."""

    def sum_silos(self, contributions: Sequence[torch.Tensor]) -> torch.Tensor:
        """The server's sum of the silos' contributions."""


class MethodFamily(ABC):
    """One algorithm of the ULDP-FL methods, as the hooks a :class:`MethodRunner` calls.

    Attributes
    ----------
    name : str
        The family's key in :data:`fedprivacy.uldp.families.FAMILIES` (``MethodSpec.family``).
    gaussian_per_round : bool
        Whether a user's privacy loss is one Gaussian mechanism of noise multiplier
        :meth:`noise_multiplier` per round it takes part in, so that a user's epsilon follows
        from its participation count (DEFAULT adds no noise; ULDP-GROUP-k accounts per record).
    per_user : bool
        Whether the silos send weighted sums of per-user updates, so that the private
        weighting protocol can aggregate the ``-w`` variants.
    """

    name: ClassVar[Family]
    gaussian_per_round: ClassVar[bool] = True
    per_user: ClassVar[bool] = False

    def default_mechanism(self, hyper: RoundHyper) -> Mechanism | None:
        """The clip and noise of a run that names no mechanism (None: the family's own).

        ``distributed`` at ``sigma`` and ``C``: the silos add the noise (the paper).
        """
        from fedprivacy.fl.mechanism import DistributedDiscreteGaussian

        return DistributedDiscreteGaussian(noise_multiplier=hyper.noise_multiplier, clip=hyper.clip)

    def setup(self, runner: Runner) -> None:
        """Prepare the runner's per-family state, once, when the runner is made (no-op)."""
        return None

    @abstractmethod
    def round(
        self,
        runner: Runner,
        global_flat: torch.Tensor,
        rng: np.random.Generator,
        noise_rng: np.random.Generator,
        *,
        noise: bool = True,
        sampled: NDArray[np.bool_] | None = None,
    ) -> RoundOutput:
        """Compute one round from ``global_flat``, without composing its privacy cost.

        Parameters
        ----------
        runner : MethodRunner
            The method's runner (federation, hyper-parameters, trainer, state).
        global_flat : torch.Tensor
            ``x_t``.
        rng, noise_rng : numpy.random.Generator
            Sampling and minibatch randomness; noise randomness.
        noise : bool
            ``False``: compute the pre-noise aggregate only (:meth:`presum`), drawing no noise
            and leaving the runner's state as it is.
        sampled : numpy.ndarray of bool, optional
            The round's user sample, chosen by the round loop's selector, for the families that
            sub-sample users (``-s``); drawn from ``rng`` as ``rng.random(U) < q`` when not
            given. The other families train every user and ignore it.
        """

    def presum(
        self, runner: Runner, global_flat: torch.Tensor, rng: np.random.Generator
    ) -> torch.Tensor:
        """The round's pre-noise aggregate (:meth:`MethodRunner.presum`)."""
        dummy = np.random.default_rng(0)
        return self.round(runner, global_flat, rng, dummy, noise=False).presum

    def noise_multiplier(self, runner: Runner) -> float:
        """:attr:`MethodRunner.effective_noise_multiplier`: ``sigma``, or the protocol's."""
        h = runner.hyper
        if runner.secure is not None:
            std = h.noise_multiplier * h.clip / math.sqrt(runner.fed.num_silos)
            return min(h.noise_multiplier, runner.secure.noise_multiplier(std, h.clip))
        return h.noise_multiplier

    def accounted_noise_multiplier(self, runner: Runner) -> float | None:
        """The noise multiplier :meth:`accounting` composes (``None``: no noise at all)."""
        return self.noise_multiplier(runner)

    def accounting(self, runner: Runner) -> UldpAccounting:
        """The run's accounting: one Gaussian mechanism of :meth:`noise_multiplier` a round."""
        return GaussianRounds(
            self.accounted_noise_multiplier(runner),
            runner.sampling_rate,
            runner.delta,
            amplified=runner.spec.sampled and runner.amplified,
            hidden_from_server=runner.noise_hidden_from_server,
        )


def epoch_keys(hyper: RoundHyper, fed: Federation, rng: np.random.Generator) -> NDArray[np.float64]:
    """Per-record keys that shuffle the local minibatches: ``rng.random((Q, pool_size))``."""
    return rng.random((hyper.local.epochs, fed.pool_size))


def silo_sum(contributions: Sequence[torch.Tensor]) -> torch.Tensor:
    """The sum over silos in float64, in silo order, cast back: the clear aggregate.

    What the registry's ``float`` aggregator computes from the same contributions
    (:meth:`~fedprivacy.uldp.methods.MethodRunner.sum_silos`), bit for bit.

    Examples
    --------
    >>> silo_sum([torch.tensor([1.0, 2.0]), torch.tensor([0.5, -2.0])]).tolist()
    [1.5, 0.0]
    """
    total = torch.zeros_like(contributions[0], dtype=torch.float64)
    for c in contributions:
        total += c.to(torch.float64)
    return total.to(contributions[0].dtype)


def gaussian_noise(rng: np.random.Generator, std: float, like: torch.Tensor) -> torch.Tensor:
    """``N(0, std^2)`` per coordinate of ``like``, drawn in float64, cast to its dtype.

    Examples
    --------
    >>> z = gaussian_noise(np.random.default_rng(0), 2.0, torch.zeros(3))
    >>> (tuple(z.shape), z.dtype)
    ((3,), torch.float32)
    """
    z = rng.normal(0.0, std, size=like.shape[0])
    return torch.from_numpy(z).to(device=like.device, dtype=like.dtype)
