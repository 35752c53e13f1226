"""Typed errors raised by fedprivacy."""

from __future__ import annotations


class FedPrivacyError(Exception):
    """Base class of every error raised on purpose by fedprivacy."""


class ParameterError(FedPrivacyError, ValueError):
    """A parameter is outside its allowed range.

    Parameters
    ----------
    name : str
        The name of the offending parameter, as the caller spelled it.
    message : str
        What is wrong and what is allowed.
    """

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(f"{name}: {message}")


class CryptoError(FedPrivacyError):
    """A cryptographic operation failed or was given invalid material."""


class AuthenticationError(CryptoError):
    """A ciphertext or message failed authentication (wrong key, tampered bytes or context)."""


class InvalidKeyError(CryptoError):
    """A key has the wrong length or is not a valid key of its kind."""


class ShamirError(CryptoError):
    """Secret shares are too few, duplicated or inconsistent, so no secret can be recovered."""


class OverflowRiskError(ParameterError):
    """A fixed-point encoding could wrap around its modulus when the inputs are summed."""


class DataNotFoundError(FedPrivacyError):
    """A data directory or data file is missing; the message says where to get it."""


class ChecksumError(FedPrivacyError):
    """A data file exists but its content is not the published one (corrupt or different copy)."""


class WeakKeyWarning(UserWarning):
    """A key is accepted but below the recommended size (e.g. a 2048-bit Paillier modulus)."""


class NoiseWarning(UserWarning):
    """A run's DP noise is expected to swamp the updates it protects (it will learn little)."""


class PolicyViolationError(ParameterError):
    """A request asks a party for less than its own operator's policy allows.

    Raised by a node or silo (:mod:`fedprivacy.policy`) before it computes anything; ``name``
    is the policy parameter the request would weaken (``noise_multiplier``, ``clip``,
    ``threshold``, ``key_bits``, ``batch_size``, ``secure``, ``round``, ``epsilon_budget``).
    """
