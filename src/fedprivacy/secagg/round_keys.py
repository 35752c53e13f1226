"""The keys a server holds in one round: advertised now, or reused from an earlier round.

A user is in U1 when its public keys ``(c_pk, s_pk)`` arrived in this round's advertise stage
or when the server registered them in an earlier round of the user's key epoch
(:mod:`fedprivacy.secagg.key_epoch`). A user that reuses its keys commits to this round's
self-mask seed with its shares instead of with its keys, and shares no masking key; when it is
left out, the aggregated neighbours reveal this round's pairwise mask keys with it.

Examples
--------
>>> from fedprivacy.crypto.keys import generate_keypair
>>> c, s = generate_keypair(), generate_keypair()
>>> keys = RoundKeys({7: (c.public_bytes, s.public_bytes, b"")})
>>> sorted(keys.present), keys.public(7) == (c.public_bytes, s.public_bytes)
([7], True)
>>> keys.commit(7, bytes(32)); sorted(keys.reusing)
[7]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fedprivacy.crypto.keys import load_public_key
from fedprivacy.secagg.errors import ProtocolViolationError
from fedprivacy.secagg.messages import AdvertiseKeys

__all__ = ["RegisteredKeys", "RoundKeys"]

RegisteredKeys = tuple[bytes, bytes, bytes]
"""A user's ``(c_pk, s_pk, signature)``: its public keys and its signature on them (empty: none,
:mod:`fedprivacy.secagg.signed_keys`), as the server relays them in every key roster."""


class RoundKeys:
    """Public keys, seed commitments and revealed pairwise mask keys of one round.

    Parameters
    ----------
    registered : mapping of int to RegisteredKeys
        The reused public keys ``(c_pk, s_pk, signature)`` of users that need not advertise.

    Raises
    ------
    InvalidKeyError
        If a registered key is not a valid X25519 public key.
    """

    def __init__(self, registered: Mapping[int, RegisteredKeys]) -> None:
        for c_pk, s_pk, _ in registered.values():
            load_public_key(c_pk)
            load_public_key(s_pk)
        self.advertised: dict[int, AdvertiseKeys] = {}
        self._registered = {int(u): keys for u, keys in registered.items()}
        self._commitments: dict[int, bytes] = {}
        self.pair_keys: dict[tuple[int, int], bytes] = {}  # (responder, neighbour) -> key

    @property
    def present(self) -> frozenset[int]:
        """U1: the users whose keys arrived this round or were registered."""
        return frozenset(self.advertised) | frozenset(self._registered)

    @property
    def reusing(self) -> frozenset[int]:
        """The users that committed with their shares: they reuse their keys this round."""
        return frozenset(self._commitments)

    def advertise(self, msg: AdvertiseKeys) -> None:
        """Take a user's advertised keys; they replace keys registered for it."""
        load_public_key(msg.encryption_key)
        load_public_key(msg.masking_key)
        self.advertised[msg.header.sender] = msg
        self._registered.pop(msg.header.sender, None)

    def public(self, user: int) -> tuple[bytes, bytes]:
        """``(c_pk, s_pk)`` of a user in :attr:`present`."""
        return self.signed(user)[:2]

    def signed(self, user: int) -> RegisteredKeys:
        """``(c_pk, s_pk, signature)`` of a user in :attr:`present`, as the rosters carry them."""
        if user in self.advertised:
            msg = self.advertised[user]
            return msg.encryption_key, msg.masking_key, msg.signature
        return self._registered[user]

    def commit(self, user: int, commitment: bytes | None) -> None:
        """Record the seed commitment a user sent with its shares (None: it advertised one).

        Raises
        ------
        ProtocolViolationError
            If a user that did not advertise this round sends no commitment.
        """
        if commitment is not None:
            self._commitments[user] = commitment
        elif user not in self.advertised:
            raise ProtocolViolationError(
                f"{user} reuses its keys but did not commit to this round's seed"
            )

    def commitment(self, user: int) -> bytes:
        """The commitment to ``user``'s self-mask seed of this round."""
        if user in self._commitments:
            return self._commitments[user]
        return self.advertised[user].seed_commitment

    def reused(self) -> dict[int, RegisteredKeys]:
        """The signed public keys of the users that reuse them, to register for the next round."""
        return {u: self.signed(u) for u in sorted(self._commitments)}

    def missing_pairs(
        self,
        left_out: Iterable[int],
        neighbours: Mapping[int, frozenset[int]],
        aggregated: frozenset[int],
    ) -> list[tuple[int, int]]:
        """The pairwise mask keys the unmasking needs and nobody revealed.

        Pairs ``(u, v)``: ``u`` aggregated, ``v`` a left-out neighbour that reuses its keys,
        and ``u`` did not reveal their key of this round. Nobody else can, so the sum is lost.
        """
        return [
            (u, v)
            for v in sorted(set(left_out) & self.reusing)
            for u in sorted(neighbours[v] & aggregated)
            if (u, v) not in self.pair_keys
        ]
