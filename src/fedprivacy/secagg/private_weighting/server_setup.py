"""The server's setup of Protocol 1, steps 1(a)-(f): the Paillier key, relays, blinded totals.

:class:`ServerSetup` is the setup phase of
:class:`~fedprivacy.secagg.private_weighting.server.PrivateWeightingServer` (which adds the
rounds, step 2): it generates the Paillier key pair and announces it, relays the silos' X25519
keys and silo 0's sealed seeds (each checked for its recipients and length), and sums the
blinded histograms into ``B(N_u) = r_u N_u mod n``, keeping their inverses for the rounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Executor
from enum import IntEnum

import gmpy2
from gmpy2 import mpz

from fedprivacy.crypto.aead import NONCE_BYTES, TAG_BYTES
from fedprivacy.crypto.paillier import PaillierPrivateKey, generate_keypair
from fedprivacy.secagg.private_weighting.errors import (
    DuplicateMessageError,
    MalformedMessageError,
    MissingMessagesError,
    NotInvertibleError,
    OutOfOrderError,
    UnknownSenderError,
)
from fedprivacy.secagg.private_weighting.messages import (
    BlindedHistogram,
    DhRoster,
    MessageKind,
    PaillierKeyAnnouncement,
    SeedDelivery,
    SeedShares,
)
from fedprivacy.secagg.private_weighting.party import Party
from fedprivacy.secagg.private_weighting.silo_setup import SEED_BYTES

__all__ = ["ServerSetup", "ServerStage"]


class ServerStage(IntEnum):
    """What the server is collecting."""

    NEW = 0
    KEYS = 1  # 1(a): silos' X25519 public keys
    SEED = 2  # 1(c): silo 0's encrypted seeds
    HISTOGRAMS = 3  # 1(e): blinded histograms
    READY = 4  # between rounds
    ROUND = 5  # 2(c): masked updates of the current round


class ServerSetup(Party):
    """The server's helpers and setup steps; the attributes are set by its constructor."""

    stage: ServerStage
    _key: PaillierPrivateKey | None
    _executor: Executor | None
    _dh: dict[int, tuple[bytes, bytes]]
    _seed_shares: dict[int, bytes] | None
    _histograms: dict[int, tuple[int, ...]]
    _inverses: list[mpz]
    _totals: tuple[int, ...]

    # ------------------------------------------------------------------ views and helpers
    @property
    def private_key(self) -> PaillierPrivateKey:
        """PaillierPrivateKey: The key pair (after :meth:`start_setup`)."""
        if self._key is None:
            raise OutOfOrderError("the server has no key before start_setup()")
        return self._key

    @property
    def blinded_totals(self) -> tuple[int, ...]:
        """The server's setup view: ``B(N_u) = r_u N_u mod n`` for every user."""
        return self._totals

    def _missing(self, received: Mapping[int, object], what: str) -> None:
        missing = sorted(set(range(self.params.n_silos)) - set(received))
        if missing:
            raise MissingMessagesError(f"no {what} yet from silos {missing[:10]}")

    # ------------------------------------------------------------------ 1(a)
    def start_setup(self) -> dict[int, PaillierKeyAnnouncement]:
        """Step 1(a): generate the Paillier key pair and announce the public key.

        Returns
        -------
        dict of int to PaillierKeyAnnouncement
            One announcement per silo.

        Raises
        ------
        OutOfOrderError
            If the setup already started.
        PlaintextRangeError
            If the modulus cannot hold the worst-case aggregate.
        """
        if self.stage is not ServerStage.NEW:
            raise OutOfOrderError("the setup has already started")
        if self._key is None:
            self._key = generate_keypair(
                self.params.key_bits, insecure_small_key=self.params.insecure_small_key
            )
        n = self._key.public_key.n
        self.params.check_modulus(n)
        self.stage = ServerStage.KEYS
        return {
            s: PaillierKeyAnnouncement(self._header(MessageKind.PAILLIER_KEY, s), n)
            for s in range(self.params.n_silos)
        }

    def _receive_seed_shares(self, msg: SeedShares) -> None:
        sender = msg.header.sender
        if sender != 0:
            raise UnknownSenderError(f"only silo 0 distributes the seed, not silo {sender}")
        if self._seed_shares is not None:
            raise DuplicateMessageError("silo 0 already sent the encrypted seeds")
        recipients = [r for r, _ in msg.ciphertexts]
        if sorted(recipients) != list(range(1, self.params.n_silos)):
            raise MalformedMessageError("the encrypted seeds must address every other silo once")
        for _, blob in msg.ciphertexts:
            if len(blob) != NONCE_BYTES + SEED_BYTES + TAG_BYTES:
                raise MalformedMessageError("an encrypted seed has the wrong length")
        self._seed_shares = dict(msg.ciphertexts)

    def _receive_histogram(self, msg: BlindedHistogram) -> None:
        n = self.private_key.public_key.n
        if len(msg.values) != self.params.n_users:
            raise MalformedMessageError(
                f"a histogram has {len(msg.values)} entries, not {self.params.n_users}"
            )
        if any(not 0 <= v < n for v in msg.values):
            raise MalformedMessageError("a blinded histogram entry is not in Z_n")
        if msg.header.sender in self._histograms:
            raise DuplicateMessageError(f"silo {msg.header.sender} already sent its histogram")
        self._histograms[msg.header.sender] = msg.values

    # ------------------------------------------------------------------ 1(b), 1(c)
    def finish_keys(self) -> dict[int, DhRoster]:
        """Step 1(b): relay every silo's X25519 public key to every silo.

        Returns
        -------
        dict of int to DhRoster
            One roster per silo.

        Raises
        ------
        OutOfOrderError
            If the server is not collecting keys.
        MissingMessagesError
            If a silo has not sent its key.
        """
        if self.stage is not ServerStage.KEYS:
            raise OutOfOrderError(f"not collecting keys (stage {self.stage.name})")
        self._missing(self._dh, "public key")
        keys = tuple((s, *self._dh[s]) for s in sorted(self._dh))
        self.stage = ServerStage.SEED
        return {
            s: DhRoster(self._header(MessageKind.DH_ROSTER, s), keys)
            for s in range(self.params.n_silos)
        }

    def finish_seed(self) -> dict[int, SeedDelivery]:
        """Step 1(c): relay silo 0's encrypted seed to every other silo.

        Returns
        -------
        dict of int to SeedDelivery
            One delivery per silo (empty for silo 0, which made the seed).

        Raises
        ------
        OutOfOrderError
            If the server is not relaying the seed.
        MissingMessagesError
            If silo 0 has not sent the encrypted seeds.
        """
        if self.stage is not ServerStage.SEED:
            raise OutOfOrderError(f"not relaying the seed (stage {self.stage.name})")
        if self._seed_shares is None:
            raise MissingMessagesError("silo 0 has not sent the encrypted seeds")
        self.stage = ServerStage.HISTOGRAMS
        kind = MessageKind.SEED_DELIVERY
        out = {0: SeedDelivery(self._header(kind, 0), ())}
        for s, blob in self._seed_shares.items():
            out[s] = SeedDelivery(self._header(kind, s), ((0, blob),))
        return out

    # ------------------------------------------------------------------ 1(e), 1(f)
    def finish_histograms(self) -> None:
        """Steps 1(e)-(f): ``B(N_u) = sum_s B'(n_{s,u}) mod n`` and its inverse modulo ``n``.

        Raises
        ------
        OutOfOrderError
            If the server is not collecting histograms.
        MissingMessagesError
            If a silo has not sent its histogram.
        NotInvertibleError
            If some ``B(N_u)`` has no inverse: ``N_u = 0`` (a user without records, who has no
            weight ``n_{s,u} / N_u``) or ``gcd(r_u, n) != 1``.
        """
        if self.stage is not ServerStage.HISTOGRAMS:
            raise OutOfOrderError(f"not collecting histograms (stage {self.stage.name})")
        self._missing(self._histograms, "blinded histogram")
        n = self.private_key.public_key.n_mpz
        totals = [mpz(0)] * self.params.n_users
        for values in self._histograms.values():
            totals = [(t + v) % n for t, v in zip(totals, values, strict=True)]
        inverses = []
        for u, t in enumerate(totals):
            if t == 0 or gmpy2.gcd(t, n) != 1:
                raise NotInvertibleError(
                    f"B(N_u) of user {u} is not invertible modulo n: the user has no records "
                    "in any silo (N_u = 0; drop such users) or gcd(r_u, n) != 1"
                )
            inverses.append(gmpy2.invert(t, n))
        self._totals = tuple(int(t) for t in totals)
        self._inverses = inverses
        self.stage = ServerStage.READY
