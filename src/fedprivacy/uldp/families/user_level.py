"""The round shared by ULDP-AVG and ULDP-SGD (Algorithms 3 and 4): per-user clipped updates.

In every silo every (sampled) user's update from ``x_t`` on its records there -- a locally
trained delta (:class:`~fedprivacy.uldp.families.avg.AvgFamily`) or a full-batch gradient
(:class:`~fedprivacy.uldp.families.sgd.SgdFamily`) -- is clipped to ``C`` and weighted; the silo
sends ``Delta_s = sum_u w_{s,u} clip_C(Delta^{s,u}) + N(0, sigma^2 C^2 / |S|)`` and
``x_{t+1} = x_t + sign * eta_g / (q |U| |S|) * sum_s Delta_s`` (``sign`` +1 for a delta, -1 for
a gradient). Randomness, in this order: the user sample (``rng.random(U) < q``), the family's
keys (:meth:`UserLevelFamily.draw_keys`), one ``noise_rng.normal`` vector per silo. With the
private weighting protocol the silos' clipped per-user vectors go to the protocol, whose silos
add their own noise, and its output replaces the noisy sum.

Clipping and noise are the run's mechanism (:class:`~fedprivacy.fl.mechanism.Mechanism`, the
same registered classes as FedAvg's; ``distributed`` by default): ``clip_C`` is its
:meth:`~fedprivacy.fl.mechanism.Mechanism.clip_factors`, each silo adds its share of its
:attr:`~fedprivacy.fl.mechanism.Mechanism.party_noise` and the sum over silos goes through its
:meth:`~fedprivacy.fl.mechanism.Mechanism.release` (``central``: the server adds the noise).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy.errors import ParameterError
from fedprivacy.uldp.clipped_sums import ClippedSum, clipped_sums, dense_clipped
from fedprivacy.uldp.families.base import MethodFamily, Runner, gaussian_noise, silo_sum
from fedprivacy.uldp.rounds import RoundOutput

if TYPE_CHECKING:
    from fedprivacy.fl.canary_users import CanaryUsers
    from fedprivacy.fl.local_spec import LocalTrainingSpec
    from fedprivacy.fl.local_training import VectorisedTrainer
    from fedprivacy.fl.losses import MaskedLoss
    from fedprivacy.fl.mechanism import Mechanism
    from fedprivacy.secagg.private_weighting import SecureWeighting
    from fedprivacy.uldp.federation import Federation
    from fedprivacy.uldp.rounds import RoundHyper

__all__ = ["Chunks", "SiloData", "UserLevelFamily", "global_step", "secure_aggregate"]

#: Per-user vectors chunk by chunk: ``(user positions in the silo, (n, P) vectors)``.
Chunks = Iterator[tuple[NDArray[np.int64], torch.Tensor]]
#: A silo's ``(x, y, user_offsets)``: its records grouped by user.
SiloData = tuple[torch.Tensor, torch.Tensor, NDArray[np.int64]]


class UserLevelFamily(MethodFamily):
    """A family whose silos send weighted sums of clipped per-user updates."""

    per_user = True
    #: ``+1``: the update is a model delta (ascent of the delta); ``-1``: a gradient (descent).
    sign: ClassVar[float]

    @abstractmethod
    def draw_keys(
        self, hyper: RoundHyper, fed: Federation, rng: np.random.Generator
    ) -> NDArray[np.float64] | None:
        """The round's minibatch keys ``(Q, pool_size)`` from ``rng``, or ``None`` (no draw)."""

    @abstractmethod
    def vectors(
        self,
        trainer: VectorisedTrainer,
        hyper: RoundHyper,
        global_flat: torch.Tensor,
        silo_data: SiloData,
        keys: NDArray[np.float64] | None,
        live: NDArray[np.int64],
    ) -> Chunks:
        """One silo's per-user updates of the users ``live``, chunk by chunk.

        ``silo_data`` is ``(x, y, user_offsets)`` of the silo, ``keys`` the round's keys of
        the silo's records (columns in the silo's row order).
        """

    @abstractmethod
    def loop_vectors(
        self,
        model: nn.Module,
        loss: MaskedLoss,
        global_flat: torch.Tensor,
        silo_data: SiloData,
        keys: NDArray[np.float64] | None,
        local: LocalTrainingSpec,
    ) -> torch.Tensor:
        """The same updates of every user of a silo with per-user loops (the oracle)."""

    def noise_multiplier(self, runner: Runner) -> float:
        """The mechanism's noise multiplier (0: none), or the private weighting protocol's."""
        if runner.secure is not None:
            return super().noise_multiplier(runner)
        nm = _mechanism(runner).noise_multiplier
        return 0.0 if nm is None else nm

    def accounted_noise_multiplier(self, runner: Runner) -> float | None:
        """``None`` for a mechanism without noise (``none``: infinite epsilons), else as ever."""
        if _mechanism(runner).noise_multiplier is None:
            return None
        return self.noise_multiplier(runner)

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
        """One round of per-user updates (see the module docstring)."""
        fed, h, spec = runner.fed, runner.hyper, runner.spec
        q = runner.sampling_rate
        canaries = _canaries(runner, sampled)
        if sampled is not None:
            sampled = sampled[: fed.num_users]  # the users' (the canaries have no records)
        if sampled is None and spec.sampled:
            sampled = rng.random(fed.num_users) < q
        keys = self.draw_keys(h, fed, rng)
        weights = fed.weights(spec.weighted)
        if sampled is not None:
            weights = weights * sampled[None, :]
        s = fed.num_silos
        mechanism = _mechanism(runner)
        party = mechanism.party_noise
        std = None if party is None else party.std(s)
        secure = runner.secure if noise else None
        parts, silo_deltas = self.silo_sums(
            runner, mechanism, global_flat, keys, weights, secure is not None
        )
        totals = [part.total for part in parts]
        if canaries.size:
            assert runner.canaries is not None
            totals = _with_canaries(totals, runner.canaries, canaries, mechanism, self.sign)
        presum = silo_sum(totals)
        # every silo adds its share of the noise (the protocol's silos draw theirs)
        silo_std = std if noise and secure is None else None
        contributions = [
            t if silo_std is None else t + gaussian_noise(noise_rng, silo_std, global_flat)
            for t in totals
        ]
        groups = sum(p.groups for p in parts)
        clipped = sum(p.clipped for p in parts)
        norm_total = sum(p.mean_norm * p.groups for p in parts if p.groups)
        if secure is not None and std is not None:
            kept = sampled if spec.sampled else None
            aggregate = secure_aggregate(runner, secure, silo_deltas, presum, std, kept)
            noisy = torch.from_numpy(aggregate).to(device=presum.device, dtype=presum.dtype)
        else:
            noisy = runner.sum_silos(contributions)
        if noise:
            noisy = _released(mechanism, noisy)
        step = global_step(h.global_lr, q, fed.num_users, s)
        flat = self.server_update(global_flat, noisy, step)
        mean_norm = norm_total / groups if groups else math.nan
        return RoundOutput(flat, presum, noisy, sampled, groups, clipped, mean_norm)

    def server_update(
        self, global_flat: torch.Tensor, total: torch.Tensor, step: float
    ) -> torch.Tensor:
        """``x_{t+1} = x_t + sign * step * total``: the server's update in every run.

        ``total`` is the released sum over silos and ``step`` the :func:`global_step` (the same
        in process, in a deployment and in its reference recomputation).
        """
        return global_flat + self.sign * step * total

    def silo_sums(
        self,
        runner: Runner,
        mechanism: Mechanism,
        global_flat: torch.Tensor,
        keys: NDArray[np.float64] | None,
        weights: NDArray[np.float64],
        dense: bool,
    ) -> tuple[tuple[ClippedSum, ...], list[NDArray[np.float64]]]:
        """Every silo's clipped, weighted sum, all silos' users trained in one vectorised pass.

        The groups are :attr:`Federation.group_offsets` (every user of every silo); the
        sums are split by silo afterwards (:func:`~fedprivacy.uldp.clipped_sums.clipped_sums`).
        ``dense``: also return every silo's clipped per-user vectors (for the private weighting
        protocol), else an empty list.
        """
        fed, h = runner.fed, runner.hyper
        w_group = weights[fed.group_silo, fed.group_user]
        live = np.flatnonzero(w_group != 0)
        all_keys = None if keys is None else keys[:, fed.record_index]
        data = (fed.x, fed.y, fed.group_offsets)
        chunks: Iterable[tuple[NDArray[np.int64], torch.Tensor]]
        chunks = self.vectors(runner.trainer, h, global_flat, data, all_keys, live)
        p, s = global_flat.numel(), fed.num_silos
        silo_deltas: list[NDArray[np.float64]] = []
        if dense:
            chunks = list(chunks)
            silo_deltas = dense_clipped(
                chunks,
                fed.group_user,
                fed.num_users,
                p,
                mechanism.clip_factors,
                segment_of=fed.group_silo,
                num_segments=s,
            )
        parts = clipped_sums(
            chunks,
            mechanism.clip_factors,
            w_group,
            num_params=p,
            segment_of=fed.group_silo,
            num_segments=s,
            device=global_flat.device,
        )
        return parts, silo_deltas


def _mechanism(runner: Runner) -> Mechanism:
    """The runner's mechanism (a ``MethodRunner`` gives every per-user family one)."""
    if runner.mechanism is None:
        raise ParameterError("dp", f"{runner.spec.name} has no mechanism")
    return runner.mechanism


def _canaries(runner: Runner, sampled: NDArray[np.bool_] | None) -> NDArray[np.intp]:
    """The round's canaries: those the sample over users and canaries holds (all without one)."""
    canaries = runner.canaries
    if canaries is None:
        return np.zeros(0, dtype=np.intp)
    if sampled is None:
        return np.arange(canaries.first, canaries.first + canaries.count, dtype=np.intp)
    return np.flatnonzero(sampled[canaries.first :]).astype(np.intp) + canaries.first


def _with_canaries(
    totals: list[torch.Tensor],
    canaries: CanaryUsers,
    chosen: NDArray[np.intp],
    mechanism: Mechanism,
    sign: float,
) -> list[torch.Tensor]:
    """The silos' sums with each chosen canary's direction, clipped as a user's, in one silo.

    Canary ``c`` is a user of weight 1 with records in silo ``c mod |S|`` only; its vector
    moves the model along its direction (``sign``: a gradient is descended).
    """
    out = list(totals)
    for user, vector in canaries.updates(chosen).items():
        v = torch.from_numpy(sign * vector.astype(np.float64))
        v = v * mechanism.clip_factors(torch.linalg.vector_norm(v).reshape(1))[0]
        silo = (user - canaries.first) % len(out)
        out[silo] = out[silo] + v.to(device=out[silo].device, dtype=out[silo].dtype)
    return out


def _released(mechanism: Mechanism, noisy: torch.Tensor) -> torch.Tensor:
    """The sum over silos after the mechanism's release (a sum is the mean of one aggregate)."""
    released = mechanism.release(noisy.detach().cpu().numpy().astype(np.float64), 1)
    return torch.from_numpy(released).to(device=noisy.device, dtype=noisy.dtype)


def global_step(global_lr: float, sampling_rate: float, num_users: int, num_silos: int) -> float:
    """The server's step on the round's summed silo updates: ``eta_g / (q |U| |S|)``.

    The same in-process, in a deployment (:mod:`fedprivacy.flower.uldp.cross_silo`) and in its
    reference recomputation.

    Examples
    --------
    >>> global_step(10.0, 0.5, 100, 4)
    0.05
    """
    return global_lr / (sampling_rate * num_users * num_silos)


def secure_aggregate(
    runner: Runner,
    secure: SecureWeighting,
    silo_deltas: list[NDArray[np.float64]],
    presum: torch.Tensor,
    std: float,
    kept: NDArray[np.bool_] | None,
) -> NDArray[np.float64]:
    """The round's noisy aggregate through the private weighting protocol.

    Appends the protocol's deviations from the plaintext aggregate (and from the engine's
    float32 ``presum`` plus the silos' reported noise) and its seconds to
    ``runner.secure_log``.
    """
    aggregate, seconds = secure.aggregate(runner.rounds + 1, silo_deltas, std, kept)
    reference = secure.plaintext_reference(silo_deltas, kept)
    # the engine's float32 pre-noise sum plus the noise the silos report they added
    engine = presum.detach().cpu().numpy().astype(np.float64)
    engine = engine + np.sum(secure.silo_noise(), axis=0)
    runner.secure_log.append(
        {
            "max_abs_deviation": float(np.max(np.abs(aggregate - reference))),
            "engine_float32_deviation": float(np.max(np.abs(aggregate - engine))),
            **seconds,
        }
    )
    return aggregate
