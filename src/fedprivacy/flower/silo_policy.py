"""A silo's policy for cross-silo ULDP-FL (stub: being written)."""

from __future__ import annotations

from fedprivacy.policy import PartyPolicy
from fedprivacy.uldp.config import UldpConfig

__all__ = ["silo_policy"]


def silo_policy(config: UldpConfig) -> PartyPolicy:
    """The policy of a silo whose operator agrees with ``config``."""
    cfg = config.resolved()
    return PartyPolicy(
        noise_multiplier=cfg.sigma,
        clip=cfg.clip,
        min_key_bits=min(cfg.secure_key_bits, 3072),
        allow_test_keys=cfg.insecure_test_keys,
    )
