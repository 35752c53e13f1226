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
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy.uldp.families.base import MethodFamily, gaussian_noise
from fedprivacy.uldp.per_user_training import PerUserTrainer
from fedprivacy.uldp.rounds import RoundOutput

if TYPE_CHECKING:
    from fedprivacy.fl.local_training import LocalTrainingSpec
    from fedprivacy.fl.losses import MaskedLoss
    from fedprivacy.uldp.federation import Federation
    from fedprivacy.uldp.methods import MethodRunner
    from fedprivacy.uldp.private_weighting import SecureWeighting
    from fedprivacy.uldp.rounds import RoundHyper

__all__ = ["Chunks", "SiloData", "UserLevelFamily", "dense_clipped", "secure_aggregate"]

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
        trainer: PerUserTrainer,
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

    def round(
        self,
        runner: MethodRunner,
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
        if sampled is None and spec.sampled:
            sampled = rng.random(fed.num_users) < q
        if sampled is not None and noise:
            runner.times_sampled += sampled
        keys = self.draw_keys(h, fed, rng)
        weights = fed.weights(spec.weighted)
        if sampled is not None:
            weights = weights * sampled[None, :]
        s = fed.num_silos
        std = h.sigma * h.clip / math.sqrt(s)
        presum = torch.zeros_like(global_flat)
        noisy = torch.zeros_like(global_flat)
        groups = clipped = 0
        norm_total = 0.0
        secure = runner.secure if noise else None
        silo_deltas: list[NDArray[np.float64]] = []
        for silo in range(s):
            sl = fed.silo_slice(silo)
            off, users = fed.user_offsets[silo], fed.silo_users[silo]
            w = weights[silo, users]
            live = np.flatnonzero(w != 0)
            silo_keys = None if keys is None else keys[:, fed.record_index[sl]]
            data = (fed.x[sl], fed.y[sl], off)
            chunks = self.vectors(runner.trainer, h, global_flat, data, silo_keys, live)
            if secure is not None:
                chunk_list = list(chunks)
                silo_deltas.append(
                    dense_clipped(chunk_list, users, fed.num_users, global_flat.numel(), h.clip)
                )
                chunks = iter(chunk_list)
            part = PerUserTrainer.clipped_sum(
                chunks, h.clip, w, num_params=global_flat.numel(), device=global_flat.device
            )
            presum += part.total
            noisy += part.total
            if noise and secure is None:  # the protocol's silos draw their own noise
                noisy += gaussian_noise(noise_rng, std, global_flat)
            groups += part.groups
            clipped += part.clipped
            if part.groups:
                norm_total += part.mean_norm * part.groups
        if secure is not None:
            kept = sampled if spec.sampled else None
            aggregate = secure_aggregate(runner, secure, silo_deltas, presum, std, kept)
            noisy = torch.from_numpy(aggregate).to(device=noisy.device, dtype=noisy.dtype)
        step = h.global_lr / (q * fed.num_users * s)
        flat = global_flat + self.sign * step * noisy
        mean_norm = norm_total / groups if groups else math.nan
        return RoundOutput(flat, presum, noisy, sampled, groups, clipped, mean_norm)


def secure_aggregate(
    runner: MethodRunner,
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


def dense_clipped(
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
