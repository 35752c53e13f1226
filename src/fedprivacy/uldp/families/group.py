"""ULDP-GROUP-k (Algorithm 2 of Kato et al.): record-level DP-SGD in every silo, group privacy.

At most ``k`` records per user are kept (:func:`~fedprivacy.uldp.group_dp.group_flags`); every
silo runs DP-SGD on them (:func:`~fedprivacy.uldp.group_dp.dp_sgd_silo`, noise and Poisson
sampling from ``rng``), each record's gradient scaled by the run's mechanism's clip factors and
the silo's noise its party noise (``distributed`` at ``sigma`` and ``C`` unless the run names
another), and ``x_{t+1} = x_t + eta_g * mean_s Delta_s``. The epsilon is that of
the silos' DP-SGD converted to user level (:func:`~fedprivacy.uldp.group_dp.group_epsilon`).
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.uldp.accounting import UldpAccounting
from fedprivacy.uldp.families.base import MethodFamily, Runner
from fedprivacy.uldp.group_dp import (
    SiloDpSgdState,
    dp_sgd_silo,
    group_epsilon,
    group_flags,
    group_size,
    new_state,
)
from fedprivacy.uldp.rounds import RoundOutput

__all__ = ["GroupFamily", "GroupRounds"]


class GroupFamily(MethodFamily):
    """ULDP-GROUP-k: state ``runner.group_k``, ``group_fed``, ``group_state``."""

    name = "group"
    gaussian_per_round = False

    def setup(self, runner: Runner) -> None:
        """Choose ``k``, keep at most ``k`` records per user, one DP-SGD accountant per silo."""
        assert runner.spec.group is not None
        runner.group_k = group_size(runner.fed, runner.spec.group)
        m = 2 if runner.fed.task.task == "survival" else 1
        runner.group_fed = runner.fed.keep_rows(group_flags(runner.fed, runner.group_k, m))
        runner.group_state = new_state(runner.fed.num_silos)

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
        """DP-SGD in every silo; all randomness from ``rng`` (``noise_rng`` is not used)."""
        fed, h, state = runner.group_fed, runner.hyper, runner.group_state
        assert fed is not None and state is not None and runner.model is not None
        assert runner.mechanism is not None  # distributed unless the run names another
        deltas = []
        for silo in range(fed.num_silos):
            sl = fed.silo_slice(silo)
            delta = dp_sgd_silo(
                runner.model,
                fed.task.loss,
                global_flat,
                fed.x[sl],
                fed.y[sl],
                epochs=h.local.epochs,
                batch_size=h.local.batch_size,
                lr=h.local.lr,
                mechanism=runner.mechanism,
                history=state.histories[silo],
                rng=rng,
            )
            deltas.append(delta)
        total = runner.sum_silos(deltas)
        norms = [float(torch.linalg.vector_norm(delta)) for delta in deltas]
        flat = global_flat + h.global_lr * total / fed.num_silos
        return RoundOutput(
            flat, total, total.clone(), None, fed.num_silos, 0, float(np.mean(norms))
        )

    def presum(
        self, runner: Runner, global_flat: torch.Tensor, rng: np.random.Generator
    ) -> torch.Tensor:
        """Refused: see :func:`fedprivacy.uldp.group_dp.clipped_per_sample_sum`."""
        raise ParameterError("method", "ULDP-GROUP-k adds its noise inside DP-SGD")

    def accounting(self, runner: Runner) -> UldpAccounting:
        """Group privacy of the silos' DP-SGD histories (which record every step)."""
        assert runner.group_state is not None and runner.group_k is not None
        return GroupRounds(runner.group_state, runner.group_k, runner.delta)


class GroupRounds(UldpAccounting):
    """ULDP-GROUP-k's accounting: the silos' DP-SGD histories at group size ``k``.

    Every user takes part in every round (no user sampling), so the epsilon against the server
    is the same as against anyone; the histories record every DP-SGD step of the rounds run.
    """

    noise_multiplier = None

    def __init__(self, state: SiloDpSgdState, k: int, delta: float) -> None:
        self.silos = state
        self.k = k
        self.delta = delta

    def epsilons(self, released: int, frequency: NDArray[np.int64]) -> tuple[float, float]:
        """Group-privacy epsilon of the histories, twice."""
        epsilon = group_epsilon(self.silos.histories, self.k, self.delta)
        return epsilon, epsilon

    def scaled(self, released: int, rounds: int) -> tuple[float, float]:
        """Every silo's history repeated ``rounds / released`` times (RDP adds up)."""
        h = self.silos.histories
        epsilon = group_epsilon(h, self.k, self.delta, repeat=rounds / released)
        return epsilon, epsilon
