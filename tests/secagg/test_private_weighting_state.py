"""A silo's state as bytes: Protocol 1 with every silo restored from bytes between messages."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedprivacy.crypto.paillier import PaillierPrivateKey, generate_keypair
from fedprivacy.secagg.private_weighting import PrivateWeightingServer, PrivateWeightingSilo
from fedprivacy.secagg.private_weighting.errors import (
    MalformedMessageError,
    OutOfOrderError,
    WrongSessionError,
)
from fedprivacy.secagg.private_weighting.messages import encode_message
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters
from fedprivacy.secagg.private_weighting.silo_setup import SiloStage
from fedprivacy.secagg.private_weighting.state import (
    decode_params,
    dump_silo,
    encode_params,
    load_silo,
)

BITS = 512
HIST = np.array([[2, 0, 1, 3], [1, 4, 0, 3], [0, 1, 2, 1]])


@pytest.fixture(scope="module")
def key() -> PaillierPrivateKey:
    return generate_keypair(BITS, insecure_small_key=True)


def _params(**kw: object) -> PrivateWeightingParameters:
    base: dict[str, object] = dict(
        session_id=bytes(range(16)),
        n_silos=3,
        n_users=4,
        n_params=5,
        clip_bound=1.0,
        noise_bound=1.0,
        key_bits=BITS,
        n_max=12,
        insecure_small_key=True,
    )
    base.update(kw)
    return PrivateWeightingParameters(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw", [{}, {"subsampling": True}, {"rerandomise": False, "precision": 1e-6}]
)
def test_parameters_round_trip(kw: dict[str, object]) -> None:
    p = _params(**kw)
    assert decode_params(encode_params(p)) == p


def test_malformed_parameters_are_refused() -> None:
    data = encode_params(_params())
    for bad in (data[:-1], data + b"\x00", b"XXXX" + data[4:], data[:-1] + b"\x08"):
        with pytest.raises(MalformedMessageError):
            decode_params(bad)


def _restored(
    params: PrivateWeightingParameters, silo: PrivateWeightingSilo
) -> PrivateWeightingSilo:
    return load_silo(params, dump_silo(silo), silo=silo.silo)


def test_a_session_whose_silos_live_only_as_bytes_aggregates_exactly(
    key: PaillierPrivateKey,
) -> None:
    params = _params()
    server = PrivateWeightingServer(params, private_key=key)
    states = [dump_silo(PrivateWeightingSilo(params, s, HIST[s])) for s in range(3)]

    def step(s: int, method: str, *args: object) -> Any:
        silo = load_silo(params, states[s], silo=s)  # a fresh process for every message
        out = getattr(silo, method)(*args)
        states[s] = dump_silo(silo)
        return out

    keys = server.start_setup()
    for s in range(3):
        server.receive(encode_message(step(s, "on_paillier_key", keys[s])))
    rosters = server.finish_keys()
    for s in range(3):
        shares = step(s, "on_roster", rosters[s])
        if shares is not None:
            server.receive(encode_message(shares))
    deliveries = server.finish_seed()
    for s in range(3):
        step(s, "on_seed_delivery", deliveries[s])
        server.receive(encode_message(step(s, "blinded_histogram")))
    server.finish_histograms()
    rng = np.random.default_rng(0)
    w = HIST / HIST.sum(axis=0, keepdims=True)
    for r in (1, 2):
        deltas = [np.round(rng.uniform(-1, 1, (4, 5)), 6) for _ in range(3)]
        weights = server.start_round(r)
        for s in range(3):
            server.receive(encode_message(step(s, "on_weights", weights[s], deltas[s], 0.0)))
        out = server.finish_round()
        expected = sum(w[s] @ deltas[s] for s in range(3))
        np.testing.assert_allclose(out, expected, atol=4 * 1e-10)
    # a restored silo refuses a replay of the last round's weights, as the original would
    with pytest.raises(OutOfOrderError):
        step(0, "on_paillier_key", keys[0])


def test_state_of_another_session_or_silo_is_refused() -> None:
    params = _params()
    data = dump_silo(PrivateWeightingSilo(params, 1, HIST[1]))
    with pytest.raises(WrongSessionError):
        load_silo(params, data, silo=2)
    with pytest.raises(WrongSessionError):
        load_silo(_params(session_id=bytes(16)), data, silo=1)
    with pytest.raises(WrongSessionError):  # same session, other parameters (noise bound)
        load_silo(_params(noise_bound=2.0), data, silo=1)


def test_malformed_or_inconsistent_state_is_refused(key: PaillierPrivateKey) -> None:
    params = _params()
    silo = PrivateWeightingSilo(params, 0, HIST[0])
    data = dump_silo(silo)
    for bad in (data[:-1], data + b"\x00", data[:25] + b"\x09" + data[26:]):
        with pytest.raises(MalformedMessageError):
            load_silo(params, bad, silo=0)
    # stage READY without the scalars k_u is impossible
    forged = data[:25] + bytes([int(SiloStage.READY)]) + data[26:]
    with pytest.raises(MalformedMessageError):
        load_silo(params, forged, silo=0)


def test_the_state_keeps_the_private_key_and_restores_the_same_public_key() -> None:
    params = _params()
    silo = PrivateWeightingSilo(params, 2, HIST[2])
    again = _restored(params, silo)
    assert again._keypair.public_bytes == silo._keypair.public_bytes
    assert again.stage is SiloStage.NEW and again.last_round is None
