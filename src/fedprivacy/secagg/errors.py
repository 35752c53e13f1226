"""Typed errors of the secure aggregation protocol.

Every message that cannot be accepted raises one of these (or
:class:`fedprivacy.errors.AuthenticationError` for a ciphertext that fails its tag) before any
state changes, so a rejected message never influences the aggregate.
"""

from __future__ import annotations

from fedprivacy.errors import FedPrivacyError


class SecAggError(FedPrivacyError):
    """Base class of the protocol's errors."""


class MalformedMessageError(SecAggError):
    """A message does not parse, or a field has the wrong size or an impossible value."""


class WrongRoundError(SecAggError):
    """A message belongs to another session or round (a replay from elsewhere)."""


class UnknownSenderError(SecAggError):
    """A message comes from, or is addressed to, someone who is not a participant here."""


class DuplicateMessageError(SecAggError):
    """A participant sent a second message for a stage it has already answered (a replay)."""


class OutOfOrderError(SecAggError):
    """A message arrived for a stage that is not the current one."""


class ProtocolViolationError(SecAggError):
    """A peer asked for something the protocol forbids (for example, both shares of one user)."""


class RoundAbortedError(SecAggError):
    """Too few participants remain to continue the round; no aggregate is produced."""


class DisconnectedSetError(RoundAbortedError):
    """The aggregated set splits into several components of the neighbour graph.

    Pairwise masks cancel only within a component of ``G[S]``, so unmasking would reveal the sum
    of each component separately (down to a single user's input); the round is aborted instead.
    """


class ConsistencyError(ProtocolViolationError):
    """The survivor-list consistency check against an active server failed.

    Raised by a client asked to sign a second, different aggregated set in one round, or to
    unmask a set other than the one it signed, or without enough valid signatures of that set
    by distinct members (:mod:`fedprivacy.secagg.consistency`); by the server for a signature
    that does not verify; and when a client's state and its node's signing material disagree on
    whether the check runs. Nothing is revealed and the state is unchanged.
    """


class UnrecoverableSecretError(RoundAbortedError, ProtocolViolationError):
    """No ``t`` of a secret's shares give a secret that passes its check; the round is aborted.

    Both a :class:`RoundAbortedError` (no aggregate, nothing recorded: the callers that turn an
    aborted protocol into an aborted round handle it) and a :class:`ProtocolViolationError`
    (someone sent, or dealt, wrong shares).
    """


class UnsignedKeyError(ProtocolViolationError):
    """A key roster carries a key its owner did not sign, or a party outside the node's roster.

    Raised by a client with node authentication (:mod:`fedprivacy.secagg.signed_keys`) before it
    seals any share: the server substituted, replayed or invented keys or participants.
    """
