"""The aggregation server's side of Protocol 1 (the party ``A`` of the paper): its rounds.

The setup, steps 1(a)-(f), is :mod:`.server_setup`.

What the server sees (Theorem 5): the silos' X25519 public keys, the AES-GCM ciphertexts of the
seed it relays, the doubly blinded histograms ``B'(n_{s,u})`` (each uniform in ``Z_n`` because of
the pairwise masks), their sums ``B(N_u) = r_u N_u mod n`` (uniform in ``Z_n^*`` because ``r_u``
is, whatever ``N_u``), the silos' per-round ciphertexts (which decrypt to values masked by the
pairwise masks, uniform in ``Z_n``) and the decrypted sum, which is the ULDP-AVG-w aggregate it
is meant to learn, as the integer ``C_LCM sum_s sum_u w_{s,u} E_{s,u} + sum_s Z_s``
(:attr:`PrivateWeightingServer.last_plaintexts`): the silos' discrete Gaussian noise ``Z_s`` lies
on the same integer grid, so no residue of it (e.g. modulo ``C_LCM`` or ``N_u``) is noise-free.
It chooses the user-level sub-sample itself (as in the paper).
"""

from __future__ import annotations

from concurrent.futures import Executor

import numpy as np
from gmpy2 import mpz
from numpy.typing import ArrayLike

from fedprivacy.crypto.paillier import PaillierPrivateKey
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting.encoding import decode, signed
from fedprivacy.secagg.private_weighting.errors import (
    DuplicateMessageError,
    MalformedMessageError,
    OutOfOrderError,
    UnknownSenderError,
    WrongRoundError,
)
from fedprivacy.secagg.private_weighting.messages import (
    SERVER,
    BlindedHistogram,
    DhPublicKey,
    EncryptedWeights,
    MaskedUpdate,
    Message,
    MessageKind,
    SeedShares,
)
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters
from fedprivacy.secagg.private_weighting.server_setup import ServerSetup, ServerStage

__all__ = ["PrivateWeightingServer"]


_STAGE_OF = {
    MessageKind.DH_PUBLIC_KEY: ServerStage.KEYS,
    MessageKind.SEED_SHARES: ServerStage.SEED,
    MessageKind.BLINDED_HISTOGRAM: ServerStage.HISTOGRAMS,
    MessageKind.MASKED_UPDATE: ServerStage.ROUND,
}


class PrivateWeightingServer(ServerSetup):
    """The server's state machine.

    Call :meth:`start_setup`, feed every silo message to :meth:`receive`, close each step with
    the matching ``finish_*`` method (which returns the messages to send on), then for every
    round :meth:`start_round`, :meth:`receive` the silos' updates and :meth:`finish_round`.
    A message that cannot be accepted raises a :class:`MessageRejectedError` and changes
    nothing.

    Parameters
    ----------
    params : PrivateWeightingParameters
        The session's public parameters.
    private_key : PaillierPrivateKey, optional
        A key pair to use instead of generating one in :meth:`start_setup` (tests, benchmarks).
    executor : concurrent.futures.Executor, optional
        Thread pool for encryption and decryption.
    """

    def __init__(
        self,
        params: PrivateWeightingParameters,
        *,
        private_key: PaillierPrivateKey | None = None,
        executor: Executor | None = None,
    ) -> None:
        if private_key is not None and private_key.public_key.bits != params.key_bits:
            raise ParameterError(
                "private_key", f"has {private_key.public_key.bits} bits, not {params.key_bits}"
            )
        super().__init__(params, SERVER)
        self.stage = ServerStage.NEW
        self.round_index: int | None = None
        self._key = private_key
        self._executor = executor
        self._dh: dict[int, tuple[bytes, bytes]] = {}  # silo -> (X25519 key, its signature)
        self._seed_shares: dict[int, bytes] | None = None
        self._histograms: dict[int, tuple[int, ...]] = {}
        self._updates: dict[int, list[mpz]] = {}
        self._inverses: list[mpz] = []
        self._totals: tuple[int, ...] = ()
        self._cached_weights: tuple[int, ...] | None = None
        self._sampled_count = params.n_users
        # the decrypted signed integers of the last round (the server's own view, before decoding)
        self.last_plaintexts: tuple[int, ...] = ()

    # ------------------------------------------------------------------ receiving
    def receive(self, message: Message | bytes) -> None:
        """Validate a silo's message and store it for the current step.

        Parameters
        ----------
        message : Message or bytes
            A silo's message (bytes are parsed first).

        Raises
        ------
        MessageRejectedError
            ``MalformedMessageError``, ``WrongSessionError``, ``UnknownSenderError``,
            ``OutOfOrderError``, ``WrongRoundError`` or ``DuplicateMessageError``; the message is
            ignored and the state is unchanged.
        """
        msg = self._decode(message)
        h = msg.header
        p = self.params
        if h.recipient != SERVER:
            raise UnknownSenderError(f"message addressed to {h.recipient}, not to the server")
        if not 0 <= h.sender < p.n_silos:
            raise UnknownSenderError(f"{h.sender} is not a silo of this session")
        expected = _STAGE_OF.get(h.kind)
        if expected is None:
            raise UnknownSenderError(f"only the server sends {h.kind.name} messages")
        if expected is not self.stage:
            raise OutOfOrderError(
                f"{h.kind.name} arrived while the server is in stage {self.stage.name}"
            )
        if h.kind is MessageKind.MASKED_UPDATE and h.round_index != self.round_index:
            raise WrongRoundError(
                f"update for round {h.round_index}; the server is in round {self.round_index}"
            )
        if isinstance(msg, DhPublicKey):
            if h.sender in self._dh:
                raise DuplicateMessageError(f"silo {h.sender} already sent its public key")
            self._dh[h.sender] = (msg.public_key, msg.signature)
        elif isinstance(msg, SeedShares):
            self._receive_seed_shares(msg)
        elif isinstance(msg, BlindedHistogram):
            self._receive_histogram(msg)
        elif isinstance(msg, MaskedUpdate):
            self._receive_update(msg)
        else:  # pragma: no cover - excluded by _STAGE_OF
            raise UnknownSenderError(f"unexpected {h.kind.name}")

    def _receive_update(self, msg: MaskedUpdate) -> None:
        pk = self.private_key.public_key
        if len(msg.ciphertexts) != self.params.n_params:
            raise MalformedMessageError(
                f"an update has {len(msg.ciphertexts)} ciphertexts, not {self.params.n_params}"
            )
        values = [mpz(c) for c in msg.ciphertexts]
        if not all(pk.is_ciphertext(c) for c in values):
            raise MalformedMessageError("an update entry is not a ciphertext (not in Z_{n^2}^*)")
        if msg.header.sender in self._updates:
            raise DuplicateMessageError(f"silo {msg.header.sender} already sent its update")
        self._updates[msg.header.sender] = values

    # ------------------------------------------------------------------ 2(a)
    def start_round(
        self, round_index: int, sampled: ArrayLike | None = None
    ) -> dict[int, EncryptedWeights]:
        """Step 2(a): encrypt ``B_inv(N_u)`` (``0`` for users not sampled) for every user.

        Parameters
        ----------
        round_index : int
            Strictly larger than every earlier round (masks are derived per round; reusing a
            round would reuse masks).
        sampled : array_like of bool, optional
            Users in this round's user-level sub-sample (default: all). Only sessions with
            ``subsampling=True`` may leave users out.

        Returns
        -------
        dict of int to EncryptedWeights
            The same ciphertexts for every silo.

        Raises
        ------
        OutOfOrderError
            If the setup is not complete or a round is open.
        WrongRoundError
            If ``round_index`` does not increase.
        ParameterError
            If ``sampled`` has the wrong shape or leaves users out without sub-sampling.
        """
        if self.stage is not ServerStage.READY:
            raise OutOfOrderError(f"cannot start a round in stage {self.stage.name}")
        if isinstance(round_index, bool) or not isinstance(round_index, int) or round_index < 0:
            raise ParameterError("round_index", f"must be an integer >= 0, got {round_index!r}")
        if round_index >= 2**64:
            raise ParameterError("round_index", "must be below 2**64")
        if self.round_index is not None and round_index <= self.round_index:
            raise WrongRoundError(
                f"round {round_index} does not follow round {self.round_index}; round indices "
                "must increase (pairwise masks are derived per round)"
            )
        mask = self._sampled(sampled)
        if self.params.subsampling or self._cached_weights is None:
            plaintexts = [
                inv if keep else mpz(0) for inv, keep in zip(self._inverses, mask, strict=True)
            ]
            weights = tuple(
                int(c) for c in self.private_key.encrypt_many(plaintexts, self._executor)
            )
            if not self.params.subsampling:
                self._cached_weights = weights
        else:
            weights = self._cached_weights
        self._sampled_count = int(np.count_nonzero(mask))
        self.round_index = round_index
        self._updates = {}
        self.stage = ServerStage.ROUND
        return {
            s: EncryptedWeights(
                self._header(MessageKind.ENCRYPTED_WEIGHTS, s, round_index), weights
            )
            for s in range(self.params.n_silos)
        }

    def _sampled(self, sampled: ArrayLike | None) -> list[bool]:
        u = self.params.n_users
        if sampled is None:
            return [True] * u
        arr = np.asarray(sampled)
        if arr.shape != (u,) or arr.dtype != np.bool_:
            raise ParameterError("sampled", f"must be a bool array of shape ({u},)")
        if not self.params.subsampling and not bool(arr.all()):
            raise ParameterError(
                "sampled",
                "this session was set up without user-level sub-sampling (its encrypted weights "
                "are reused every round); create it with subsampling=True to leave users out",
            )
        return [bool(x) for x in arr]

    def abort_round(self) -> None:
        """Close the open round without output (e.g. a silo could not compute its update).

        The round index stays used: the next round needs a larger one.

        Raises
        ------
        OutOfOrderError
            If no round is open.
        """
        if self.stage is not ServerStage.ROUND:
            raise OutOfOrderError(f"no round is open (stage {self.stage.name})")
        self._updates = {}
        self.stage = ServerStage.READY

    # ------------------------------------------------------------------ 2(c)
    def finish_round(self) -> np.ndarray:
        """Step 2(c): multiply the silos' ciphertexts, decrypt with the CRT and decode.

        Returns
        -------
        numpy.ndarray
            ``float64`` vector of ``n_params``: ``sum_s sum_u w_{s,u} Delta_{s,u} + sum_s z_s``
            (``w_{s,u} = n_{s,u} / N_u`` for sampled users, 0 for the others) up to the
            fixed-point precision. The decrypted integers themselves are kept in
            :attr:`last_plaintexts`.

        Raises
        ------
        OutOfOrderError
            If no round is open.
        MissingMessagesError
            If a silo has not sent its update (the round stays open).
        AggregateOutOfRangeError
            If a decrypted entry is outside the range of every correct aggregate (a violated
            correctness condition); the round is closed without output.
        """
        if self.stage is not ServerStage.ROUND:
            raise OutOfOrderError(f"no round is open (stage {self.stage.name})")
        self._missing(self._updates, "update")
        key = self.private_key
        n2 = key.public_key.n_square
        products = [mpz(1)] * self.params.n_params
        for values in self._updates.values():
            products = [a * b % n2 for a, b in zip(products, values, strict=True)]
        self._updates = {}
        self.stage = ServerStage.READY
        plain = key.decrypt_many(products, self._executor)
        p = self.params
        n = key.public_key.n
        bound = p.c_lcm * (self._sampled_count * p.delta_max + p.n_silos * p.noise_max)
        out = decode(plain, n, p.precision, p.c_lcm, bound)
        self.last_plaintexts = tuple(signed(int(v), n) for v in plain)
        return out
