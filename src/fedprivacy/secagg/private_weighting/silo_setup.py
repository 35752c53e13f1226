"""A silo's setup of Protocol 1, steps 1(a)-(e): its keys, the shared seed, its blinded histogram.

:class:`SiloSetup` is the setup phase of :class:`~fedprivacy.secagg.private_weighting.silo.
PrivateWeightingSilo` (which adds the rounds, step 2): it accepts only the server's next expected
message (:data:`SiloStage`), checks the Paillier modulus against the session's range condition,
agrees a key with every other silo (signed X25519 keys with node authentication), receives the
shared seed ``R`` (silo 0 draws it and seals it for every other silo under their pairwise keys)
and sends ``B'(n_{s,u}) = r_u n_{s,u} + masks``, keeping only the scalars
``k_u = n_{s,u} r_u C_LCM`` for the rounds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from enum import IntEnum

from gmpy2 import mpz

from fedprivacy.crypto.aead import open_sealed, seal
from fedprivacy.crypto.keys import KeyPair, agree
from fedprivacy.crypto.paillier_public import PaillierPublicKey
from fedprivacy.crypto.signing import Roster
from fedprivacy.errors import InvalidKeyError, ParameterError
from fedprivacy.secagg.consistency import ConsistencyCheck
from fedprivacy.secagg.private_weighting.authentication import sign_dh_key, verify_dh_roster
from fedprivacy.secagg.private_weighting.errors import (
    MalformedMessageError,
    OutOfOrderError,
    UnknownSenderError,
    WrongRoundError,
)
from fedprivacy.secagg.private_weighting.messages import (
    SERVER,
    BlindedHistogram,
    DhPublicKey,
    DhRoster,
    Header,
    Message,
    MessageKind,
    PaillierKeyAnnouncement,
    SeedDelivery,
    SeedShares,
)
from fedprivacy.secagg.private_weighting.party import Party
from fedprivacy.secagg.private_weighting.randomness import (
    UniformSampler,
    blind_key,
    check_unit,
    histogram_mask_key,
    pairwise_mask_totals,
    seed_associated_data,
    seed_encryption_key,
)

__all__ = ["SEED_BYTES", "SiloSetup", "SiloStage"]

SEED_BYTES = 32
"""Length of the shared seed ``R`` drawn by silo 0."""


class SiloStage(IntEnum):
    """The server message a silo waits for next."""

    NEW = 0  # waits for the Paillier key (1(a))
    KEY_SENT = 1  # waits for the roster (1(b))
    ROSTER = 2  # waits for the seed delivery (1(c))
    SEEDED = 3  # knows R; builds its blinded histogram (1(d)-(e))
    READY = 4  # waits for the encrypted weights of a round (2(a))


_EXPECTED = {
    SiloStage.NEW: MessageKind.PAILLIER_KEY,
    SiloStage.KEY_SENT: MessageKind.DH_ROSTER,
    SiloStage.ROSTER: MessageKind.SEED_DELIVERY,
    SiloStage.READY: MessageKind.ENCRYPTED_WEIGHTS,
}


class SiloSetup(Party):
    """A silo's helpers and its setup steps; the attributes are set by the silo's constructor."""

    silo: int
    stage: SiloStage
    last_round: int | None
    received: deque[Message]
    _records: list[int]
    _seed_source: Callable[[int], bytes]
    _keypair: KeyPair
    _public: PaillierPublicKey | None
    _agreements: dict[int, bytes]
    _seed: bytes | None
    _scalars: list[mpz]

    # ------------------------------------------------------------------ helpers
    @property
    def public_key(self) -> PaillierPublicKey:
        """PaillierPublicKey: The server's key (after step 1(a))."""
        if self._public is None:
            raise OutOfOrderError("the silo has not received the Paillier key")
        return self._public

    def _to_server(self, kind: MessageKind, round_index: int = 0) -> Header:
        return self._header(kind, SERVER, round_index)

    def _accept(self, message: Message | bytes) -> Message:
        msg = self._decode(message)
        h = msg.header
        if h.sender != SERVER:
            raise UnknownSenderError(f"silos only accept messages from the server, not {h.sender}")
        if h.recipient != self.silo:
            raise UnknownSenderError(f"message addressed to {h.recipient}, not to silo {self.silo}")
        expected = _EXPECTED.get(self.stage)
        if h.kind is not expected:
            raise OutOfOrderError(
                f"{h.kind.name} arrived while silo {self.silo} is in stage {self.stage.name}"
            )
        if h.kind is MessageKind.ENCRYPTED_WEIGHTS and (
            self.last_round is not None and h.round_index <= self.last_round
        ):
            raise WrongRoundError(
                f"weights for round {h.round_index}; silo {self.silo} already answered round "
                f"{self.last_round} (rounds must increase)"
            )
        return msg

    # ------------------------------------------------------------------ 1(a)
    def on_paillier_key(
        self, message: PaillierKeyAnnouncement | bytes, check: ConsistencyCheck | None = None
    ) -> DhPublicKey:
        """Step 1(a): store the Paillier key, check the range condition, send the X25519 key.

        Parameters
        ----------
        message : PaillierKeyAnnouncement or bytes
            The server's announcement.
        check : ConsistencyCheck, optional
            The silo's node key and roster (node authentication): the key is then signed
            (:mod:`~fedprivacy.secagg.private_weighting.authentication`).

        Returns
        -------
        DhPublicKey
            This silo's X25519 public key (signed with ``check``).

        Raises
        ------
        MessageRejectedError
            If the message is not acceptable now.
        MalformedMessageError
            If the modulus is not a valid Paillier modulus.
        PlaintextRangeError
            If the modulus cannot hold the worst-case aggregate.
        """
        msg = self._accept(message)
        assert isinstance(msg, PaillierKeyAnnouncement)
        try:
            public = PaillierPublicKey(msg.modulus)
        except InvalidKeyError as exc:
            raise MalformedMessageError(f"invalid Paillier modulus: {exc}") from exc
        self.params.check_modulus(public.n)
        self._public = public
        self.received.append(msg)
        self.stage = SiloStage.KEY_SENT
        key = self._keypair.public_bytes
        signature = b""
        if check is not None:
            signature = sign_dh_key(check, self.params.session_id, self.silo, key)
        return DhPublicKey(self._to_server(MessageKind.DH_PUBLIC_KEY), key, signature)

    # ------------------------------------------------------------------ 1(b), 1(c)
    def on_roster(
        self, message: DhRoster | bytes, roster: Roster | None = None
    ) -> SeedShares | None:
        """Steps 1(b)-(c): agree pairwise keys; silo 0 also encrypts the seed for every silo.

        Parameters
        ----------
        message : DhRoster or bytes
            Every silo's X25519 public key, relayed by the server.
        roster : Roster, optional
            The federation's node keys, from this silo's own machine (node authentication):
            every other silo's key must then carry its owner's signature.

        Returns
        -------
        SeedShares or None
            Silo 0: ``Enc(R)`` under each pairwise key, for the server to relay; others: None.

        Raises
        ------
        MessageRejectedError
            If the message is not acceptable now or the roster is inconsistent.
        InvalidKeyError
            If a peer key is a low-order point.
        """
        msg = self._accept(message)
        assert isinstance(msg, DhRoster)
        keys = {s: pk for s, pk, _ in msg.keys}
        if len(keys) != len(msg.keys) or sorted(keys) != list(range(self.params.n_silos)):
            raise MalformedMessageError("the roster must list every silo exactly once")
        if keys[self.silo] != self._keypair.public_bytes:
            raise MalformedMessageError("the roster does not carry this silo's own public key")
        if roster is not None:
            verify_dh_roster(roster, self.params.session_id, self.silo, msg.keys)
        agreements = {
            peer: agree(self._keypair.private, pk) for peer, pk in keys.items() if peer != self.silo
        }
        self._agreements = agreements
        self.received.append(msg)
        self.stage = SiloStage.ROSTER
        if self.silo != 0:
            return None
        seed = self._seed_source(SEED_BYTES)
        if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
            raise ParameterError("seed_source", f"must return {SEED_BYTES} bytes")
        self._seed = seed
        session = self.params.session_id
        sealed = tuple(
            (
                peer,
                seal(
                    seed_encryption_key(agreement, session, peer),
                    seed,
                    seed_associated_data(session, 0, peer),
                ),
            )
            for peer, agreement in sorted(agreements.items())
        )
        return SeedShares(self._to_server(MessageKind.SEED_SHARES), sealed)

    def on_seed_delivery(self, message: SeedDelivery | bytes) -> None:
        """Step 1(c): decrypt the shared seed ``R`` sent by silo 0 (silo 0 already has it).

        Parameters
        ----------
        message : SeedDelivery or bytes
            ``Enc(R)`` from silo 0 (empty for silo 0).

        Raises
        ------
        MessageRejectedError
            If the message is not acceptable now or has the wrong number of ciphertexts.
        AuthenticationError
            If the AES-GCM tag does not verify (tampered or misrouted ciphertext).
        """
        msg = self._accept(message)
        assert isinstance(msg, SeedDelivery)
        if self.silo == 0:
            if msg.ciphertexts:
                raise MalformedMessageError("silo 0 made the seed and receives none")
            seed = self._seed
        else:
            if len(msg.ciphertexts) != 1 or msg.ciphertexts[0][0] != 0:
                raise MalformedMessageError("expected exactly one encrypted seed, from silo 0")
            session = self.params.session_id
            seed = open_sealed(
                seed_encryption_key(self._agreements[0], session, self.silo),
                msg.ciphertexts[0][1],
                seed_associated_data(session, 0, self.silo),
            )
            if len(seed) != SEED_BYTES:  # pragma: no cover - authenticated by silo 0
                raise MalformedMessageError("the shared seed has the wrong length")
        self._seed = seed
        self.received.append(msg)
        self.stage = SiloStage.SEEDED

    # ------------------------------------------------------------------ 1(d), 1(e)
    def blinded_histogram(self) -> BlindedHistogram:
        """Steps 1(d)-(e): ``B'(n_{s,u}) = r_u n_{s,u} + sum of pairwise masks mod n``.

        ``r_u`` is uniform in ``Z_n^*`` (rejection sampling from the PRG keyed by ``R``, so every
        silo draws the same ``r_u``); the masks of all silos cancel in the server's sum.

        Returns
        -------
        BlindedHistogram
            The doubly blinded histogram.

        Raises
        ------
        OutOfOrderError
            If the seed is not known yet or the histogram was already sent.
        NotInvertibleError
            If some ``gcd(r_u, n) != 1`` (excluded by the sampling; checked anyway).
        """
        if self.stage is not SiloStage.SEEDED or self._seed is None:
            raise OutOfOrderError(f"silo {self.silo} cannot send its histogram now")
        pk = self.public_key
        n = pk.n_mpz
        session = self.params.session_id
        blinds = UniformSampler(blind_key(self._seed, session), n, units=True).take(
            self.params.n_users
        )
        for u, r in enumerate(blinds):
            check_unit(r, n, f"the blind r_u of user {u}")
        keys = {
            peer: histogram_mask_key(agreement, session, self.silo, peer)
            for peer, agreement in self._agreements.items()
        }
        masks = pairwise_mask_totals(self.silo, keys, n, self.params.n_users)
        values = tuple(
            int((r * c + m) % n) for r, c, m in zip(blinds, self._records, masks, strict=True)
        )
        c_lcm = mpz(self.params.c_lcm)
        self._scalars = [
            mpz(c) * r % n * c_lcm % n for r, c in zip(blinds, self._records, strict=True)
        ]
        self._seed = None  # R is no longer needed; the k_u = n_{s,u} r_u C_LCM are kept
        self.stage = SiloStage.READY
        return BlindedHistogram(self._to_server(MessageKind.BLINDED_HISTOGRAM), values)
