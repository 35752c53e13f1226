"""Keys reused across the rounds of a session: a node's key epoch.

Bonawitz et al.'s protocol draws two fresh X25519 key pairs a round and advertises them in a
stage of its own. Reusing them across rounds (as LERNA and Flamingo do) saves that stage for
every user whose keys the server already holds, and the key generation and agreement work. What
must not be reused is what the unmasking reveals. With fresh keys the server reconstructs the
masking key ``s_sk_v`` of a user ``v`` left out of the sum; with a reused key that would unmask
``v``'s input in every round of the epoch in which ``v``'s self mask was revealed. So a client
with a :class:`KeyEpoch`:

- draws a fresh self-mask seed ``b_u`` every round and shares it (its commitment travels with
  the shares, :attr:`ShareKeys.seed_commitment <fedprivacy.secagg.messages.ShareKeys>`);
- never shares its masking key, so no number of colluding holders can rebuild it;
- masks with ``PRG(k_uv^t)``, where ``k_uv^t`` is derived from the agreed key and the session
  and round (:func:`pairwise_mask_key <fedprivacy.secagg.derivation.pairwise_mask_key>`, a
  PRF of the round);
- at unmasking, when it is aggregated, reveals ``k_uv^t`` itself for each neighbour ``v`` left
  out (``ShareKind.PAIR_MASK_KEY``), a key of this round only, and still never both the share of
  ``b_v`` and a key of ``v`` for one neighbour;
- masks at most once a round and in increasing rounds (a server that replays a round index
  could otherwise difference two inputs masked with the same pairwise masks), and at most
  ``max_rounds`` times, after which the node draws a new epoch.

What the server can compute from everything it received is still only the sum over the
aggregated set: a revealed ``k_uv^t`` removes one mask of one round, exactly what rebuilding
``s_sk_v`` removed from that round. The price: when an aggregated user ``u`` goes silent
between its masked input and the unmasking and has a neighbour left out, nobody left can reveal
``k_uv^t``, and the round aborts (:class:`UnrecoverableSecretError
<fedprivacy.secagg.errors.UnrecoverableSecretError>`) where fresh keys would have finished it.
Since no key is ever reconstructed, no user has to be retired for it.

Examples
--------
>>> from fedprivacy.crypto.fixed_point import FixedPointCodec
>>> from fedprivacy.secagg.params import SecAggParameters
>>> epoch = KeyEpoch.start(bytes(16), user=2, max_rounds=10)
>>> codec = FixedPointCodec.for_sum(1.0, 5, 32)
>>> epoch.check_round(SecAggParameters.create(bytes(16), 3, range(5), 3, codec))
>>> epoch.record(3)
>>> epoch.check_round(SecAggParameters.create(bytes(16), 3, range(5), 3, codec))
Traceback (most recent call last):
...
fedprivacy.secagg.errors.WrongRoundError: user 2 already masked in round 3 with these keys; \
a round index is used once and in increasing order
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from fedprivacy.crypto.keys import (
    KeyPair,
    generate_keypair,
    keypair_from_private_bytes,
    private_key_bytes,
)
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.errors import MalformedMessageError, WrongRoundError
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.wire import MessageFormat

__all__ = ["KeyEpoch"]

# magic | version | session id (16) | user (4) | c_sk (32) | s_sk (32) | max rounds (4)
# | rounds (4) | last round (8, signed)
_FORMAT = MessageFormat(
    b"FPKE",
    1,
    struct.Struct(">4sB16sI32s32sIIq"),
    "fedprivacy key epoch",
    MalformedMessageError,
)


@dataclass
class KeyEpoch:
    """One node's key pairs for several rounds of one session, and what it did with them.

    Secret: it holds the private keys. It stays on the node.

    Attributes
    ----------
    session_id : bytes
        The session the keys serve; a round of another session is refused.
    user : int
        The node's id in the rounds.
    encryption_key, masking_key : bytes
        The raw X25519 private keys ``c_sk`` and ``s_sk``.
    max_rounds : int
        The node's own limit on the rounds masked with these keys.
    rounds : int
        Masked inputs sent with these keys so far.
    last_round : int
        The last round index masked with these keys (-1 before the first).
    """

    session_id: bytes
    user: int
    encryption_key: bytes
    masking_key: bytes
    max_rounds: int
    rounds: int = 0
    last_round: int = -1
    _pairs: tuple[KeyPair, KeyPair] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def start(cls, session_id: bytes, user: int, max_rounds: int) -> KeyEpoch:
        """A new epoch with two key pairs fresh from the OS.

        Parameters
        ----------
        session_id : bytes
            The session.
        user : int
            The node's id.
        max_rounds : int
            At least 1: the rounds these keys may mask.

        Returns
        -------
        KeyEpoch
            Not used yet.

        """
        if max_rounds < 1:
            raise ParameterError("max_rounds", f"must be at least 1, got {max_rounds}")
        enc, mask = generate_keypair(), generate_keypair()
        keys = private_key_bytes(enc.private), private_key_bytes(mask.private)
        return cls(bytes(session_id), int(user), *keys, int(max_rounds))

    @property
    def expired(self) -> bool:
        """Whether these keys masked ``max_rounds`` rounds: the node then starts a new epoch."""
        return self.rounds >= self.max_rounds

    def keypairs(self) -> tuple[KeyPair, KeyPair]:
        """The encryption and masking key pairs."""
        if self._pairs is None:
            self._pairs = (
                keypair_from_private_bytes(self.encryption_key),
                keypair_from_private_bytes(self.masking_key),
            )
        return self._pairs

    def keys_for(self, params: SecAggParameters, user: int) -> tuple[KeyPair, KeyPair]:
        """The key pairs for ``user`` in the round of ``params``, after :meth:`check_round`.

        Raises
        ------
        ParameterError
            If the epoch is another user's.
        """
        if user != self.user:
            raise ParameterError("epoch", f"the keys of user {self.user}, not of {user}")
        self.check_round(params)
        return self.keypairs()

    def check_round(self, params: SecAggParameters) -> None:
        """Refuse a round these keys must not mask.

        Raises
        ------
        WrongRoundError
            If the round belongs to another session, or its index is not above every round
            masked with these keys, or the keys are :attr:`expired`.
        """
        if params.session_id != self.session_id:
            raise WrongRoundError(f"the keys of user {self.user} serve another session")
        if params.round_index <= self.last_round:
            raise WrongRoundError(
                f"user {self.user} already masked in round {self.last_round} with these keys; "
                "a round index is used once and in increasing order"
            )
        if self.expired:
            raise WrongRoundError(
                f"the keys of user {self.user} masked their {self.max_rounds} rounds; "
                "a new epoch needs fresh keys"
            )

    def to_bytes(self) -> bytes:
        """The epoch as bytes, for the node's state between rounds (secret: private keys).

        Examples
        --------
        >>> epoch = KeyEpoch.start(bytes(16), 4, max_rounds=3)
        >>> KeyEpoch.from_bytes(epoch.to_bytes()) == epoch, len(epoch.to_bytes())
        (True, 105)
        """
        keys = (self.encryption_key, self.masking_key)
        counts = (self.max_rounds, self.rounds, self.last_round)
        return _FORMAT.pack_header(self.session_id, self.user, *keys, *counts)

    @classmethod
    def from_bytes(cls, data: bytes) -> KeyEpoch:
        """Inverse of :meth:`to_bytes`; :class:`MalformedMessageError` on anything else."""
        fields, reader = _FORMAT.unpack_header(data)
        reader.finish()
        session_id, user, enc, mask, max_rounds, rounds, last_round = fields
        if max_rounds < 1 or rounds > max_rounds or last_round < -1:
            raise MalformedMessageError("an impossible key epoch")
        return cls(session_id, user, enc, mask, max_rounds, rounds, last_round)

    def record(self, round_index: int) -> None:
        """Count a masked input sent in ``round_index``."""
        self.rounds += 1
        self.last_round = int(round_index)
