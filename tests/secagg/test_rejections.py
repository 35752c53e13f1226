"""Malformed, replayed, misrouted and out-of-order messages are rejected with typed errors."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.shamir import Share
from fedprivacy.errors import AuthenticationError, FedPrivacyError, ParameterError
from fedprivacy.secagg import (
    DuplicateMessageError,
    MalformedMessageError,
    OutOfOrderError,
    ProtocolViolationError,
    SecAggClient,
    SecAggParameters,
    SecAggServer,
    UnknownSenderError,
    WrongRoundError,
)
from fedprivacy.secagg.messages import (
    SERVER,
    MaskedInput,
    MessageKind,
    ShareDelivery,
    ShareKind,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
    encode_message,
)

N, D = 5, 16


class Round:
    """A round stepped by hand, stage by stage."""

    def __init__(self, round_index: int = 3, session: bytes | None = None) -> None:
        codec = FixedPointCodec.for_sum(1.0, N, 32)
        self.params = SecAggParameters.create(
            session or os.urandom(16), round_index, range(N), D, codec
        )
        self.server = SecAggServer(self.params)
        self.clients = {u: SecAggClient(self.params, u) for u in range(N)}
        self.updates = {u: np.full(D, 0.01 * (u + 1)) for u in range(N)}

    def keys(self) -> dict[int, bytes]:
        sent = {u: encode_message(c.advertise_keys()) for u, c in self.clients.items()}
        for data in sent.values():
            self.server.receive(data)
        self.rosters = self.server.finish_keys()
        return sent

    def shares(self) -> dict[int, bytes]:
        sent = {u: encode_message(c.share_keys(self.rosters[u])) for u, c in self.clients.items()}
        for data in sent.values():
            self.server.receive(data)
        self.deliveries = self.server.finish_shares()
        return sent

    def inputs(self) -> dict[int, bytes]:
        sent = {
            u: encode_message(c.masked_input(self.deliveries[u], self.updates[u]))
            for u, c in self.clients.items()
        }
        for data in sent.values():
            self.server.receive(data)
        self.requests = self.server.finish_inputs()
        return sent

    def unmask(self) -> dict[int, bytes]:
        sent = {u: encode_message(c.unmask(self.requests[u])) for u, c in self.clients.items()}
        for data in sent.values():
            self.server.receive(data)
        return sent


def test_hand_stepped_round_is_correct() -> None:
    r = Round()
    r.keys(), r.shares(), r.inputs(), r.unmask()
    result = r.server.finish_unmask()
    np.testing.assert_allclose(result.sum, sum(r.updates.values()), atol=N / r.params.codec.scale)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:10],
        lambda b: b"XXXX" + b[4:],
        lambda b: b[:4] + bytes([9]) + b[5:],
        lambda b: b[:5] + bytes([99]) + b[6:],
        lambda b: b + b"\x00",
        lambda b: b[:-1],
    ],
    ids=["truncated-header", "magic", "version", "kind", "trailing", "truncated-body"],
)
def test_malformed_bytes_are_rejected(mutate) -> None:  # type: ignore[no-untyped-def]
    r = Round()
    data = encode_message(r.clients[0].advertise_keys())
    with pytest.raises(MalformedMessageError):
        r.server.receive(mutate(data))
    r.server.receive(data)  # the state was not changed by the rejected copies
    assert r.server.advertised == {0}


def test_masked_input_of_wrong_size_or_range_is_rejected() -> None:
    r = Round()
    r.keys(), r.shares()
    good = r.clients[0].masked_input(r.deliveries[0], r.updates[0])
    assert isinstance(good, MaskedInput)
    short = dataclasses.replace(good, vector=good.vector[:-1])
    with pytest.raises(MalformedMessageError, match="shape"):
        r.server.receive(encode_message(short))
    wide = dataclasses.replace(good, vector=good.vector.astype(np.uint64))
    with pytest.raises(MalformedMessageError, match="dtype"):
        r.server.receive(encode_message(wide))
    r.server.receive(encode_message(good))


def test_value_above_modulus_is_rejected() -> None:
    r = Round()
    codec = FixedPointCodec.for_sum(1.0, N, 20)
    r.params = SecAggParameters.create(r.params.session_id, 3, range(N), D, codec)
    r.server = SecAggServer(r.params)
    r.clients = {u: SecAggClient(r.params, u) for u in range(N)}
    r.keys(), r.shares()
    good = r.clients[1].masked_input(r.deliveries[1], r.updates[1])
    assert isinstance(good, MaskedInput) and int(good.vector.max()) < 2**20
    bad = good.vector.copy()
    bad[0] = 2**20
    with pytest.raises(MalformedMessageError, match="2\\*\\*20"):
        r.server.receive(dataclasses.replace(good, vector=bad))


def test_message_from_another_round_or_session_is_a_replay() -> None:
    session = os.urandom(16)
    old = Round(round_index=3, session=session)
    new = Round(round_index=4, session=session)
    other = Round(round_index=4)
    old_keys = old.keys()
    with pytest.raises(WrongRoundError):  # same session, earlier round
        new.server.receive(old_keys[2])
    with pytest.raises(WrongRoundError):  # same round number, another session
        other.server.receive(encode_message(new.clients[2].advertise_keys()))
    new.clients = {u: SecAggClient(new.params, u) for u in range(N)}
    new.keys()
    with pytest.raises(WrongRoundError):  # a server message of another round, at the client
        new.clients[0].share_keys(old.rosters[0])
    new.clients[0].share_keys(new.rosters[0])


def test_duplicate_and_replayed_messages() -> None:
    r = Round()
    keys = r.keys()
    with pytest.raises(DuplicateMessageError):
        r.server.receive(keys[1])  # replay of an earlier stage's message
    shares = r.shares()
    with pytest.raises(DuplicateMessageError):
        r.server.receive(shares[0])
    with pytest.raises(DuplicateMessageError):  # the client already answered this roster
        r.clients[0].share_keys(r.rosters[0])
    r.inputs()
    r.unmask()
    with pytest.raises(DuplicateMessageError):  # never a second unmask: no second kind of share
        r.clients[0].unmask(r.requests[0])


def test_out_of_order_messages() -> None:
    r = Round()
    r.keys()
    # an unmask request before the shares were even exchanged
    header = dataclasses.replace(r.rosters[0].header, kind=MessageKind.UNMASK_REQUEST)
    with pytest.raises(OutOfOrderError):
        r.clients[0].unmask(UnmaskRequest(header, (0, 1, 2)))
    with pytest.raises(OutOfOrderError):
        r.server.finish_unmask()
    with pytest.raises(OutOfOrderError):
        r.server.finish_inputs()
    # a masked input while the server still collects shares
    r.shares()
    vec = r.clients[0].masked_input(r.deliveries[0], r.updates[0])
    late = Round(session=r.params.session_id)
    late.keys()
    with pytest.raises(OutOfOrderError):
        late.server.receive(vec)
    with pytest.raises(OutOfOrderError):  # keys advertised twice by the same client object
        r.clients[1].advertise_keys()


def test_unknown_and_misrouted_senders() -> None:
    r = Round()
    data = r.clients[0].advertise_keys()
    stranger = dataclasses.replace(data, header=dataclasses.replace(data.header, sender=77))
    with pytest.raises(UnknownSenderError):
        r.server.receive(stranger)
    to_peer = dataclasses.replace(data, header=dataclasses.replace(data.header, recipient=1))
    with pytest.raises(UnknownSenderError):
        r.server.receive(to_peer)
    r.server.receive(data)
    for u in range(1, N):
        r.server.receive(r.clients[u].advertise_keys())
    r.rosters = r.server.finish_keys()
    with pytest.raises(UnknownSenderError):  # roster addressed to client 1 given to client 0
        r.clients[0].share_keys(r.rosters[1])
    with pytest.raises(ParameterError):
        SecAggClient(r.params, 99)


def test_bad_tag_is_rejected_and_state_kept() -> None:
    r = Round()
    r.keys(), r.shares()
    delivery = r.deliveries[0]
    assert isinstance(delivery, ShareDelivery)
    sender, ct = delivery.ciphertexts[0]
    flipped = bytes([ct[0]]) + bytes([ct[1] ^ 1]) + ct[2:]
    bad = dataclasses.replace(delivery, ciphertexts=((sender, flipped), *delivery.ciphertexts[1:]))
    with pytest.raises(AuthenticationError):
        r.clients[0].masked_input(bad, r.updates[0])
    # a ciphertext relabelled as coming from another sender fails its associated data
    other = delivery.ciphertexts[1][0]
    relabelled = dataclasses.replace(
        delivery, ciphertexts=((other, ct), (sender, delivery.ciphertexts[1][1]))
    )
    with pytest.raises(AuthenticationError):
        r.clients[0].masked_input(relabelled, r.updates[0])
    r.clients[0].masked_input(delivery, r.updates[0])  # the genuine one still works


def test_server_rejects_wrong_kind_of_share_and_corrupted_shares() -> None:
    r = Round()
    r.keys(), r.shares()
    # user 4 drops before its input: others must reveal its mask key, never its seed
    for u in range(4):
        r.server.receive(r.clients[u].masked_input(r.deliveries[u], r.updates[u]))
    requests = r.server.finish_inputs()
    response = r.clients[0].unmask(requests[0])
    assert isinstance(response, UnmaskResponse)
    kinds = {owner: kind for owner, kind, _ in response.shares}
    assert kinds == {
        1: ShareKind.SELF_MASK_SEED,
        2: ShareKind.SELF_MASK_SEED,
        3: ShareKind.SELF_MASK_SEED,
        4: ShareKind.MASK_KEY,
    }
    swapped = tuple(
        (o, ShareKind.SELF_MASK_SEED if o == 4 else k, s) for o, k, s in response.shares
    )
    with pytest.raises(ProtocolViolationError):
        r.server.receive(dataclasses.replace(response, shares=swapped))
    # corrupt one limb of the share of user 1's seed: structurally valid, cryptographically wrong
    owner, kind, raw = response.shares[0]
    share = Share.from_bytes(raw)
    bent = Share(share.x, ((share.values[0] + 1) % (2**31 - 1), *share.values[1:]), 32)
    corrupted = dataclasses.replace(
        response, shares=((owner, kind, bent.to_bytes()), *response.shares[1:])
    )
    r.server.receive(corrupted)
    for u in (1, 2, 3):
        r.server.receive(r.clients[u].unmask(requests[u]))
    with pytest.raises(ProtocolViolationError, match="commitment"):
        r.server.finish_unmask()


def test_decode_round_trip_of_every_message_kind() -> None:
    r = Round()
    seen = []
    seen += list(r.keys().values())
    seen += [encode_message(m) for m in r.rosters.values()]
    seen += list(r.shares().values())
    seen += [encode_message(m) for m in r.deliveries.values()]
    seen += list(r.inputs().values())
    seen += [encode_message(m) for m in r.requests.values()]
    seen += list(r.unmask().values())
    kinds = set()
    for data in seen:
        message = decode_message(data)
        kinds.add(message.header.kind)
        assert encode_message(message) == data
    assert len(kinds) == 7
    assert decode_message(seen[0]).header.recipient == SERVER


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_raise_only_typed_errors(data: bytes) -> None:
    try:
        decode_message(data)
    except MalformedMessageError:
        pass


def test_bit_flips_in_real_messages_raise_only_typed_errors() -> None:
    r = Round()
    keys = r.keys()
    shares = r.shares()
    rng = np.random.default_rng(0)
    accepted = 0
    for data in [*keys.values(), *shares.values()]:
        for _ in range(40):
            pos = int(rng.integers(0, len(data)))
            bent = (
                data[:pos] + bytes([data[pos] ^ (1 << int(rng.integers(0, 8)))]) + data[pos + 1 :]
            )
            fresh = Round(session=r.params.session_id)
            try:
                decoded = decode_message(bent)
                fresh.server.receive(decoded)
                accepted += 1
            except FedPrivacyError:
                pass
    # most flips hit key bytes or ciphertexts, which parse; none may raise an untyped error
    assert accepted > 0
