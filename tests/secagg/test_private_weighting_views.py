"""What each party sees: the server only uniform blinded values, the silos only ciphertexts."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from scipy import stats

from fedprivacy.crypto.paillier import PaillierPrivateKey, generate_keypair
from fedprivacy.secagg.private_weighting import (
    PrivateWeightingParameters,
    PrivateWeightingServer,
    PrivateWeightingSilo,
    run_round,
    run_setup,
)
from fedprivacy.secagg.private_weighting.messages import (
    BlindedHistogram,
    DhPublicKey,
    MaskedUpdate,
    MessageKind,
    SeedShares,
    decode_message,
)

BITS = 768


@pytest.fixture(scope="module")
def key() -> PaillierPrivateKey:
    return generate_keypair(BITS, insecure_small_key=True)


def parties(
    key: PaillierPrivateKey, hist: np.ndarray, n_params: int = 3, **kw: object
) -> tuple[PrivateWeightingServer, list[PrivateWeightingSilo]]:
    params = PrivateWeightingParameters(
        session_id=os.urandom(16),
        n_silos=hist.shape[0],
        n_users=hist.shape[1],
        n_params=n_params,
        clip_bound=1.0,
        noise_bound=10.0,
        key_bits=BITS,
        insecure_small_key=True,
        n_max=100,
        **kw,  # type: ignore[arg-type]
    )
    server = PrivateWeightingServer(params, private_key=key)
    silos = [PrivateWeightingSilo(params, s, hist[s]) for s in range(hist.shape[0])]
    return server, silos


def server_view(key: PaillierPrivateKey, hist: np.ndarray) -> tuple[list[int], list[int]]:
    """One setup: the blinded histograms B'(n_su) and the totals B(N_u) the server sees."""
    server, silos = parties(key, hist)
    received: list[int] = []
    original = server.receive

    def spy(message):  # type: ignore[no-untyped-def]
        msg = decode_message(message) if isinstance(message, bytes) else message
        if isinstance(msg, BlindedHistogram):
            received.extend(msg.values)
        original(message)

    server.receive = spy  # type: ignore[method-assign]
    run_setup(server, silos)
    return received, list(server.blinded_totals)


def test_server_view_is_uniform_and_independent_of_the_histogram(key: PaillierPrivateKey) -> None:
    n = key.public_key.n
    a = np.array([[1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]])  # N_u = 1
    b = np.array([[90, 3, 0, 7], [5, 60, 2, 0], [1, 0, 97, 20]])  # very different counts
    views: dict[str, dict[str, list[float]]] = {}
    for name, hist in (("a", a), ("b", b)):
        blinded, totals = [], []
        for _ in range(60):
            h, t = server_view(key, hist)
            blinded += [v / n for v in h]
            totals += [v / n for v in t]
        views[name] = {"blinded": blinded, "totals": totals}
    for name in ("a", "b"):
        for what in ("blinded", "totals"):
            # each entry uniform on [0, 1) after dividing by n (Z_n^* is all of Z_n but a
            # negligible fraction)
            assert stats.kstest(views[name][what], "uniform").pvalue > 1e-4, (name, what)
    for what in ("blinded", "totals"):
        # the two histograms give the same distribution of views
        assert stats.ks_2samp(views["a"][what], views["b"][what]).pvalue > 1e-4
    # the test has power: the unblinded totals (N_u / n) are nowhere near uniform
    assert stats.kstest([c / n for c in b.sum(axis=0)] * 60, "uniform").pvalue < 1e-10


@pytest.mark.parametrize("modulus", [15, 77, 221])
def test_blinding_is_a_bijection_on_units(modulus: int) -> None:
    """Proof-style: for every N coprime to n, r -> r N mod n permutes Z_n^*, so B(N_u) = r_u N_u is
    uniform on Z_n^* when r_u is, whatever N_u (Theorem 5)."""
    units = {r for r in range(1, modulus) if math.gcd(r, modulus) == 1}
    for total in range(1, 60):
        if math.gcd(total, modulus) == 1:
            assert {r * total % modulus for r in units} == units


def test_silos_see_only_ciphertexts_and_public_keys(key: PaillierPrivateKey) -> None:
    hist = np.array([[3, 0, 5], [1, 4, 0], [2, 2, 2]])
    for subsampling in (False, True):
        server, silos = parties(key, hist, subsampling=subsampling)
        run_setup(server, silos)
        rng = np.random.default_rng(0)
        deltas = [rng.uniform(-1, 1, size=(3, 3)) for _ in range(3)]
        sampled = np.array([True, False, True]) if subsampling else None
        for r in range(2):
            run_round(server, silos, r, deltas, 0.5, sampled)
        n, n2 = key.public_key.n, key.public_key.n_square
        totals = server.blinded_totals
        inverses = [pow(t, -1, n) for t in totals]
        for silo in silos:
            kinds = {m.header.kind for m in silo.received}
            assert kinds == {
                MessageKind.PAILLIER_KEY,
                MessageKind.DH_ROSTER,
                MessageKind.SEED_DELIVERY,
                MessageKind.ENCRYPTED_WEIGHTS,
            }
            rounds = [m for m in silo.received if m.header.kind is MessageKind.ENCRYPTED_WEIGHTS]
            for message in rounds:
                for u, c in enumerate(message.ciphertexts):  # type: ignore[union-attr]
                    assert 0 < c < n2 and math.gcd(c, n) == 1
                    assert c % n != 1  # randomised, not the trivial encryption 1 + m n
                    assert c not in totals and c not in inverses
                    want = inverses[u] if sampled is None or sampled[u] else 0
                    assert key.decrypt(c) == want  # it is the weight, under the server's key
            first, second = (m.ciphertexts for m in rounds)  # type: ignore[union-attr]
            # without sub-sampling the weights never change and are reused; with it they are
            # fresh every round, so a silo cannot tell which users are sampled
            assert (first == second) == (not subsampling)


def test_seed_travels_only_under_aes_gcm(key: PaillierPrivateKey) -> None:
    hist = np.array([[1, 2], [3, 4], [5, 6]])
    server, silos = parties(key, hist)
    seed = os.urandom(32)
    silos[0]._seed_source = lambda k: seed
    log: list[bytes] = []
    run_setup(server, silos, transcript=log)
    run_round(server, silos, 0, [np.zeros((2, 3))] * 3, 0.5, transcript=log)
    assert len(log) == 3 * 5 + 1 + 3 * 2 and all(seed not in data for data in log)
    shares = [m for m in map(decode_message, log) if isinstance(m, SeedShares)]
    assert len(shares) == 1 and shares[0].header.sender == 0
    assert sorted(r for r, _ in shares[0].ciphertexts) == [1, 2]
    keys = [m for m in map(decode_message, log) if isinstance(m, DhPublicKey)]
    assert len(keys) == 3


def test_server_sees_masked_rerandomised_updates(key: PaillierPrivateKey) -> None:
    hist = np.array([[2, 1], [1, 3]])
    server, silos = parties(key, hist, n_params=4)
    run_setup(server, silos)
    updates: list[MaskedUpdate] = []
    original = server.receive

    def spy(message):  # type: ignore[no-untyped-def]
        msg = decode_message(message) if isinstance(message, bytes) else message
        if isinstance(msg, MaskedUpdate):
            updates.append(msg)
        original(message)

    server.receive = spy  # type: ignore[method-assign]
    deltas = [np.full((2, 4), 0.5), np.full((2, 4), -0.25)]
    a = run_round(server, silos, 0, deltas, 0.0).aggregate
    b = run_round(server, silos, 1, deltas, 0.0).aggregate
    np.testing.assert_array_equal(a, b)
    n = key.public_key.n
    params = server.params
    for first, second in zip(updates[:2], updates[2:], strict=True):
        assert first.ciphertexts != second.ciphertexts  # same inputs, new masks and randomness
        for c1, c2 in zip(first.ciphertexts, second.ciphertexts, strict=True):
            m1, m2 = key.decrypt(c1), key.decrypt(c2)
            assert m1 != m2  # the per-silo plaintexts are masked differently each round
            # and they are not the silo's own weighted sum (up to sign), which is small
            assert min(m1, n - m1).bit_length() > params.plaintext_bound().bit_length()
