"""A client's state and the round's parameters through bytes, between every two stages."""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.errors import ParameterError
from fedprivacy.secagg import (
    AggregationResult,
    MalformedMessageError,
    SecAggClient,
    SecAggError,
    SecAggParameters,
    SecAggServer,
    WrongRoundError,
    decode_params,
    dump_client,
    encode_params,
    load_client,
)
from fedprivacy.secagg.messages import MaskedInput, Message, ShareDelivery, encode_message
from fedprivacy.secagg.snapshot import ClientStage

D = 12
Clients = dict[int, SecAggClient]
# the documented layouts' fixed parts
PARAMS_HEADER = struct.Struct(">4sB16sQQIddBBII")
STATE_HEADER = struct.Struct(">4sB16sQIB32s")
STAGE_OFFSET = 4 + 1 + 16 + 8 + 4


def make_params(
    n: int = 5,
    *,
    degree: int | None = None,
    weighted: bool = False,
    session: bytes | None = None,
    round_index: int = 7,
    **kw: object,
) -> SecAggParameters:
    codec = FixedPointCodec.for_sum(1.0, n, 32)
    return SecAggParameters.create(
        session or os.urandom(16),
        round_index,
        range(10, 10 + n),
        D,
        codec,
        degree=degree,
        weighted=weighted,
        graph_seed=b"graph",
        **kw,  # type: ignore[arg-type]
    )


def through_bytes(params: SecAggParameters, clients: Clients) -> Clients:
    """Every client dumped and restored, with the parameters as they would arrive in a message."""
    wire = encode_params(params)
    out = {}
    for u, c in clients.items():
        data = dump_client(c)
        restored = load_client(decode_params(wire), data, user=u)
        assert restored.stage is c.stage and restored.seconds == c.seconds
        assert dump_client(restored) == data  # the encoding is canonical
        out[u] = restored
    return out


class HandRound:
    """A round stepped by hand; ``hop`` runs on the clients before and after every stage."""

    def __init__(
        self,
        params: SecAggParameters,
        hop: Callable[[Clients], Clients] = lambda c: c,
        *,
        drop_before_input: frozenset[int] = frozenset(),
        seed: int = 0,
    ) -> None:
        self.params, self.hop, self.seed = params, hop, seed
        rng = np.random.default_rng(seed)
        self.updates = {u: rng.uniform(-1, 1, D) for u in params.participants}
        self.weights = {u: float(rng.uniform(0.1, 1.0)) for u in params.participants}
        self.drop = drop_before_input
        self.server = SecAggServer(params)
        self.clients = hop({u: SecAggClient(params, u) for u in params.participants})
        self.sent: list[dict[int, Message]] = []  # the server's messages, stage by stage

    def exchange(self, replies: dict[int, Message]) -> None:
        for reply in replies.values():
            self.server.receive(encode_message(reply))
        self.clients = self.hop(self.clients)

    def masked(self, client: SecAggClient, u: int, delivery: ShareDelivery | bytes) -> MaskedInput:
        """``client``'s masked input, with ``u``'s update, weight and rounding randomness."""
        rng = np.random.default_rng([self.seed, u])
        weight = self.weights[u] if self.params.weighted else None
        return client.masked_input(delivery, self.updates[u], weight=weight, rng=rng)

    def keys(self) -> None:
        self.exchange({u: c.advertise_keys() for u, c in self.clients.items()})

    def shares(self) -> None:
        self.sent.append(self.server.finish_keys())
        self.exchange(
            {u: self.clients[u].share_keys(encode_message(m)) for u, m in self.sent[-1].items()}
        )

    def inputs(self) -> None:
        self.sent.append(self.server.finish_shares())
        self.exchange(
            {
                u: self.masked(self.clients[u], u, encode_message(m))
                for u, m in self.sent[-1].items()
                if u not in self.drop
            }
        )

    def unmask(self) -> AggregationResult:
        self.sent.append(self.server.finish_inputs())
        self.exchange({u: self.clients[u].unmask(m) for u, m in self.sent[-1].items()})
        return self.server.finish_unmask()

    def run(self) -> AggregationResult:
        self.keys(), self.shares(), self.inputs()
        return self.unmask()

    def expected_integers(self, users: tuple[int, ...]) -> np.ndarray:
        """The exact quantised sum, replaying each client's rounding randomness."""
        total = np.zeros(self.params.vector_length, dtype=np.int64)
        for u in users:
            values = self.updates[u]
            if self.params.weighted:
                values = np.append(values * self.weights[u], self.weights[u])
            total += self.params.codec.quantize(values, np.random.default_rng([self.seed, u]))
        return total


# ---------------------------------------------------------------- (a) full rounds through bytes
@pytest.mark.parametrize(
    ("n", "degree", "weighted", "drop"),
    [
        (5, None, False, frozenset()),
        (6, 2, False, frozenset()),
        (5, None, True, frozenset()),
        (5, None, False, frozenset({12})),
        (8, 4, False, frozenset({13})),
        (7, None, True, frozenset({10, 16})),
    ],
    ids=["secagg", "secagg+", "weighted", "secagg-dropout", "secagg+-dropout", "weighted-dropouts"],
)
def test_round_with_every_client_through_bytes_after_every_stage(
    n: int, degree: int | None, weighted: bool, drop: frozenset[int]
) -> None:
    params = make_params(n, degree=degree, weighted=weighted)
    hops = [0]

    def hop(clients: Clients) -> Clients:
        hops[0] += 1
        return through_bytes(params, clients)

    r = HandRound(params, hop, drop_before_input=drop, seed=n)
    result = r.run()
    assert hops[0] == 5  # after construction and after each of the four stages
    assert set(result.aggregated) == set(params.participants) - drop
    exact = r.expected_integers(result.aggregated)
    np.testing.assert_array_equal(params.codec.decode_integers(result.field_sum), exact)
    plain = HandRound(params, drop_before_input=drop, seed=n).run()  # same rounding, no bytes
    np.testing.assert_array_equal(result.field_sum, plain.field_sum)
    for u, c in r.clients.items():
        assert c.stage is (ClientStage.SHARED if u in drop else ClientStage.DONE)
        assert set(c.seconds) <= {"advertise_keys", "share_keys", "masked_input", "unmask"}
        assert len(c.seconds) == (2 if u in drop else 4)


def test_restored_client_answers_exactly_like_the_original() -> None:
    params = make_params(6, degree=2, weighted=True)
    r = HandRound(params)
    twins = through_bytes(params, r.clients)
    adverts = {u: c.advertise_keys() for u, c in r.clients.items()}
    for u, advert in adverts.items():
        assert twins[u].advertise_keys() == advert  # same public keys and seed commitment
    r.exchange(adverts)
    r.shares()
    twins = through_bytes(params, r.clients)
    deliveries = r.server.finish_shares()
    replies: dict[int, Message] = {}
    for u, c in r.clients.items():
        replies[u] = mine = r.masked(c, u, deliveries[u])
        twin = r.masked(twins[u], u, deliveries[u])
        np.testing.assert_array_equal(twin.vector, mine.vector)  # same masks
    r.exchange(replies)
    twins = through_bytes(params, r.clients)
    requests = r.server.finish_inputs()
    for u, c in r.clients.items():
        assert twins[u].unmask(requests[u]) == c.unmask(requests[u])  # same held shares


# ---------------------------------------------------------------- (b) bound to its round
def test_state_is_bound_to_session_round_user_and_parameters() -> None:
    params = make_params(7, degree=4)
    r = HandRound(params)
    r.keys(), r.shares()
    data = dump_client(r.clients[12])
    assert load_client(params, data, user=12).user == 12
    same = dataclasses.replace  # a copy with one field changed, everything else equal
    others = {
        "next round": same(params, round_index=8),
        "another session": same(params, session_id=os.urandom(16)),
        "another threshold": same(params, threshold=params.threshold - 1),
        "another graph": same(params, graph_seed=b"other graph"),
        "another codec": same(params, codec=FixedPointCodec.for_sum(1.0, 7, 48)),
        "weighted": same(params, weighted=True),
        "user not a participant": same(params, participants=(10, 11, 13, 14, 15, 16, 17)),
    }
    for what, other in others.items():
        with pytest.raises(WrongRoundError) as info:
            load_client(other, data)
        assert info.type is WrongRoundError, what
    with pytest.raises(WrongRoundError, match="round 7 of another session or round"):
        load_client(others["next round"], data)
    with pytest.raises(WrongRoundError, match="not a participant"):
        load_client(others["user not a participant"], data)
    with pytest.raises(WrongRoundError, match="other parameters"):
        load_client(others["another graph"], data)
    with pytest.raises(WrongRoundError, match="not of user 11"):
        load_client(params, data, user=11)


# ---------------------------------------------------------------- (c) malformed state
def dumps_at_every_stage() -> dict[ClientStage, bytes]:
    params = make_params(5)
    out: dict[ClientStage, bytes] = {}

    def record(clients: Clients) -> Clients:
        c = clients[11]
        out[c.stage] = dump_client(c)
        return clients

    HandRound(params, record).run()
    assert set(out) == set(ClientStage)
    return out


DUMPS = dumps_at_every_stage()


def params_for(data: bytes) -> SecAggParameters:
    """The parameters a dumped state was written with (rebuilt from its header)."""
    _, _, session, round_index, *_ = STATE_HEADER.unpack_from(data)
    return make_params(5, session=session, round_index=round_index)


@pytest.mark.parametrize("stage", list(ClientStage), ids=lambda s: s.name)
def test_every_truncation_and_trailing_bytes_are_malformed(stage: ClientStage) -> None:
    data = DUMPS[stage]
    params = params_for(data)
    assert load_client(params, data).stage is stage
    for end in range(len(data)):
        with pytest.raises(MalformedMessageError):
            load_client(params, data[:end])
    for extra in (b"\x00", b"\x01" * 5):
        with pytest.raises(MalformedMessageError, match="trailing"):
            load_client(params, data + extra)


def test_held_shares_are_parsed_strictly() -> None:
    data = DUMPS[ClientStage.MASKED]
    params = params_for(data)
    neighbours = len(params.neighbours[11])
    first_share = STATE_HEADER.size + 96 + 4 + 68 * neighbours + 4 + 4 + 2
    bad_value = data[: first_share + 8] + b"\xff\xff\xff\xff" + data[first_share + 12 :]
    with pytest.raises(MalformedMessageError, match="bad share of b"):
        load_client(params, bad_value)
    order = first_share - 6  # the first owner's id, now above the second's
    swapped = data[:order] + struct.pack(">I", 99) + data[order + 4 :]
    with pytest.raises(MalformedMessageError):
        load_client(params, swapped)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda b: b"FPSA" + b[4:], "bad magic"),
        (lambda b: b[:4] + bytes([1]) + b[5:], "unsupported version"),
        (lambda b: b[:STAGE_OFFSET] + bytes([9]) + b[STAGE_OFFSET + 1 :], "unknown client stage"),
        (lambda b: b[:STAGE_OFFSET] + bytes([2]) + b[STAGE_OFFSET + 1 :], "held shares"),
        (lambda b: b[:STAGE_OFFSET] + bytes([1]) + b[STAGE_OFFSET + 1 :], "neighbour keys"),
    ],
    ids=["magic", "version", "stage", "shares-in-stage-2", "keys-in-stage-1"],
)
def test_bad_header_is_malformed(mutate: Callable[[bytes], bytes], match: str) -> None:
    data = DUMPS[ClientStage.MASKED]
    with pytest.raises(MalformedMessageError, match=match):
        load_client(params_for(data), mutate(data))


def test_non_bytes_state_is_malformed() -> None:
    with pytest.raises(MalformedMessageError, match="expected bytes"):
        load_client(make_params(), "FPSS")  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stage=st.sampled_from(list(ClientStage)),
    where=st.floats(0, 1, exclude_max=True),
    flip=st.integers(1, 255),
)
def test_any_corrupted_byte_loads_or_raises_a_secagg_error(
    stage: ClientStage, where: float, flip: int
) -> None:
    data = bytearray(DUMPS[stage])
    data[int(where * len(data))] ^= flip
    try:
        load_client(params_for(DUMPS[stage]), bytes(data))
    except SecAggError:
        pass  # a key's or seed's bytes may change unnoticed: the format cannot tell


# ---------------------------------------------------------------- (d) replays after a restore
def outcome(call: Callable[[], object]) -> tuple[str, str]:
    try:
        call()
    except SecAggError as exc:
        return type(exc).__name__, str(exc)
    return "accepted", ""


def test_restored_client_rejects_replays_exactly_like_the_original() -> None:
    params = make_params(5)
    r = HandRound(params)
    checked = []
    for step in (r.keys, r.shares, r.inputs, r.unmask):
        step()
        twins = through_bytes(params, r.clients)
        for u, c in r.clients.items():
            replays: list[Callable[[SecAggClient], object]] = [lambda x: x.advertise_keys()]
            for stage, sent in enumerate(r.sent):
                msg = encode_message(sent[u])
                if stage == 0:
                    replays.append(lambda x, m=msg: x.share_keys(m))
                elif stage == 1:
                    replays.append(lambda x, m=msg, v=r.updates[u]: x.masked_input(m, v))
                else:
                    replays.append(lambda x, m=msg: x.unmask(m))
            for replay in replays:
                expected = outcome(lambda replay=replay, c=c: replay(c))
                assert expected[0] in {"DuplicateMessageError", "OutOfOrderError"}
                assert outcome(lambda replay=replay, t=twins[u]: replay(t)) == expected
                checked.append(expected[0])
    assert {"DuplicateMessageError", "OutOfOrderError"} <= set(checked)
    assert len(checked) == 5 * (1 + 2 + 3 + 4)


# ---------------------------------------------------------------- (e) parameters through bytes
@pytest.mark.parametrize(
    "params",
    [
        make_params(3),
        make_params(5, weighted=True),
        make_params(6, degree=2),
        make_params(9, degree=5, threshold=4),
        make_params(12, degree=6, ring_block=2),
        dataclasses.replace(make_params(8, degree=3), graph_seed=b"\x00" * 40),
        dataclasses.replace(make_params(4), vector_name="größe/∑", round_index=2**63 - 1),
        SecAggParameters.create(
            bytes(16), 0, [0, 5, 2**31 - 3], 1, FixedPointCodec(0.1 + 0.2, 1 / 3, 64)
        ),
    ],
    ids=["n3", "weighted", "degree2", "degree5-t4", "ring-block", "seed", "name", "extremes"],
)
def test_parameters_round_trip_exactly(params: SecAggParameters) -> None:
    data = encode_params(params)
    back = decode_params(data)
    assert back == params
    assert back.codec.clip == params.codec.clip and back.codec.scale == params.codec.scale
    assert back.neighbours == params.neighbours
    assert encode_params(back) == data
    for end in range(len(data)):
        with pytest.raises(MalformedMessageError):
            decode_params(data[:end])
    with pytest.raises(MalformedMessageError, match="trailing"):
        decode_params(data + b"\x00")


def test_the_encoding_covers_every_field() -> None:
    covered = {
        "session_id",
        "round_index",
        "participants",
        "threshold",
        "dimension",
        "codec",
        "weighted",
        "degree",
        "graph_seed",
        "vector_name",
        "ring_block",
        "positions",
    }
    assert {f.name for f in dataclasses.fields(SecAggParameters)} == covered
    assert {f.name for f in dataclasses.fields(FixedPointCodec)} == {"clip", "scale", "bits"}
    base = make_params(8, degree=4, ring_block=2)
    variants = [
        dataclasses.replace(base, session_id=bytes(16)),
        dataclasses.replace(base, round_index=8),
        dataclasses.replace(base, participants=tuple(range(11, 19))),
        dataclasses.replace(base, threshold=2),
        dataclasses.replace(base, dimension=D + 1),
        dataclasses.replace(base, codec=FixedPointCodec(1.0, base.codec.scale / 2, 32)),
        dataclasses.replace(base, weighted=True),
        dataclasses.replace(base, degree=5),
        dataclasses.replace(base, graph_seed=b"x"),
        dataclasses.replace(base, vector_name="bias"),
        dataclasses.replace(base, ring_block=None),
        dataclasses.replace(base, positions=tuple(range(7, -1, -1))),
    ]
    encodings = {encode_params(p) for p in [base, *variants]}
    assert len(encodings) == len(variants) + 1


def patch_params(data: bytes, **changes: object) -> bytes:
    names = "magic version session round dimension threshold clip scale bits weighted degree block"
    fields = dict(zip(names.split(), PARAMS_HEADER.unpack_from(data), strict=True))
    fields.update(changes)
    return PARAMS_HEADER.pack(*fields.values()) + data[PARAMS_HEADER.size :]


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"magic": b"FPSS"}, MalformedMessageError),
        ({"version": 0}, MalformedMessageError),
        ({"weighted": 2}, MalformedMessageError),
        ({"bits": 1}, ParameterError),
        ({"clip": float("nan")}, ParameterError),
        ({"scale": -1.0}, ParameterError),
        ({"threshold": 1}, ParameterError),
        ({"degree": 7}, ParameterError),
        ({"degree": 0}, ParameterError),  # a ring block without SecAgg+
        ({"dimension": 0}, ParameterError),
    ],
)
def test_bad_parameter_fields(changes: dict[str, object], error: type[Exception]) -> None:
    data = encode_params(make_params(6, degree=2, ring_block=2))
    assert decode_params(patch_params(data)) == decode_params(data)
    with pytest.raises(error):
        decode_params(patch_params(data, **changes))


def test_participants_out_of_order_or_a_bad_name_are_malformed() -> None:
    params = make_params(3)
    data = encode_params(params)
    start = PARAMS_HEADER.size + 4
    swapped = data[:start] + data[start + 4 : start + 8] + data[start : start + 4]
    with pytest.raises(MalformedMessageError, match="ascending"):
        decode_params(swapped + data[start + 8 :])
    name = b"update"
    assert data.endswith(struct.pack(">I", len(name)) + name)
    with pytest.raises(MalformedMessageError, match="UTF-8"):
        decode_params(data[: -len(name)] + b"\xffpdate")
    with pytest.raises(MalformedMessageError, match="expected bytes"):
        decode_params(None)  # type: ignore[arg-type]
