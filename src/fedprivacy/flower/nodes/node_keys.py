"""A node's SecAgg keys across rounds: fresh every round, or one epoch for several.

The node's operator decides (:attr:`PartyPolicy.key_rounds <fedprivacy.policy.PartyPolicy>`);
the server never does. With ``key_rounds = 1`` (the default) the node draws fresh keys at every
``advertise``. Above 1 it keeps a :class:`~fedprivacy.secagg.key_epoch.KeyEpoch` in its state
between rounds (``state["epoch"]``, secret, never sent) and:

- at ``advertise`` publishes the epoch's keys, starting a new epoch when it has none, or one of
  another session, or one that masked its ``key_rounds`` rounds;
- answers a ``share`` request that opens a round (the server holds its keys, so it skipped
  ``advertise`` for this node) only with a live epoch of this session: anything else is refused
  (``OutOfOrderError``) and the server asks it to advertise in a later round;
- counts every masked input in the epoch (:func:`record_mask`), refusing a round index at or
  below the last one masked with these keys.

Examples
--------
>>> from fedprivacy.crypto.fixed_point import FixedPointCodec
>>> from fedprivacy.policy import PartyPolicy
>>> from fedprivacy.secagg.params import SecAggParameters
>>> params = SecAggParameters.create(bytes(16), 0, range(4), 2, FixedPointCodec.for_sum(1, 4, 32))
>>> state: dict[str, bytes] = {}
>>> advertise_epoch(PartyPolicy(), 1, params, state) is None  # fresh keys every round
True
>>> epoch = advertise_epoch(PartyPolicy(key_rounds=5), 1, params, state)
>>> epoch.max_rounds, "epoch" in state
(5, True)
"""

from __future__ import annotations

from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.errors import MalformedMessageError, OutOfOrderError
from fedprivacy.secagg.key_epoch import KeyEpoch
from fedprivacy.secagg.params import SecAggParameters

__all__ = ["advertise_epoch", "record_mask", "share_epoch"]

_KEY = "epoch"


def _stored(user: int, state: dict[str, bytes]) -> KeyEpoch | None:
    """The epoch in the state, if any and this user's."""
    data = state.get(_KEY)
    if data is None:
        return None
    try:
        epoch = KeyEpoch.from_bytes(data)
    except MalformedMessageError:
        return None
    return epoch if epoch.user == user else None


def advertise_epoch(
    policy: PartyPolicy, user: int, params: SecAggParameters, state: dict[str, bytes]
) -> KeyEpoch | None:
    """The epoch whose keys the node advertises (None: fresh keys for this round only)."""
    if policy.key_rounds <= 1:
        state.pop(_KEY, None)
        return None
    epoch = _stored(user, state)
    if (
        epoch is None
        or epoch.session_id != params.session_id
        or epoch.expired
        or epoch.max_rounds != policy.key_rounds
    ):
        epoch = KeyEpoch.start(params.session_id, user, policy.key_rounds)
    state[_KEY] = epoch.to_bytes()  # the client checks the round (KeyEpoch.keys_for)
    return epoch


def share_epoch(
    policy: PartyPolicy, user: int, params: SecAggParameters, state: dict[str, bytes]
) -> KeyEpoch:
    """The epoch a round opened at ``share`` masks with (the client checks the round).

    Raises
    ------
    OutOfOrderError
        If the node does not reuse keys, or holds no live epoch of this session.
    """
    epoch = _stored(user, state) if policy.key_rounds > 1 else None
    if epoch is None or epoch.session_id != params.session_id or epoch.expired:
        raise OutOfOrderError(
            f"user {user} holds no reusable keys for this session: it must advertise first"
        )
    return epoch


def record_mask(
    policy: PartyPolicy, user: int, params: SecAggParameters, state: dict[str, bytes]
) -> None:
    """Count a masked input in the node's epoch, if it reuses keys (before the reply leaves)."""
    if policy.key_rounds <= 1:
        return
    epoch = share_epoch(policy, user, params, state)
    epoch.check_round(params)  # WrongRoundError: this index or a later one was masked
    epoch.record(params.round_index)
    state[_KEY] = epoch.to_bytes()
