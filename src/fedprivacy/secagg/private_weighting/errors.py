"""Typed errors of the private weighting protocol (Protocol 1 of ULDP-FL).

A rejected message raises one of the :class:`MessageRejectedError` subclasses (or
:class:`fedprivacy.errors.AuthenticationError` for a seed ciphertext that fails its AES-GCM tag)
before any state changes, so it never influences an aggregate. A violated correctness condition
raises an error instead of producing a wrong aggregate.
"""

from __future__ import annotations

from fedprivacy.errors import CryptoError, FedPrivacyError, OverflowRiskError, ParameterError

__all__ = [
    "AggregateOutOfRangeError",
    "DuplicateMessageError",
    "MalformedMessageError",
    "MessageRejectedError",
    "MissingMessagesError",
    "NotInvertibleError",
    "OutOfOrderError",
    "PlaintextRangeError",
    "PrivateWeightingError",
    "RecordLimitError",
    "UnknownSenderError",
    "WrongRoundError",
    "WrongSessionError",
]


class PrivateWeightingError(FedPrivacyError):
    """Base class of the protocol's own errors (message rejections, missing messages)."""


class MessageRejectedError(PrivateWeightingError):
    """A message cannot be accepted now; the receiver's state is unchanged."""


class MalformedMessageError(MessageRejectedError):
    """A message does not parse, or a field has the wrong size or an impossible value."""


class WrongSessionError(MessageRejectedError):
    """A message belongs to another protocol session (a replay from elsewhere)."""


class WrongRoundError(MessageRejectedError):
    """A message belongs to another training round (a replay or a stale message)."""


class OutOfOrderError(MessageRejectedError):
    """A message arrived in a phase where its kind is not expected."""


class UnknownSenderError(MessageRejectedError):
    """A message comes from, or is addressed to, a party that may not send or receive it."""


class DuplicateMessageError(MessageRejectedError):
    """A party sent a second message for a step it has already answered (a replay)."""


class MissingMessagesError(PrivateWeightingError):
    """A step was closed before every silo answered (cross-silo FL has no dropouts)."""


class RecordLimitError(ParameterError):
    """A user has more records than ``N_max``, so ``C_LCM / N_u`` is not an integer."""


class PlaintextRangeError(OverflowRiskError):
    """The worst-case encoded aggregate does not fit in ``(-n/2, n/2)``; it could wrap."""


class NotInvertibleError(CryptoError):
    """A blind ``r_u`` or a blinded total ``B(N_u)`` is not a unit modulo ``n``."""


class AggregateOutOfRangeError(CryptoError):
    """A decrypted aggregate lies outside the range every correct aggregate lies in.

    It happens when a correctness condition was violated where no party could check it, e.g. a
    user with ``N_u > N_max`` records in total (each silo sees only its own ``n_{s,u}``): the
    weight ``C_LCM N_u^-1 mod n`` is then a huge residue, not the integer ``C_LCM / N_u``.
    """
