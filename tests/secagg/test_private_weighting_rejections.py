"""Malformed, replayed, misrouted, out-of-order and tampered messages raise typed errors and
change nothing: the honest flow still completes with the right aggregate afterwards."""

from __future__ import annotations

import dataclasses
import os
import struct

import numpy as np
import pytest

from fedprivacy.crypto.paillier import PaillierPrivateKey, generate_keypair
from fedprivacy.errors import AuthenticationError
from fedprivacy.secagg.private_weighting import (
    DuplicateMessageError,
    MalformedMessageError,
    MessageRejectedError,
    MissingMessagesError,
    OutOfOrderError,
    PrivateWeightingParameters,
    PrivateWeightingServer,
    PrivateWeightingSilo,
    UnknownSenderError,
    WrongRoundError,
    WrongSessionError,
)
from fedprivacy.secagg.private_weighting.messages import (
    SERVER,
    BlindedHistogram,
    DhPublicKey,
    DhRoster,
    EncryptedWeights,
    MaskedUpdate,
    Message,
    MessageKind,
    SeedDelivery,
    SeedShares,
    decode_message,
    encode_message,
    make_header,
)

BITS = 768
S, U, D = 3, 4, 3


@pytest.fixture(scope="module")
def key() -> PaillierPrivateKey:
    return generate_keypair(BITS, insecure_small_key=True)


def retarget(message: Message, **fields: object) -> Message:
    return dataclasses.replace(message, header=dataclasses.replace(message.header, **fields))


class Session:
    """One session stepped by hand."""

    def __init__(self, key: PaillierPrivateKey) -> None:
        self.hist = np.array([[1, 2, 0, 3], [4, 0, 1, 1], [2, 2, 2, 2]])
        self.params = PrivateWeightingParameters(
            session_id=os.urandom(16),
            n_silos=S,
            n_users=U,
            n_params=D,
            clip_bound=1.0,
            noise_bound=10.0,
            key_bits=BITS,
            insecure_small_key=True,
            n_max=50,
        )
        self.server = PrivateWeightingServer(self.params, private_key=key)
        self.silos = [PrivateWeightingSilo(self.params, s, self.hist[s]) for s in range(S)]
        rng = np.random.default_rng(7)
        self.deltas = [rng.uniform(-1, 1, size=(U, D)) for _ in range(S)]
        self.noise_std = 0.5  # each silo draws its own noise of this standard deviation

    def keys(self) -> list[DhPublicKey]:
        self.announcements = self.server.start_setup()
        replies = [silo.on_paillier_key(self.announcements[s]) for s, silo in enumerate(self.silos)]
        for r in replies:
            self.server.receive(encode_message(r))
        return replies

    def roster(self) -> SeedShares:
        self.rosters = self.server.finish_keys()
        shares = [silo.on_roster(self.rosters[s]) for s, silo in enumerate(self.silos)]
        assert shares[1] is None and shares[2] is None and shares[0] is not None
        return shares[0]

    def seed(self) -> dict[int, SeedDelivery]:
        self.server.receive(self.roster())
        self.deliveries = self.server.finish_seed()
        return self.deliveries

    def histograms(self) -> list[BlindedHistogram]:
        for s, silo in enumerate(self.silos):
            silo.on_seed_delivery(self.deliveries[s])
        return [silo.blinded_histogram() for silo in self.silos]

    def setup(self) -> None:
        self.keys()
        self.seed()
        for h in self.histograms():
            self.server.receive(h)
        self.server.finish_histograms()

    def updates(self, round_index: int) -> list[MaskedUpdate]:
        self.weights = self.server.start_round(round_index)
        return [
            silo.on_weights(self.weights[s], self.deltas[s], self.noise_std)
            for s, silo in enumerate(self.silos)
        ]

    def silo_noise(self, s: int) -> np.ndarray:
        """The noise silo ``s`` reports it added in its last round, in real units."""
        z = self.silos[s].last_noise
        assert z is not None and len(z) == D
        return np.array([v / self.params.c_lcm for v in z]) * self.params.precision

    def check_round(self, round_index: int, updates: list[MaskedUpdate] | None = None) -> None:
        for m in updates if updates is not None else self.updates(round_index):
            self.server.receive(m)
        agg = self.server.finish_round()
        w = self.hist / self.hist.sum(axis=0)
        want = sum(w[s] @ self.deltas[s] + self.silo_noise(s) for s in range(S))
        np.testing.assert_allclose(agg, want, atol=1e-9)


def test_malformed_bytes(key: PaillierPrivateKey) -> None:
    sess = Session(key)
    good = encode_message(sess.keys()[0])
    bad = [
        b"",
        good[:10],
        b"XXXX" + good[4:],
        good[:4] + b"\x09" + good[5:],  # version
        good[:5] + b"\x63" + good[6:],  # unknown kind
        good[:6] + b"\x02" + good[7:],  # a setup kind with the round phase
        good + b"\x00",  # trailing byte
        good[:-1],  # truncated key
    ]
    setup_with_round = bytearray(good)
    struct.pack_into(">Q", setup_with_round, 23, 5)  # setup messages carry round 0
    bad.append(bytes(setup_with_round))
    for data in bad:
        with pytest.raises(MalformedMessageError):
            sess.server.receive(data)
    with pytest.raises(MalformedMessageError):
        decode_message("not bytes")  # type: ignore[arg-type]


def test_setup_rejections_leave_state_unchanged(key: PaillierPrivateKey) -> None:
    sess = Session(key)
    replies = sess.keys()
    with pytest.raises(DuplicateMessageError):  # replay of silo 0's key
        sess.server.receive(replies[0])
    with pytest.raises(WrongSessionError):
        sess.server.receive(retarget(replies[1], session_id=os.urandom(16)))
    with pytest.raises(UnknownSenderError):  # no silo 7 in this session
        sess.server.receive(retarget(replies[1], sender=7))
    with pytest.raises(UnknownSenderError):  # addressed to a silo, not to the server
        sess.server.receive(retarget(replies[1], recipient=2))
    with pytest.raises(UnknownSenderError):  # only the server announces keys
        sess.server.receive(retarget(sess.announcements[0], sender=1, recipient=SERVER))
    hist = BlindedHistogram(
        make_header(MessageKind.BLINDED_HISTOGRAM, sess.params.session_id, 0, 1, SERVER),
        (1,) * U,
    )
    with pytest.raises(OutOfOrderError):  # a histogram during the key exchange
        sess.server.receive(hist)
    with pytest.raises(OutOfOrderError):
        sess.server.finish_seed()
    with pytest.raises(OutOfOrderError):  # the silo already answered the key announcement
        sess.silos[0].on_paillier_key(sess.announcements[0])
    with pytest.raises(UnknownSenderError):  # silos take messages from the server only
        sess.silos[1].on_roster(retarget(sess.announcements[1], sender=2))
    shares = sess.roster()
    with pytest.raises(MissingMessagesError):
        sess.server.finish_seed()
    with pytest.raises(UnknownSenderError):  # only silo 0 distributes the seed
        sess.server.receive(retarget(shares, sender=1))
    with pytest.raises(MalformedMessageError):
        sess.server.receive(dataclasses.replace(shares, ciphertexts=shares.ciphertexts[:1]))
    sess.server.receive(shares)
    with pytest.raises(DuplicateMessageError):
        sess.server.receive(shares)
    deliveries = sess.server.finish_seed()
    sess.deliveries = deliveries
    # the rest of the setup and a round still work
    for h in sess.histograms():
        sess.server.receive(h)
    sess.server.finish_histograms()
    sess.check_round(0)


def test_tampered_seed_is_rejected_by_aes_gcm(key: PaillierPrivateKey) -> None:
    sess = Session(key)
    sess.keys()
    deliveries = sess.seed()
    peer, blob = deliveries[1].ciphertexts[0]
    for tampered in (
        blob[:-1] + bytes([blob[-1] ^ 1]),  # tag
        blob[:20] + bytes([blob[20] ^ 0x80]) + blob[21:],  # ciphertext
        deliveries[2].ciphertexts[0][1],  # silo 2's seed sent to silo 1
    ):
        msg = dataclasses.replace(deliveries[1], ciphertexts=((peer, tampered),))
        with pytest.raises(AuthenticationError):
            sess.silos[1].on_seed_delivery(msg)
    with pytest.raises(MalformedMessageError):  # silo 0 receives no seed
        sess.silos[0].on_seed_delivery(retarget(deliveries[1], recipient=0))
    with pytest.raises(MalformedMessageError):
        sess.silos[1].on_seed_delivery(dataclasses.replace(deliveries[1], ciphertexts=()))
    with pytest.raises(OutOfOrderError):  # no histogram before the seed
        sess.silos[1].blinded_histogram()
    for h in sess.histograms():  # the untampered deliveries still work
        sess.server.receive(h)
    sess.server.finish_histograms()
    sess.check_round(0)


def test_roster_checks(key: PaillierPrivateKey) -> None:
    sess = Session(key)
    sess.keys()
    rosters = sess.server.finish_keys()
    keys = rosters[1].keys
    for bad in (keys[:2], keys + keys[:1], ((0, keys[0][1], b""), (1, keys[0][1], b""), keys[2])):
        with pytest.raises(MalformedMessageError):
            sess.silos[1].on_roster(dataclasses.replace(rosters[1], keys=bad))


def test_histogram_and_round_rejections(key: PaillierPrivateKey) -> None:
    sess = Session(key)
    sess.keys()
    sess.seed()
    hists = sess.histograms()
    n = key.public_key.n
    with pytest.raises(MalformedMessageError):
        sess.server.receive(dataclasses.replace(hists[0], values=hists[0].values[:-1]))
    with pytest.raises(MalformedMessageError):
        sess.server.receive(dataclasses.replace(hists[0], values=(n,) + hists[0].values[1:]))
    sess.server.receive(hists[0])
    with pytest.raises(DuplicateMessageError):
        sess.server.receive(hists[0])
    with pytest.raises(MissingMessagesError):
        sess.server.finish_histograms()
    with pytest.raises(OutOfOrderError):
        sess.server.start_round(0)
    for h in hists[1:]:
        sess.server.receive(encode_message(h))
    sess.server.finish_histograms()

    updates = sess.updates(3)
    with pytest.raises(WrongRoundError):  # an update for another round
        sess.server.receive(retarget(updates[0], round_index=2))
    with pytest.raises(MalformedMessageError):  # a value that is not a ciphertext
        sess.server.receive(dataclasses.replace(updates[0], ciphertexts=(key.p,) * D))
    with pytest.raises(MalformedMessageError):
        sess.server.receive(dataclasses.replace(updates[0], ciphertexts=updates[0].ciphertexts[:2]))
    with pytest.raises(OutOfOrderError):
        sess.server.start_round(4)
    sess.server.receive(updates[0])
    with pytest.raises(DuplicateMessageError):
        sess.server.receive(updates[0])
    with pytest.raises(MissingMessagesError):
        sess.server.finish_round()
    sess.check_round(3, updates[1:])

    # a replay of round 3 during round 5 is rejected by the server and by the silos
    stale_weights = sess.weights[1]
    new_updates = sess.updates(5)
    with pytest.raises(WrongRoundError):
        sess.server.receive(updates[1])
    with pytest.raises(WrongRoundError):
        sess.silos[1].on_weights(stale_weights, sess.deltas[1], sess.noise_std)
    with pytest.raises(WrongRoundError):  # a silo answers each round once
        sess.silos[1].on_weights(sess.weights[1], sess.deltas[1], sess.noise_std)
    sess.check_round(5, new_updates)
    with pytest.raises(WrongRoundError):
        sess.server.start_round(5)
    with pytest.raises(OutOfOrderError):
        sess.server.finish_round()


def test_silo_weight_message_checks(key: PaillierPrivateKey) -> None:
    sess = Session(key)
    fresh = sess.silos[0]
    weights = EncryptedWeights(
        make_header(MessageKind.ENCRYPTED_WEIGHTS, sess.params.session_id, 0, SERVER, 0), (1,) * U
    )
    with pytest.raises(OutOfOrderError):  # weights before the setup
        fresh.on_weights(weights, sess.deltas[0], sess.noise_std)
    sess.setup()
    msgs = sess.server.start_round(0)
    silo = sess.silos[0]
    for bad in (
        dataclasses.replace(msgs[0], ciphertexts=msgs[0].ciphertexts[:-1]),
        dataclasses.replace(msgs[0], ciphertexts=(key.q,) + msgs[0].ciphertexts[1:]),
    ):
        with pytest.raises(MalformedMessageError):
            silo.on_weights(bad, sess.deltas[0], sess.noise_std)
    with pytest.raises(UnknownSenderError):  # silo 1's message delivered to silo 0
        silo.on_weights(msgs[1], sess.deltas[0], sess.noise_std)
    with pytest.raises(WrongSessionError):
        silo.on_weights(retarget(msgs[0], session_id=bytes(16)), sess.deltas[0], sess.noise_std)
    with pytest.raises(OutOfOrderError):
        silo.on_roster(DhRoster(retarget(msgs[0], kind=MessageKind.DH_ROSTER).header, ()))
    sess.weights = msgs
    updates = [
        s.on_weights(msgs[i], sess.deltas[i], sess.noise_std) for i, s in enumerate(sess.silos)
    ]
    sess.check_round(0, updates)


def test_every_rejection_is_a_message_rejected_error() -> None:
    for cls in (
        MalformedMessageError,
        WrongSessionError,
        WrongRoundError,
        OutOfOrderError,
        UnknownSenderError,
        DuplicateMessageError,
    ):
        assert issubclass(cls, MessageRejectedError)
