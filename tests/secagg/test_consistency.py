"""The consistency check: bad signatures refused, the honest round unchanged, state as bytes."""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Callable

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.signing import Roster, SigningKey, Statement
from fedprivacy.errors import ParameterError
from fedprivacy.secagg import (
    DuplicateMessageError,
    MalformedMessageError,
    OutOfOrderError,
    RoundAbortedError,
    SecAggClient,
    SecAggParameters,
    SecAggServer,
    Stage,
    UnknownSenderError,
    dump_client,
    load_client,
    run_round,
)
from fedprivacy.secagg.consistency import (
    ConsistencyCheck,
    checks_for,
    consistency_quorum,
    verify_signatures,
)
from fedprivacy.secagg.errors import ConsistencyError
from fedprivacy.secagg.messages import (
    SERVER,
    ConsistencyRequest,
    ConsistencyResponse,
    Header,
    MessageKind,
    UnmaskRequest,
    decode_message,
    encode_message,
)
from fedprivacy.secagg.server import ServerStage
from fedprivacy.secagg.snapshot import ClientStage

N, D = 10, 6
KEYS = {u: SigningKey.generate() for u in range(N)}  # the nodes' long-term keys
CHECKS = checks_for(KEYS)
ROSTER = CHECKS[0].roster
Signatures = tuple[tuple[int, bytes], ...]


def make_params(round_index: int = 0, session: bytes | None = None) -> SecAggParameters:
    codec = FixedPointCodec.for_sum(1.0, N, 32)
    return SecAggParameters.create(session or os.urandom(16), round_index, range(N), D, codec)


class Round:
    """A round with the check, stepped by hand up to the masked inputs.

    ``drop`` send no masked input; ``hide = (u, v)``: the server does not relay v's shares to u.
    """

    def __init__(
        self,
        params: SecAggParameters | None = None,
        drop: frozenset[int] = frozenset(),
        hide: tuple[int, int] | None = None,
    ) -> None:
        self.params = params or make_params()
        self.server = SecAggServer(self.params)
        self.clients = {u: SecAggClient(self.params, u, consistency=CHECKS[u]) for u in range(N)}
        self.updates = {u: np.full(D, 0.01 * (u + 1)) for u in range(N)}
        for c in self.clients.values():
            self.server.receive(encode_message(c.advertise_keys()))
        rosters = self.server.finish_keys()
        for u, c in self.clients.items():
            self.server.receive(encode_message(c.share_keys(rosters[u])))
        self.deliveries = self.server.finish_shares()
        if hide is not None:
            u, v = hide
            kept = tuple(p for p in self.deliveries[u].ciphertexts if p[0] != v)
            self.deliveries[u] = dataclasses.replace(self.deliveries[u], ciphertexts=kept)
        for u, c in self.clients.items():
            if u not in drop:
                message = c.masked_input(self.deliveries[u], self.updates[u])
                self.server.receive(encode_message(message))

    def sign(self, policy: Callable[[frozenset[int]], frozenset[int]] | None = None) -> None:
        self.server.finish_inputs(policy)
        self.asked = self.server.start_consistency(ROSTER)
        self.signatures = {}
        for u, request in self.asked.items():
            reply = self.clients[u].sign_survivors(encode_message(request))
            assert isinstance(reply, ConsistencyResponse)
            self.signatures[u] = reply.signature
            self.server.receive(encode_message(reply))

    def request(self, u: int, users: tuple[int, ...], signatures: Signatures) -> bytes:
        p = self.params
        header = Header(MessageKind.UNMASK_REQUEST, p.session_id, p.round_index, SERVER, u)
        return encode_message(UnmaskRequest(header, users, signatures))


def refused(
    client: SecAggClient, call: Callable[[], object], error: type[Exception], match: str
) -> bool:
    """``call`` raises exactly ``error`` and leaves ``client``'s state as it was."""
    before = dump_client(client)
    with pytest.raises(error, match=match) as info:
        call()
    return info.type is error and dump_client(client) == before


# ---------------------------------------------------------------- (b) bad signatures refused
def test_forged_missing_duplicate_foreign_and_replayed_signatures_are_refused() -> None:
    r = Round()
    r.sign(lambda submitted: submitted - {9})  # 9 is asked (U3) and signs S, not a member
    requests = r.server.finish_consistency()
    good = decode_message(encode_message(requests[0]))
    assert isinstance(good, UnmaskRequest)
    users, sigs = good.aggregated, good.signatures
    assert 9 in r.signatures and 9 not in users
    assert [u for u, _ in sigs] == list(range(6))  # a quorum of members, by id
    other = SigningKey.generate().sign(Statement.SURVIVORS, b"anything")
    forged = ((0, KEYS[1].sign(Statement.SURVIVORS, b"fedprivacy")),) + sigs[1:]
    garbage = ((0, b"\x30\x02\x00\x00"),) + sigs[1:]
    cases = {
        "forged": (forged, "signature of user 0 is invalid"),
        "garbage": (garbage, "signature of user 0 is invalid"),
        "another key": (((0, other),) + sigs[1:], "signature of user 0 is invalid"),
        "missing": ((), "only 0 members"),
        "too few": (sigs[:5], "only 5 members"),
        "duplicate": (sigs[:6] + sigs[:1], "user 0 signed twice"),
        "non-member": (sigs + ((9, r.signatures[9]),), "user 9, not a member"),
        "stranger": (sigs + ((42, other),), "user 42, not a member"),
    }
    c = r.clients[0]
    for what, (signatures, match) in cases.items():
        request = r.request(0, users, signatures)

        def call(m: bytes = request) -> object:
            return c.unmask(m)

        assert refused(c, call, ConsistencyError, match), what
    # a member missing from this client's own roster (never the server's copy)
    partial = Roster({u: k for u, k in ROSTER.keys.items() if u != 5})
    with pytest.raises(ConsistencyError, match="user 5 is not in the roster"):
        verify_signatures(r.params, partial, users, sigs)
    # a replay of the signatures of the same set in another round of the same session
    again = Round(make_params(1, r.params.session_id))
    again.sign(lambda submitted: submitted - {9})
    replayed = tuple(again.server.finish_consistency()[0].signatures)
    assert [u for u, _ in replayed] == list(range(6))
    assert refused(c, lambda: c.unmask(r.request(0, users, replayed)), ConsistencyError, "invalid")
    # a set other than the one signed, even with signatures of it
    all_users = tuple(range(N))
    assert refused(
        c, lambda: c.unmask(r.request(0, all_users, sigs)), ConsistencyError, "not the set"
    )
    assert c.unmask(requests[0]).shares  # the genuine request still unmasks
    assert c.stage is ClientStage.DONE


def test_a_client_signs_once_and_never_unmasks_unsigned() -> None:
    r = Round()
    c = r.clients[3]
    everyone = tuple(range(N))
    # the server skips the check: an unmask request before any signature is out of order
    assert refused(c, lambda: c.unmask(r.request(3, everyone, ())), OutOfOrderError, "CONSISTENCY")
    r.sign()
    again = r.asked[3]
    assert refused(c, lambda: c.sign_survivors(again), DuplicateMessageError, "already handled")
    other = ConsistencyRequest(again.header, everyone[1:])
    assert refused(c, lambda: c.sign_survivors(other), ConsistencyError, "already signed")
    # ... and a client without the check neither signs nor accepts a consistency request
    plain = SecAggClient(r.params, 3)
    with pytest.raises(OutOfOrderError, match="without the consistency check"):
        plain.sign_survivors(again)


def test_a_client_refuses_to_sign_a_set_naming_a_user_whose_shares_it_never_got() -> None:
    """The server hides 7's shares from 0 (0 masks without 7) yet aggregates 7: 0 refuses."""
    r = Round(hide=(0, 7))
    r.server.finish_inputs()
    asked = r.server.start_consistency(ROSTER)
    c = r.clients[0]
    assert refused(c, lambda: c.sign_survivors(asked[0]), ConsistencyError, "user 7, whose shares")


def test_the_server_verifies_every_signature_on_arrival() -> None:
    r = Round(drop=frozenset({8}))
    early = ConsistencyResponse(
        Header(MessageKind.CONSISTENCY_RESPONSE, r.params.session_id, 0, 1, SERVER), b"x"
    )
    r.server.finish_inputs()
    with pytest.raises(OutOfOrderError, match="no consistency check"):
        r.server.receive(early)
    asked = r.server.start_consistency(ROSTER)
    assert sorted(asked) == [u for u in range(N) if u != 8]
    with pytest.raises(OutOfOrderError, match="already started"):
        r.server.start_consistency(ROSTER)
    replies = {u: r.clients[u].sign_survivors(m) for u, m in asked.items()}
    bad = dataclasses.replace(replies[1], signature=replies[2].signature)
    with pytest.raises(ConsistencyError, match="user 1 is invalid"):
        r.server.receive(encode_message(bad))
    stranger = dataclasses.replace(replies[1], header=dataclasses.replace(early.header, sender=8))
    with pytest.raises(UnknownSenderError, match="not asked"):
        r.server.receive(stranger)
    for u in (1, 2, 3, 4, 5):
        r.server.receive(encode_message(replies[u]))
    with pytest.raises(DuplicateMessageError):
        r.server.receive(replies[1])
    with pytest.raises(RoundAbortedError, match="only 5 members .* needs 6"):
        r.server.finish_consistency()
    assert r.server.stage is ServerStage.ABORTED


def test_only_the_signers_are_asked_to_unmask() -> None:
    r = Round()
    r.server.finish_inputs()
    asked = r.server.start_consistency(ROSTER)
    for u in range(7):  # 7, 8 and 9 never answer the consistency request
        r.server.receive(r.clients[u].sign_survivors(asked[u]))
    requests = r.server.finish_consistency()
    assert sorted(requests) == list(range(7))
    assert all([u for u, _ in m.signatures] == list(range(6)) for m in requests.values())
    with pytest.raises(OutOfOrderError):
        r.server.finish_consistency()
    for u, m in requests.items():
        r.server.receive(r.clients[u].unmask(m))
    result = r.server.finish_unmask()
    assert result.aggregated == tuple(range(N))
    expected = sum(r.updates[u] for u in range(N))
    np.testing.assert_allclose(result.total, expected, atol=N / r.params.codec.scale)


def test_material_must_match_the_user() -> None:
    params = make_params()
    with pytest.raises(ParameterError, match="not this signing key"):
        SecAggClient(params, 1, consistency=ConsistencyCheck(KEYS[2], ROSTER))
    with pytest.raises(ParameterError, match="no key of user 1"):
        SecAggClient(params, 1, consistency=ConsistencyCheck(KEYS[1], Roster({})))


# ---------------------------------------------------------------- (c) the honest round
@pytest.mark.parametrize(
    "dropouts",
    [{}, {2: Stage.MASKED_INPUT}, {3: Stage.UNMASK, 4: Stage.SHARE_KEYS}],
    ids=["none", "before-input", "before-unmask"],
)
def test_the_honest_round_gives_the_same_aggregate(dropouts: dict[int, Stage]) -> None:
    params = make_params()
    updates = {u: np.random.default_rng(u).uniform(-1, 1, D) for u in range(N)}
    views: list[SecAggServer] = []

    def run(keys: dict[int, SigningKey] | None) -> np.ndarray:
        rngs = {u: np.random.default_rng([7, u]) for u in range(N)}
        out = run_round(
            params, updates, dropouts=dropouts, rngs=rngs, observer=views.append, signing_keys=keys
        )
        return out.result.sum

    plain, checked = run(None), run(KEYS)
    np.testing.assert_array_equal(plain, checked)
    aggregated = frozenset(u for u in range(N) if dropouts.get(u, Stage.UNMASK) >= Stage.UNMASK)
    assert [s.view().components for s in views] == [(aggregated,)] * 2


def test_run_round_needs_a_key_for_every_participant() -> None:
    params = make_params()
    updates = {u: np.zeros(D) for u in range(N)}
    with pytest.raises(ParameterError, match="signing_keys"):
        run_round(params, updates, signing_keys={u: KEYS[u] for u in range(5)})


def test_quorum_is_a_strict_majority_and_at_least_t() -> None:
    params = make_params()
    assert (params.threshold, consistency_quorum(params)) == (6, 6)
    assert consistency_quorum(dataclasses.replace(params, threshold=4)) == 6
    assert consistency_quorum(dataclasses.replace(params, threshold=8)) == 8


# ---------------------------------------------------------------- state and messages
def test_the_signed_set_survives_the_state_bytes() -> None:
    r = Round()
    r.server.finish_inputs(lambda submitted: submitted - {9})
    asked = r.server.start_consistency(ROSTER)
    c = r.clients[0]
    unsigned = dump_client(c)
    # the check on, no removable noise, fresh keys, no model digest
    assert unsigned[-4:] == bytes([1, 0, 0, 0])
    restored = load_client(r.params, unsigned, user=0, consistency=CHECKS[0])
    r.server.receive(restored.sign_survivors(asked[0]))
    signed = dump_client(restored)
    assert signed[-44:] == bytes([2]) + struct.pack(">10I", 9, *range(9)) + bytes([0, 0, 0])
    again = load_client(r.params, signed, user=0, consistency=CHECKS[0])
    assert dump_client(again) == signed  # canonical
    everyone = ConsistencyRequest(asked[0].header, tuple(range(N)))
    assert refused(
        again, lambda: again.sign_survivors(everyone), ConsistencyError, "already signed"
    )
    with pytest.raises(ConsistencyError, match="written with the consistency check"):
        load_client(r.params, signed, user=0)
    with pytest.raises(ConsistencyError, match="without the consistency check"):
        load_client(r.params, dump_client(SecAggClient(r.params, 0)), consistency=CHECKS[0])
    with pytest.raises(ParameterError, match="not this signing key"):
        load_client(r.params, signed, consistency=CHECKS[1])
    for u in range(1, N):
        r.server.receive(r.clients[u].sign_survivors(asked[u]))
    requests = r.server.finish_consistency()
    assert again.unmask(requests[0]).shares
    done = dump_client(again)
    assert load_client(r.params, done, consistency=CHECKS[0]).stage is ClientStage.DONE


def test_the_signed_set_is_parsed_strictly() -> None:
    r = Round()
    r.sign()
    full = dump_client(r.clients[4])
    assert full[-3:] == bytes([0, 0, 0])  # no removable noise, fresh keys, no model digest
    data, tail = full[:-3], full[-3:]
    params = r.params
    for end in range(len(full) - 48, len(full)):
        with pytest.raises(MalformedMessageError):
            load_client(params, full[:end], consistency=CHECKS[4])
    bad = {
        "flag": data[:-45] + bytes([3]) + data[-44:] + tail,
        "order": data[:-8] + data[-4:] + data[-8:-4] + tail,
        "empty": data[:-45] + bytes([2]) + struct.pack(">I", 0) + tail,
        "stranger": data[:-4] + struct.pack(">I", 99) + tail,
        "trailing": full + b"\x00",
        "noise flag": data + bytes([2, 0, 0]),
        "reused keys flag": data + bytes([0, 2, 0]),
        "model digest length": data + bytes([0, 0, 5]) + bytes(5),
    }
    for what, mutated in bad.items():
        with pytest.raises(MalformedMessageError):
            load_client(params, mutated, consistency=CHECKS[4])
        assert what
    server = SecAggServer(params)
    fresh = {u: SecAggClient(params, u, consistency=CHECKS[u]) for u in range(N)}
    for c in fresh.values():
        server.receive(c.advertise_keys())
    rosters = server.finish_keys()
    fresh[4].share_keys(rosters[4])
    early = dump_client(fresh[4])[:-4] + data[-45:] + tail  # a signed set in stage SHARED
    with pytest.raises(MalformedMessageError, match="signed aggregated set in stage SHARED"):
        load_client(params, early, consistency=CHECKS[4])


def test_messages_round_trip_and_an_unsigned_request_is_encoded_as_before() -> None:
    header = Header(MessageKind.UNMASK_REQUEST, bytes(16), 3, SERVER, 1)
    plain = UnmaskRequest(header, (1, 2, 3))
    data = encode_message(plain)
    assert data[-16:] == struct.pack(">4I", 3, 1, 2, 3)  # the pre-check layout, nothing after
    signed = UnmaskRequest(header, (1, 2, 3), ((1, b"sig-1"), (2, b"sig-2")))
    ask = ConsistencyRequest(
        dataclasses.replace(header, kind=MessageKind.CONSISTENCY_REQUEST), (1,)
    )
    reply = ConsistencyResponse(
        Header(MessageKind.CONSISTENCY_RESPONSE, bytes(16), 3, 1, SERVER), b"\x30" * 70
    )
    for message in (plain, signed, ask, reply):
        assert decode_message(encode_message(message)) == message
    with pytest.raises(MalformedMessageError, match="empty signature list"):
        decode_message(data + struct.pack(">I", 0))
    with pytest.raises(MalformedMessageError):
        decode_message(encode_message(signed)[:-1])
