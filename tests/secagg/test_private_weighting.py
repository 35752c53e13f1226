"""Protocol 1 end to end: equality with the plaintext ULDP-AVG-w aggregate, and every guard."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest

from fedprivacy.crypto.paillier import PaillierPrivateKey, generate_keypair
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting import (
    AggregateOutOfRangeError,
    NotInvertibleError,
    PlaintextRangeError,
    PrivateWeightingParameters,
    PrivateWeightingServer,
    PrivateWeightingSilo,
    RecordLimitError,
    SecureWeighting,
    WrongRoundError,
    largest_feasible_n_max,
    lcm_upto,
    run_round,
    run_setup,
)
from fedprivacy.secagg.private_weighting.encoding import signed
from fedprivacy.secagg.private_weighting.randomness import UniformSampler, check_unit

BITS = 1024
P = 1e-10


STD = 3.0  # each silo's noise standard deviation (noise_bound 100 >= 16 STD)


@pytest.fixture(scope="module")
def key() -> PaillierPrivateKey:
    return generate_keypair(BITS, insecure_small_key=True)


def random_inputs(
    rng: np.random.Generator, silos: int, users: int, params: int, clip: float = 1.0
) -> list[np.ndarray]:
    return [rng.uniform(-clip, clip, size=(users, params)) for _ in range(silos)]


def exact_fixed_point(
    sw: SecureWeighting,
    hist: np.ndarray,
    deltas: list[np.ndarray],
    sampled: np.ndarray | None,
    precision: float,
) -> np.ndarray:
    """Theorem 4's decoded value with exact rationals: (sum w E + sum Z / C_LCM) * P.

    ``Z`` is the integer noise each silo reports it drew (in plaintext units ``P / C_LCM``).
    """
    silos, users = hist.shape
    totals = hist.sum(axis=0)
    keep = np.ones(users, dtype=bool) if sampled is None else sampled
    c_lcm = sw.params.c_lcm
    noise = [silo.last_noise for silo in sw.silos]
    out = []
    for j in range(deltas[0].shape[1]):
        acc = Fraction(0)
        for s in range(silos):
            z = noise[s]
            assert z is not None
            acc += Fraction(z[j], c_lcm)
            for u in range(users):
                if keep[u] and hist[s, u]:
                    e = int(np.rint(deltas[s][u, j] / precision))
                    acc += Fraction(e * int(hist[s, u]), int(totals[u]))
        out.append(float(acc) * precision)
    return np.array(out)


def make_session(key: PaillierPrivateKey, hist: np.ndarray, **kw: object) -> SecureWeighting:
    kw.setdefault("n_max", 60)
    kw.setdefault("clip_bound", 1.0)
    kw.setdefault("noise_bound", 100.0)
    kw.setdefault("insecure_small_key", True)
    return SecureWeighting(hist, key_bits=BITS, private_key=key, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("rerandomise", [True, False])
def test_equals_plaintext_aggregate_without_subsampling(
    key: PaillierPrivateKey, rerandomise: bool
) -> None:
    rng = np.random.default_rng(0)
    silos, users, params = 3, 6, 5
    hist = rng.integers(0, 12, size=(silos, users))
    hist[0] += 1
    with make_session(key, hist, rerandomise=rerandomise) as sw:
        setup = sw.setup(params)
        assert {"key_exchange_server", "blinded_histogram_silo_mean"} <= set(setup)
        for r in range(3):
            deltas = random_inputs(rng, silos, users, params)
            agg, seconds = sw.aggregate(r, deltas, STD)
            ref = sw.plaintext_reference(deltas)
            assert np.max(np.abs(agg - ref)) <= (users + silos) * P / 2 + 1e-15
            # bit-exact against Theorem 4's fixed-point value
            np.testing.assert_array_equal(agg, exact_fixed_point(sw, hist, deltas, None, P))
            assert {"local_encryption_silo_max", "aggregation_server"} <= set(seconds)
            assert ("rerandomisation_silo_mean" in seconds) == rerandomise


def test_equals_plaintext_aggregate_with_subsampling(key: PaillierPrivateKey) -> None:
    rng = np.random.default_rng(1)
    silos, users, params = 4, 7, 3
    hist = rng.integers(0, 9, size=(silos, users))
    hist[:, 0] = 0
    hist[2, 0] = 5  # user 0 lives in one silo only
    hist[1] += 1
    with make_session(key, hist, subsampling=True, wire=False) as sw:
        for r in (0, 4, 9):
            sampled = rng.random(users) < 0.5
            deltas = random_inputs(rng, silos, users, params)
            agg, _ = sw.aggregate(r, deltas, STD, sampled)
            ref = sw.plaintext_reference(deltas, sampled)
            assert np.max(np.abs(agg - ref)) <= (int(sampled.sum()) + silos) * P / 2 + 1e-15
            np.testing.assert_array_equal(agg, exact_fixed_point(sw, hist, deltas, sampled, P))
            # a user outside the sub-sample contributes nothing, whatever its delta
            if not sampled.all():
                u = int(np.flatnonzero(~sampled)[0])
                assert sw.weights[:, u].sum() == pytest.approx(1.0)


def test_unsampled_users_do_not_contribute(key: PaillierPrivateKey) -> None:
    rng = np.random.default_rng(2)
    hist = rng.integers(1, 5, size=(2, 4))
    sampled = np.array([True, False, True, False])
    with make_session(key, hist, subsampling=True) as sw:
        deltas = random_inputs(rng, 2, 4, 3)
        a, _ = sw.aggregate(0, deltas, 0.0, sampled)
        for d in deltas:
            d[~sampled] = rng.uniform(-1, 1, size=(2, 3))
        b, _ = sw.aggregate(1, deltas, 0.0, sampled)
        np.testing.assert_array_equal(a, b)


def test_extremes_single_silo_and_inferred_size(key: PaillierPrivateKey) -> None:
    hist = np.array([[3, 1, 50]])
    with make_session(key, hist) as sw:
        deltas = [np.array([[1.0, -1.0], [-1.0, 1.0], [0.0, -0.999999999]])]
        agg, _ = sw.aggregate(0, deltas, 100.0 / 16)  # set up lazily, n_params from the deltas
        np.testing.assert_allclose(agg, sw.plaintext_reference(deltas), atol=1e-9)
        np.testing.assert_array_equal(agg, exact_fixed_point(sw, hist, deltas, None, P))


def test_default_parameters_follow_the_paper() -> None:
    hist = np.ones((3, 10), dtype=int)
    sw = SecureWeighting(hist, n_params=16)
    params = sw._parameters(16)
    assert params.key_bits == 3072 and params.precision == 1e-10 and params.n_max == 2000
    assert params.c_lcm == lcm_upto(2000) and params.c_lcm.bit_length() == 2878
    assert not params.subsampling and params.rerandomise
    small = SecureWeighting(
        hist, key_bits=1024, insecure_small_key=True, clip_bound=1.0, noise_bound=10.0
    )._parameters(2)
    assert 100 < small.n_max < 2000  # the largest N_max a 1024-bit key allows


# ---------------------------------------------------------------------- guards
def test_record_limit_guards(key: PaillierPrivateKey) -> None:
    hist = np.array([[30, 1], [31, 1]])  # N_0 = 61 > N_max = 60
    with pytest.raises(RecordLimitError, match="N_max = 60"):
        make_session(key, hist)
    params = make_session(key, np.array([[1], [1]]))._parameters(2)
    with pytest.raises(RecordLimitError):
        PrivateWeightingSilo(params, 0, np.array([61]))
    with pytest.raises(ParameterError):
        PrivateWeightingSilo(params, 0, np.array([-1]))
    with pytest.raises(ParameterError):
        PrivateWeightingSilo(params, 2, np.array([1]))


def test_total_above_n_max_is_detected_not_output(key: PaillierPrivateKey) -> None:
    """Each silo's count is within N_max but N_u = 61 (prime, does not divide C_LCM)."""
    hist = np.array([[31, 2], [30, 2]])
    params = PrivateWeightingParameters(
        session_id=os.urandom(16),
        n_silos=2,
        n_users=2,
        n_params=4,
        clip_bound=1.0,
        noise_bound=10.0,
        key_bits=BITS,
        insecure_small_key=True,
        n_max=60,
    )
    server = PrivateWeightingServer(params, private_key=key)
    silos = [PrivateWeightingSilo(params, s, hist[s]) for s in range(2)]
    run_setup(server, silos)
    rng = np.random.default_rng(3)
    deltas = random_inputs(rng, 2, 2, 4)
    with pytest.raises(AggregateOutOfRangeError, match="N_u > N_max"):
        run_round(server, silos, 0, deltas, 0.5)
    # what an unguarded decode (the authors' code) would output instead: garbage
    c_lcm, n = params.c_lcm, key.public_key.n
    weight = 31 * c_lcm * pow(61, -1, n) % n
    e = int(np.rint(deltas[0][0, 0] / P))
    wrong = signed(e * weight % n, n) / c_lcm * P
    assert abs(wrong - deltas[0][0, 0] * 31 / 61) > 1.0
    # the next round (within the limits for the sampled users) still works
    ok = [d.copy() for d in deltas]
    for d in ok:
        d[0] = 0.0
    agg = run_round(server, silos, 1, ok, 0.0).aggregate
    want = hist[:, 1] @ np.array([d[1] for d in ok]) / 4
    np.testing.assert_allclose(agg, want, atol=1e-9)


def test_plaintext_range_guard() -> None:
    hist = np.ones((3, 10), dtype=int)
    with pytest.raises(PlaintextRangeError, match="largest feasible N_max"):
        SecureWeighting(
            hist,
            key_bits=1024,
            insecure_small_key=True,
            n_max=2000,
            clip_bound=1.0,
            noise_bound=10.0,
        )
    feasible = largest_feasible_n_max(1024, 10, 3, 10**10, 10**11)
    kw = dict(
        session_id=bytes(16),
        n_silos=3,
        n_users=10,
        n_params=1,
        key_bits=1024,
        insecure_small_key=True,
    )
    PrivateWeightingParameters(clip_bound=1.0, noise_bound=10.0, n_max=feasible, **kw)  # type: ignore[arg-type]
    with pytest.raises(PlaintextRangeError):
        PrivateWeightingParameters(clip_bound=1.0, noise_bound=10.0, n_max=feasible + 1, **kw)  # type: ignore[arg-type]
    # worst case at the limit still fits n/2 for any 1024-bit modulus
    c = lcm_upto(feasible)
    assert 2 * c * (10 * 10**10 + 3 * 10**11) < 2**1023
    with pytest.raises(ParameterError, match="2\\*\\*52"):  # beyond float64 exactness
        SecureWeighting(
            hist,
            key_bits=1024,
            insecure_small_key=True,
            n_max=10,
            clip_bound=1e6,
            noise_bound=1.0,
        )


def test_input_guards(key: PaillierPrivateKey) -> None:
    hist = np.array([[1, 2], [3, 0]])
    rng = np.random.default_rng(4)
    with make_session(key, hist) as sw:
        deltas = random_inputs(rng, 2, 2, 3)
        sw.setup(3)
        too_big = [d.copy() for d in deltas]
        too_big[1][0, 2] = 1.5
        with pytest.raises(ParameterError, match="clip"):
            sw.aggregate(0, too_big, STD)
        with pytest.raises(ParameterError, match="noise_bound"):
            sw.aggregate(1, deltas, 100.0 / 16 * 1.001)  # the tail cut beyond the bound
        for bad in (-1.0, float("nan"), float("inf"), "3"):
            with pytest.raises(ParameterError, match="noise_std"):
                sw.aggregate(1, deltas, bad)  # type: ignore[arg-type]
        nan = [d.copy() for d in deltas]
        nan[0][0, 0] = np.nan
        with pytest.raises(ParameterError, match="NaN"):
            sw.aggregate(2, nan, STD)
        with pytest.raises(ParameterError):
            sw.aggregate(3, [d[:, :2] for d in deltas], STD)
        with pytest.raises(ParameterError, match="sub-sampling"):
            sw.aggregate(4, deltas, STD, np.array([True, False]))
        with pytest.raises(ParameterError):
            sw.setup(3)
        agg, _ = sw.aggregate(5, deltas, STD)  # nothing above changed the state
        np.testing.assert_allclose(agg, sw.plaintext_reference(deltas), atol=1e-9)
        with pytest.raises(WrongRoundError):
            sw.aggregate(5, deltas, STD)
    with pytest.raises(ParameterError, match="no records"):
        make_session(key, np.array([[1, 0], [2, 0]]))
    with pytest.raises(ParameterError, match="bits"):
        SecureWeighting(
            hist, key_bits=256, insecure_small_key=True, n_max=10, clip_bound=1.0, noise_bound=1.0
        )
    with pytest.raises(ParameterError, match="insecure_small_key"):
        SecureWeighting(hist, key_bits=1024, n_max=10, clip_bound=1.0, noise_bound=1.0)
    with pytest.raises(ParameterError):
        SecureWeighting(np.array([1, 2]))


def test_zero_total_is_not_invertible_at_the_server(key: PaillierPrivateKey) -> None:
    params = PrivateWeightingParameters(
        session_id=os.urandom(16),
        n_silos=2,
        n_users=2,
        n_params=1,
        clip_bound=1.0,
        noise_bound=1.0,
        key_bits=BITS,
        insecure_small_key=True,
        n_max=10,
    )
    server = PrivateWeightingServer(params, private_key=key)
    silos = [PrivateWeightingSilo(params, s, np.array([1, 0])) for s in range(2)]
    with pytest.raises(NotInvertibleError, match="user 1"):
        run_setup(server, silos)


def test_blinds_are_units_and_gcd_guard() -> None:
    n = 3 * 5 * 7 * 11  # many non-units
    values = UniformSampler(os.urandom(32), n, units=True).take(6000)
    units = [r for r in range(1, n) if np.gcd(r, n) == 1]
    assert set(int(v) for v in values) <= set(units)
    counts = np.bincount([units.index(int(v)) for v in values], minlength=len(units))
    expected = len(values) / len(units)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < len(units) + 6 * np.sqrt(2 * len(units))  # far below a 6-sigma excess
    for bad in (0, 3, 35, n):
        with pytest.raises(NotInvertibleError):
            check_unit(bad, n, "r_u")
    check_unit(2, n, "r_u")
    plain = UniformSampler(os.urandom(32), n).take(4000)
    assert min(plain) >= 0 and max(plain) < n and 0 < sum(1 for v in plain if np.gcd(int(v), n) > 1)


def test_ciphertexts_reused_only_without_subsampling(key: PaillierPrivateKey) -> None:
    hist = np.array([[2, 1], [1, 1]])
    rng = np.random.default_rng(5)
    for subsampling in (False, True):
        with make_session(key, hist, subsampling=subsampling) as sw:
            sw.setup(2)
            server = sw.server
            assert server is not None
            seen = []
            for r in range(2):
                weights = server.start_round(r)
                seen.append(weights[0].ciphertexts)
                assert weights[0].ciphertexts == weights[1].ciphertexts
                deltas = random_inputs(rng, 2, 2, 2)
                for s, silo in enumerate(sw.silos):
                    server.receive(silo.on_weights(weights[s], deltas[s], STD))
                agg = server.finish_round()
                np.testing.assert_allclose(agg, sw.plaintext_reference(deltas), atol=1e-9)
            assert (seen[0] == seen[1]) == (not subsampling)
