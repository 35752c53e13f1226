"""Issue #15: the decrypted aggregate must not leak ``A_u mod N_u`` through noise-free residues.

With the paper's encoding (noise ``C_LCM round(z / P)``) the server's decrypted integer modulo
``C_LCM`` is ``C_LCM sum_u (A_u mod N_u) / N_u`` with ``A_u = sum_s n_{s,u} E_{s,u}``, whatever
the noise. Our silos add a discrete Gaussian on the plaintext grid instead, so the residues move
with the noise. Both schemes run through the real protocol here; the old one by swapping the
silos' noise for the paper's.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedprivacy.crypto.paillier import PaillierPrivateKey, generate_keypair
from fedprivacy.dp.distributed_discrete import NonNegligibleTauError
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting import (
    PrivateWeightingParameters,
    PrivateWeightingServer,
    PrivateWeightingSilo,
    SecureWeighting,
    run_round,
    run_setup,
)
from fedprivacy.secagg.private_weighting import noise as noise_module
from fedprivacy.secagg.private_weighting import silo as silo_module
from fedprivacy.secagg.private_weighting.noise import NoiseTailError

P = 1e-4
N_MAX = 10
C_LCM = 2520
STD = 0.01  # sigma_int = STD C_LCM / P = 252,000 >> C_LCM
D, ROUNDS = 16, 10
# users with N_u = 7, 8, 9, 5 records (pairwise coprime), split over two silos
HIST = np.array([[3, 5, 2, 1], [4, 3, 7, 4]])
TOTALS = HIST.sum(axis=0)


@pytest.fixture(scope="module")
def key() -> PaillierPrivateKey:
    return generate_keypair(768, insecure_small_key=True)


@pytest.fixture(scope="module")
def deltas() -> list[np.ndarray]:
    rng = np.random.default_rng(15)
    return [rng.uniform(-0.5, 0.5, size=(HIST.shape[1], D)) for _ in range(HIST.shape[0])]


def data_residue(deltas: list[np.ndarray]) -> np.ndarray:
    """``C_LCM sum_u (A_u mod N_u) / N_u mod C_LCM`` per coordinate (what the old scheme leaks)."""
    out = np.zeros(D, dtype=np.int64)
    for j in range(D):
        total = 0
        for u, n_u in enumerate(TOTALS):
            a_u = sum(int(HIST[s, u]) * int(np.rint(deltas[s][u, j] / P)) for s in range(2))
            total += C_LCM // int(n_u) * (a_u % int(n_u))
        out[j] = total % C_LCM
    return out


def plaintexts(
    key: PaillierPrivateKey, deltas: list[np.ndarray], noise_std: float, rounds: int = ROUNDS
) -> tuple[np.ndarray, list[np.ndarray], PrivateWeightingServer, list[PrivateWeightingSilo]]:
    """The server's decrypted signed integers, ``(rounds, D)``, and each round's aggregate."""
    params = PrivateWeightingParameters(
        session_id=os.urandom(16),
        n_silos=2,
        n_users=4,
        n_params=D,
        clip_bound=0.5,
        noise_bound=16 * STD,
        key_bits=768,
        insecure_small_key=True,
        precision=P,
        n_max=N_MAX,
    )
    assert params.c_lcm == C_LCM
    server = PrivateWeightingServer(params, private_key=key)
    silos = [PrivateWeightingSilo(params, s, HIST[s]) for s in range(2)]
    run_setup(server, silos, wire=False)
    values, aggregates = [], []
    for r in range(rounds):
        outcome = run_round(server, silos, r, deltas, noise_std, wire=False)
        assert len(outcome.plaintexts) == D
        values.append(outcome.plaintexts)
        aggregates.append(outcome.aggregate)
    return np.array(values, dtype=object), aggregates, server, silos


def uniformity_p(residues: np.ndarray, modulus: int, bins: int) -> float:
    """Chi-square p-value of residues in ``[0, modulus)`` grouped into ``bins`` equal bins."""
    assert modulus % bins == 0
    counts = np.bincount((residues // (modulus // bins)).astype(np.int64), minlength=bins)
    return float(stats.chisquare(counts).pvalue)


def test_residues_move_with_the_noise(key: PaillierPrivateKey, deltas: list[np.ndarray]) -> None:
    values, _, _, _ = plaintexts(key, deltas, STD)
    leak = data_residue(deltas)
    mod_c = np.array([[int(v) % C_LCM for v in row] for row in values])
    # uniform over coordinates x rounds, for C_LCM (10 bins of 252 residues) and every N_u
    assert uniformity_p(mod_c.ravel(), C_LCM, 10) > 1e-6
    for n_u in TOTALS:
        mod_n = np.array([int(v) % int(n_u) for v in values.ravel()])
        assert uniformity_p(mod_n, int(n_u), int(n_u)) > 1e-6
    # they change from round to round for the same data, and are not the data's residue
    for r in range(1, ROUNDS):
        assert np.count_nonzero(mod_c[r] != mod_c[0]) >= D - 2
    assert np.count_nonzero(mod_c == leak[None, :]) <= 3  # chance: 160 / 2520 expected 0.06


def test_the_papers_noise_leaves_the_data_residue(
    key: PaillierPrivateKey, deltas: list[np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Noise forced to ``C_LCM round(z / P)`` (Appendix D): the residues are the data's."""
    rng = np.random.default_rng(1)

    def papers_noise(
        noise_std: float, precision: float, c_lcm: int, noise_bound: float, size: int
    ) -> list[int]:
        z = rng.normal(0.0, noise_std, size=size)
        return [c_lcm * int(v) for v in np.rint(z / precision)]

    monkeypatch.setattr(silo_module, "sample_noise", papers_noise)
    values, aggregates, _, _ = plaintexts(key, deltas, STD)
    leak = data_residue(deltas)
    mod_c = np.array([[int(v) % C_LCM for v in row] for row in values])
    assert (mod_c == leak[None, :]).all()  # every round, every coordinate, whatever the noise
    assert uniformity_p(mod_c.ravel(), C_LCM, 10) < 1e-6  # the test above has power
    assert not np.allclose(aggregates[0], aggregates[1])  # and yet the outputs are noisy
    # with pairwise coprime N_u the residues give every user's A_u mod N_u (CRT)
    for j in range(D):
        for u, n_u in enumerate(TOTALS):
            n_u = int(n_u)
            inverse = pow(C_LCM // n_u, -1, n_u)
            a_u = sum(int(HIST[s, u]) * int(np.rint(deltas[s][u, j] / P)) for s in range(2))
            assert (int(mod_c[0, j]) * inverse) % n_u == a_u % n_u


@pytest.mark.parametrize("noise_std", [0.0, STD])
def test_output_equals_the_plaintext_aggregate(
    key: PaillierPrivateKey, deltas: list[np.ndarray], noise_std: float
) -> None:
    values, aggregates, _, silos = plaintexts(key, deltas, noise_std, rounds=1)
    w = HIST / TOTALS
    noise = [np.array([v / C_LCM for v in s.last_noise or ()]) * P for s in silos]
    want = sum(w[s] @ deltas[s] + noise[s] for s in range(2))
    bound = (HIST.shape[1] + HIST.shape[0]) * P / 2
    assert np.max(np.abs(aggregates[0] - want)) <= bound + 1e-15
    # the aggregate is the server's integer on the grid P / C_LCM
    np.testing.assert_array_equal(aggregates[0], [int(v) / C_LCM * P for v in values[0]])
    if noise_std == 0:
        assert all(v == 0 for s in silos for v in s.last_noise or ())
        mod_c = np.array([int(v) % C_LCM for v in values[0]])
        np.testing.assert_array_equal(mod_c, data_residue(deltas))
    else:
        sigma_int = noise_std * C_LCM / P
        z = np.array([float(v) for s in silos for v in s.last_noise or ()])
        assert np.all(np.abs(z) <= 16 * sigma_int) and z.std() > sigma_int / 3
        assert not math.isclose(float(np.abs(z).sum()), 0.0)


def test_a_draw_beyond_the_tail_cut_aborts_the_round(
    key: PaillierPrivateKey, deltas: list[np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    def far(sigma2: Fraction, size: int) -> list[int]:
        return [math.isqrt(int(256 * sigma2)) + 1] * size

    monkeypatch.setattr(noise_module, "discrete_gaussian_vector", far)
    with pytest.raises(NoiseTailError, match="16 standard deviations"):
        plaintexts(key, deltas, STD, rounds=1)


def test_noise_multiplier_of_the_session(key: PaillierPrivateKey) -> None:
    with SecureWeighting(
        HIST,
        n_params=D,
        key_bits=768,
        insecure_small_key=True,
        private_key=key,
        precision=P,
        n_max=N_MAX,
        clip_bound=0.5,
        noise_bound=1.0,
        wire=False,
    ) as sw:
        sw.setup()
        m = sw.noise_multiplier(STD, 0.5)
        assert m == pytest.approx(math.sqrt(2) * STD / (0.5 + math.sqrt(D) * P / 2), rel=1e-11)
        assert m < math.sqrt(2) * STD / 0.5
        with pytest.raises(NonNegligibleTauError):
            sw.noise_multiplier(1e-7, 0.5)  # sigma_int = 2.5 grid units: tau ~ e^-59
        with pytest.raises(ParameterError):
            sw.noise_multiplier(0.0, 0.5)
