"""A user's node and its policy in a FedAvg deployment: what it accepts of a training request.

:func:`training_policy` is the policy of an operator who agrees with a
:class:`~fedprivacy.experiments.training_config.TrainConfig` (what ``fedprivacy flower deploy``
writes for each local node). :func:`check_training` checks the configuration a request carries
against a node's policy before the node trains: a secure run, the distributed noise floor and
the clip of a node with one, and the batch size ``T``.

Examples
--------
>>> from fedprivacy.experiments.training_config import TrainConfig
>>> config = TrainConfig(users=6, secagg=True, dp="distributed", noise_multiplier=1.0, clip=0.5)
>>> policy = training_policy(config)
>>> (policy.noise_multiplier, policy.clip, policy.allow_plaintext)
(1.0, 0.5, False)
>>> check_training(policy, config)
>>> try:
...     check_training(policy, config.with_overrides(noise_multiplier=1e-6))
... except PolicyViolationError as exc:
...     print(exc.name)
noise_multiplier
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy.errors import PolicyViolationError
from fedprivacy.policy import PartyPolicy

if TYPE_CHECKING:
    from fedprivacy.experiments.training_config import TrainConfig

__all__ = ["PolicyViolationError", "check_training", "training_policy"]


def batch_size_of(config: TrainConfig) -> int:
    """``T`` of the configuration's batches: 1 unless its aggregated sets are whole batches."""
    if config.scheme != "multiround" or config.batch_policy == "partial":
        return 1
    return int(config.target_privacy or 1)


def _distributed(config: TrainConfig) -> bool:
    return config.dp == "distributed"


def training_policy(config: TrainConfig) -> PartyPolicy:
    """The policy of a node whose operator agrees with ``config``."""
    dp = config.dp != "none"
    return PartyPolicy(
        noise_multiplier=config.noise_multiplier if _distributed(config) else None,
        clip=(1.0 if config.clip is None else config.clip) if dp else None,
        batch_size=batch_size_of(config),
        allow_plaintext=not config.secagg,
    )


def check_training(policy: PartyPolicy, config: TrainConfig) -> None:
    """Refuse a training configuration that asks less than ``policy`` (before any training).

    Raises
    ------
    PolicyViolationError
        Naming ``secure``, ``noise_multiplier``, ``clip`` or ``batch_size``.
    """
    policy.check_secure(config.secagg)
    if policy.noise_multiplier is not None:
        if not _distributed(config):
            raise PolicyViolationError(
                "noise_multiplier",
                f"dp = {config.dp!r} requested; this party adds its own noise (distributed)",
            )
        policy.check_noise(config.noise_multiplier)
    if policy.clip is not None:
        policy.check_clip(1.0 if config.clip is None or config.dp == "none" else config.clip)
    policy.check_batch_size(batch_size_of(config))
