"""The client's state machine (Bonawitz et al. 2017, Fig. 4).

The honest-but-curious variant, plus, when built with a :class:`ConsistencyCheck`, the
malicious-server consistency check before unmasking (:mod:`fedprivacy.secagg.consistency`).
"""

from __future__ import annotations

import os
import time

import numpy as np

from fedprivacy.crypto.aead import open_sealed, seal
from fedprivacy.crypto.keys import (
    agree,
    generate_keypair,
    keypair_from_private_bytes,
    private_key_bytes,
)
from fedprivacy.crypto.shamir import Share, split_secret
from fedprivacy.dp.noise_modes import NoiseDraw
from fedprivacy.dp.party_noise import Components, add_components, draw_components
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.consistency import (
    ConsistencyCheck,
    check_aggregated,
    check_restorable,
    verify_unmask,
)
from fedprivacy.secagg.consistency_client import ClientConsistency
from fedprivacy.secagg.derivation import (
    pairwise_mask_key,
    seed_commitment,
    share_associated_data,
    share_encryption_key,
)
from fedprivacy.secagg.errors import (
    DuplicateMessageError,
    OutOfOrderError,
    ProtocolViolationError,
    RoundAbortedError,
    UnknownSenderError,
)
from fedprivacy.secagg.key_epoch import KeyEpoch
from fedprivacy.secagg.masking import mask
from fedprivacy.secagg.messages import (
    SERVER,
    AdvertiseKeys,
    Header,
    KeyRoster,
    MaskedInput,
    Message,
    MessageKind,
    ShareDelivery,
    ShareKeys,
    ShareKind,
    UnmaskRequest,
    UnmaskResponse,
    decode_share_plaintext,
    encode_share_plaintext,
)
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.party import RoundParty
from fedprivacy.secagg.reveals import reveal_kind
from fedprivacy.secagg.signed_keys import check_participants, roster_keys, sign_keys
from fedprivacy.secagg.snapshot import SEED_BYTES, ClientSnapshot, ClientStage

# The server message each stage expects, and the stage it leads to.
_EXPECTED = {
    ClientStage.ADVERTISED: MessageKind.KEY_ROSTER,
    ClientStage.SHARED: MessageKind.SHARE_DELIVERY,
    ClientStage.MASKED: MessageKind.UNMASK_REQUEST,
}
_ORDER = [MessageKind.KEY_ROSTER, MessageKind.SHARE_DELIVERY, MessageKind.UNMASK_REQUEST]
# with the consistency check, a client in MASKED signs the aggregated set before unmasking it
_ORDER_CHECKED = [*_ORDER[:2], MessageKind.CONSISTENCY_REQUEST, _ORDER[2]]


class SecAggClient(ClientConsistency, RoundParty):
    """One user's side of a secure aggregation round.

    The client is driven by the messages it receives: :meth:`advertise_keys` starts it, and
    :meth:`share_keys`, :meth:`masked_input` and :meth:`unmask` each take the server's message
    (typed or as bytes) and return the reply. Anything from another session or round, from
    someone other than the server, addressed to someone else, for another stage or for a stage
    already answered is rejected with a typed error and leaves the state unchanged.

    Parameters
    ----------
    params : SecAggParameters
        The public parameters of the round.
    user : int
        This client's id; must be one of ``params.participants``.
    consistency : ConsistencyCheck, optional
        The node's signing key and the federation's roster: the client then signs the
        aggregated set (:meth:`sign_survivors`) and unmasks only a set enough members signed
        (:mod:`fedprivacy.secagg.consistency`). Without it the client behaves as in the
        honest-but-curious protocol.
    epoch : KeyEpoch, optional
        Keys reused across rounds (:mod:`fedprivacy.secagg.key_epoch`): the client then
        answers a key roster without having advertised, never shares its masking key, and
        reveals this round's pairwise mask keys instead. Refused (``WrongRoundError``) for a
        round the epoch must not mask.

    """

    def __init__(
        self,
        params: SecAggParameters,
        user: int,
        *,
        consistency: ConsistencyCheck | None = None,
        epoch: KeyEpoch | None = None,
    ) -> None:
        if user not in params.participants:
            raise ParameterError("user", f"{user} is not a participant of this round")
        if consistency is not None:
            consistency.check_user(int(user))
            check_participants(consistency.roster, params)
        super().__init__(params, int(user), "this client")
        self._check = consistency
        self._signed: tuple[int, ...] | None = None
        self.user = int(user)
        self.stage = ClientStage.NEW
        self._epoch = epoch
        self._reusing = epoch is not None  # kept by a restored client, which has no epoch
        if epoch is None:
            self._enc, self._mask = generate_keypair(), generate_keypair()
        else:
            self._enc, self._mask = epoch.keys_for(params, self.user)
        self._seed = os.urandom(SEED_BYTES)
        self._neighbour_keys: dict[int, tuple[bytes, bytes]] = {}
        self._held: dict[int, tuple[Share, Share | None]] = {}
        self._noise: tuple[NoiseDraw, Components] | None = None  # exact mode: removable
        self._model = b""  # the digest of the model the masked update was trained on

    # ------------------------------------------------------------------ persistence
    def _snapshot(self) -> ClientSnapshot:
        """The state kept between stages (see :func:`fedprivacy.secagg.state.dump_client`)."""
        return ClientSnapshot(
            self.user,
            self.stage,
            private_key_bytes(self._enc.private),
            private_key_bytes(self._mask.private),
            self._seed,
            dict(self._neighbour_keys),
            dict(self._held),
            dict(self.seconds),
            self._check is not None,
            self._signed,
            self._noise,
            self._reusing,
            self._model,
        )

    @classmethod
    def _restore(
        cls,
        params: SecAggParameters,
        snapshot: ClientSnapshot,
        consistency: ConsistencyCheck | None = None,
    ) -> SecAggClient:
        """A client in the state ``snapshot``; the keys drawn by the constructor are replaced."""
        check_restorable(snapshot.consistency, consistency)
        client = cls(params, snapshot.user, consistency=consistency)
        client._signed = snapshot.signed
        client.stage = snapshot.stage
        client._enc = keypair_from_private_bytes(snapshot.encryption_key)
        client._mask = keypair_from_private_bytes(snapshot.masking_key)
        client._seed = snapshot.seed
        client._neighbour_keys = dict(snapshot.neighbour_keys)
        client._held = dict(snapshot.held)
        client.seconds = dict(snapshot.seconds)
        client._noise = snapshot.noise
        client._reusing = snapshot.reusing
        client._model = snapshot.model
        return client

    # ------------------------------------------------------------------ helpers
    def _to_server(self, kind: MessageKind) -> Header:
        return self._header(kind, SERVER)

    def _accept(self, message: Message | bytes, kind: MessageKind) -> Message:
        msg = self._decode(message)
        h = msg.header
        if h.sender != SERVER:
            raise UnknownSenderError(f"client messages come only from the server, not {h.sender}")
        if h.recipient != self.user:
            raise UnknownSenderError(f"message addressed to {h.recipient}, not to {self.user}")
        expected = _EXPECTED.get(self.stage)
        if self.stage is ClientStage.NEW and self._reusing:
            expected = MessageKind.KEY_ROSTER  # reused keys: the server holds them already
        order = _ORDER if self._check is None else _ORDER_CHECKED
        if self.stage is ClientStage.MASKED and self._check is not None and self._signed is None:
            expected = MessageKind.CONSISTENCY_REQUEST
        if h.kind is not kind or expected is not kind:
            if (
                h.kind in order
                and expected in order
                and order.index(h.kind) < order.index(expected)
            ):
                raise DuplicateMessageError(f"{h.kind.name} was already handled")
            if self.stage is ClientStage.DONE and h.kind in order:
                raise DuplicateMessageError(f"{h.kind.name} after the round finished")
            raise OutOfOrderError(
                f"got {h.kind.name} while in stage {self.stage.name}"
                + (f" (expecting {expected.name})" if expected else "")
            )
        return msg

    # ------------------------------------------------------------------ stages
    def advertise_keys(self) -> AdvertiseKeys:
        """Stage 0: publish the two public keys and the commitment to the self-mask seed.

        Returns
        -------
        AdvertiseKeys
            The message for the server.

        """
        if self.stage is not ClientStage.NEW:
            raise OutOfOrderError("keys were already advertised")
        start = time.perf_counter()
        c_pk, s_pk = self._enc.public_bytes, self._mask.public_bytes
        signature = b""
        if self._check is not None:
            signature = sign_keys(
                self._check, self.params, self.user, c_pk, s_pk, epoch=self._reusing
            )
        commitment = seed_commitment(self._seed, self.params, self.user)
        header = self._to_server(MessageKind.ADVERTISE_KEYS)
        msg = AdvertiseKeys(header, c_pk, s_pk, commitment, signature)
        self.stage = ClientStage.ADVERTISED
        self._timed("advertise_keys", start)
        return msg

    def share_keys(self, roster: KeyRoster | bytes) -> ShareKeys:
        """Stage 1: Shamir-share ``b_u`` and ``s_sk_u`` among the neighbours that advertised.

        With node authentication every key of the roster must carry its owner's signature
        (:func:`~fedprivacy.secagg.signed_keys.roster_keys`); nothing is sealed otherwise.

        Parameters
        ----------
        roster : KeyRoster or bytes
            The server's list of advertised public keys.

        Returns
        -------
        ShareKeys
            One AES-GCM ciphertext per neighbour, to be relayed by the server.

        """
        start = time.perf_counter()
        msg = self._accept(roster, MessageKind.KEY_ROSTER)
        assert isinstance(msg, KeyRoster)
        p = self.params
        mine = p.neighbours[self.user]
        own = (self._enc.public_bytes, self._mask.public_bytes)
        trusted = None if self._check is None else self._check.roster
        keys = roster_keys(msg, p, self.user, own, trusted)
        peers = {v: kv for v, kv in keys.items() if v in mine}
        if len(peers) < p.threshold:
            raise RoundAbortedError(
                f"only {len(peers)} neighbours advertised keys; the threshold is {p.threshold}"
            )
        holders = [p.share_point(v) for v in sorted(peers)]
        seed_shares = split_secret(self._seed, holders, p.threshold)
        secret = private_key_bytes(self._mask.private)  # a reused key is never shared
        key_shares = None if self._reusing else split_secret(secret, holders, p.threshold)
        cts = []
        for v in sorted(peers):
            x = p.share_point(v)
            key_share = None if key_shares is None else key_shares[x]
            plaintext = encode_share_plaintext(self.user, v, seed_shares[x], key_share)
            key = share_encryption_key(agree(self._enc.private, peers[v][0]), p, self.user, v)
            cts.append((v, seal(key, plaintext, share_associated_data(p, self.user, v))))
        self._neighbour_keys = peers
        self.stage = ClientStage.SHARED
        self._timed("share_keys", start)
        commitment = seed_commitment(self._seed, p, self.user) if self._reusing else None
        return ShareKeys(self._to_server(MessageKind.SHARE_KEYS), tuple(cts), commitment)

    def masked_input(
        self,
        delivery: ShareDelivery | bytes,
        update: np.ndarray,
        *,
        weight: float | None = None,
        rng: np.random.Generator | None = None,
        noise: NoiseDraw | None = None,
        model: bytes = b"",
    ) -> MaskedInput:
        """Stage 2: decrypt the received shares and send the masked, encoded update.

        Parameters
        ----------
        delivery : ShareDelivery or bytes
            The ciphertexts other clients addressed to this one.
        update : numpy.ndarray
            The update vector, shape ``(params.dimension,)``, entries within the codec's clip
            (times ``1 / weight`` when weighted).
        weight : float, optional
            Required when ``params.weighted``: the vector sent is ``[weight * update, weight]``.
        rng : numpy.random.Generator, optional
            Randomness of the stochastic rounding (not secret); fresh from the OS by default.
        noise : NoiseDraw, optional
            Distributed DP: add ``noise.components`` vectors of ``N_Z(0, noise.variance)``
            from the OS's randomness to the update on the encoding's grid, before masking
            (:mod:`fedprivacy.dp.party_noise`); the weight entry is never noised. Removable
            noise (the exact mode, :mod:`fedprivacy.dp.noise_modes`) is kept until
            :meth:`unmask` and needs the consistency check.
        model : bytes, optional
            The digest of the model ``update`` was trained on: it binds the pairwise masks and
            the set this client signs, so the masks of two parties sent different models do not
            cancel (:func:`~fedprivacy.secagg.derivation.pairwise_mask_key`).

        Returns
        -------
        MaskedInput
            ``encode(x) + noise + PRG(b_u) + sum_v +-PRG(s_uv)`` modulo ``2**bits``.

        """
        start = time.perf_counter()
        p = self.params
        if noise is not None and noise.removable and self._check is None:
            raise ParameterError(
                "noise", "the exact noise mode needs the consistency check (a consistent S)"
            )
        values = np.asarray(update, dtype=np.float64)
        if values.shape != (p.dimension,):
            raise ParameterError("update", f"must have shape ({p.dimension},), got {values.shape}")
        if p.weighted:
            if weight is None or not np.isfinite(weight) or weight < 0:
                raise ParameterError("weight", "a finite non-negative weight is required")
            values = np.append(values * weight, weight)
        elif weight is not None:
            raise ParameterError("weight", "this round is not weighted")
        msg = self._accept(delivery, MessageKind.SHARE_DELIVERY)
        assert isinstance(msg, ShareDelivery)
        held: dict[int, tuple[Share, Share | None]] = {}
        for sender, ct in msg.ciphertexts:
            if sender not in self._neighbour_keys or sender == self.user:
                raise UnknownSenderError(f"share from {sender}, who is not a neighbour")
            if sender in held:
                raise DuplicateMessageError(f"two shares from {sender}")
            key = share_encryption_key(
                agree(self._enc.private, self._neighbour_keys[sender][0]), p, sender, self.user
            )
            plain = open_sealed(key, ct, share_associated_data(p, sender, self.user))
            u, v, seed_share, key_share = decode_share_plaintext(plain)
            x = p.share_point(self.user)
            points = {s.x for s in (seed_share, key_share) if s is not None}
            if (u, v) != (sender, self.user) or points != {x}:
                raise ProtocolViolationError(f"share from {sender} names the wrong users")
            held[sender] = (seed_share, key_share)
        if len(held) < p.threshold:
            raise RoundAbortedError(
                f"only {len(held)} neighbours shared their keys; the threshold is {p.threshold}"
            )
        self._model = bytes(model)
        encoded = p.codec.encode(values, rng if rng is not None else np.random.default_rng())
        if noise is not None:
            components = draw_components(noise, p.dimension)
            encoded = add_components(p.codec, encoded, components)
            self._noise = (noise, components) if noise.removable else None
        masked = mask(p, encoded, self._seed, self.user, {v: self._pair_key(v) for v in held})
        if self._epoch is not None:
            self._epoch.record(p.round_index)
        self._held = held
        self.stage = ClientStage.MASKED
        self._timed("masked_input", start)
        return MaskedInput(self._to_server(MessageKind.MASKED_INPUT), masked)

    def unmask(self, request: UnmaskRequest | bytes) -> UnmaskResponse:
        """Stage 3: reveal, for each neighbour, the share of ``b_v`` or of ``s_sk_v``, never both.

        Parameters
        ----------
        request : UnmaskRequest or bytes
            The set of users whose inputs the server aggregates.

        Returns
        -------
        UnmaskResponse
            Shares of ``b_v`` for aggregated neighbours, of ``s_sk_v`` for the others; for a
            neighbour that reuses its keys and is left out, this round's key of the pairwise
            mask with it, and only when this client is aggregated; in the exact noise mode, the
            excess noise this client removes.

        Raises
        ------
        ProtocolViolationError
            If the neighbour graph restricted to the aggregated set is disconnected: the server
            could then unmask each component's sum separately. Nothing is revealed and the state
            is unchanged.
        RoundAbortedError
            If fewer than ``threshold`` users are to be aggregated.
        ConsistencyError
            With the consistency check: if the set is not the one this client signed, or the
            request lacks valid signatures of it by :func:`consistency_quorum
            <fedprivacy.secagg.consistency.consistency_quorum>` distinct members (or carries a
            duplicate, foreign or invalid one). Nothing is revealed and the state is unchanged.

        """
        start = time.perf_counter()
        msg = self._accept(request, MessageKind.UNMASK_REQUEST)
        assert isinstance(msg, UnmaskRequest)
        aggregated = check_aggregated(self.params, msg.aggregated)
        if self._check is not None:
            check, signed = self._check, self._signed
            verify_unmask(
                self.params, check.roster, signed, aggregated, msg.signatures, self._model
            )
        shares: list[tuple[int, ShareKind, bytes]] = []
        reusing = {v for v, (_, key_share) in self._held.items() if key_share is None}
        for v in sorted(self._held):
            seed_share, key_share = self._held[v]
            kind = reveal_kind(v, self.user, aggregated, reusing)
            if kind is ShareKind.SELF_MASK_SEED:
                shares.append((v, kind, seed_share.to_bytes()))
            elif kind is ShareKind.MASK_KEY and key_share is not None:
                shares.append((v, kind, key_share.to_bytes()))
            elif kind is ShareKind.PAIR_MASK_KEY:  # v reuses its keys: this round's key only
                shares.append((v, kind, self._pair_key(v)))
        self._held = {}
        self.stage = ClientStage.DONE
        excess = self._excess(aggregated)
        self._timed("unmask", start)
        header = self._to_server(MessageKind.UNMASK_RESPONSE)
        return UnmaskResponse(header, tuple(shares), excess)

    def _pair_key(self, v: int) -> bytes:
        """The key of this round's pairwise mask with ``v``."""
        agreement = agree(self._mask.private, self._neighbour_keys[v][1])
        return pairwise_mask_key(agreement, self.params, self.user, v, self._model)

    def _excess(self, aggregated: set[int]) -> np.ndarray | None:
        """The components beyond those this client keeps for ``aggregated``, summed (or None)."""
        if self._noise is None:
            return None
        draw, components = self._noise
        self._noise = None
        if self.user not in aggregated:  # its input, noise included, is left out of the sum
            return None
        zero = np.zeros(self.params.vector_length, dtype=self.params.codec.dtype)
        kept = draw.kept(sorted(aggregated), self.user)
        return add_components(self.params.codec, zero, components[kept:])
