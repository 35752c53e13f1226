from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from scipy import stats

from fedprivacy.errors import ParameterError
from fedprivacy.linalg import exact_rank, pivot_rows
from fedprivacy.participation import metrics
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.metrics import (
    batch_partition_cardinality,
    cardinality_curve,
    exposed_users,
    fairness_gap_curve,
    family_size,
    participation_classes,
    t_strong,
    theorem1_cardinality,
)

PAPER_EXAMPLE = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]])


def batch_family(n: int, k: int, t: int) -> np.ndarray:
    """All rows of the batch-partitioning family B (Algorithm 1), batches of consecutive users."""
    rows = []
    for chosen in itertools.combinations(range(n // t), k // t):
        row = np.zeros(n, dtype=np.uint8)
        for b in chosen:
            row[b * t : (b + 1) * t] = 1
        rows.append(row)
    return np.array(rows)


def random_selection(rng: np.random.Generator, rounds: int, n: int, k: int) -> np.ndarray:
    p = np.zeros((rounds, n), dtype=np.uint8)
    for r in range(rounds):
        p[r, rng.choice(n, size=k, replace=False)] = 1
    return p


# ------------------------------------------------------------------ F^(t) and C^(t)
def test_fairness_gap_hand_computed() -> None:
    p = [
        [1, 1, 0, 0],
        [0, 0, 0, 0],  # skipped round
        [0, 0, 1, 1],
        [1, 0, 1, 0],
    ]
    # cumulative counts: [1,1,0,0] [1,1,0,0] [1,1,1,1] [2,1,2,1]
    expected = [1 / 1, 1 / 2, 0 / 3, 1 / 4]
    np.testing.assert_allclose(fairness_gap_curve(p), expected, rtol=0, atol=1e-15)


def test_cardinality_hand_computed() -> None:
    p = [
        [1, 1, 0, 0],
        [0, 0, 0, 0],  # skipped round
        [0, 1, 1, 1],
        [0, 0, 0, 0],  # skipped round
    ]
    expected = [2 / 1, 2 / 2, 5 / 3, 5 / 4]
    np.testing.assert_allclose(cardinality_curve(p), expected, rtol=0, atol=1e-15)


def test_curves_first_round_skipped_and_bool_input() -> None:
    p = np.array([[0, 0, 0], [1, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(fairness_gap_curve(p), [0.0, 0.0])
    np.testing.assert_array_equal(cardinality_curve(p), [0.0, 1.5])


def test_curves_empty_matrix() -> None:
    assert fairness_gap_curve(np.zeros((0, 3))).shape == (0,)
    assert cardinality_curve(np.zeros((0, 3))).shape == (0,)


def test_curves_large_from_ledger_is_fast_and_matches_loop() -> None:
    rng = np.random.default_rng(0)
    ledger = ParticipationLedger(120)
    for _ in range(5000):
        if rng.random() < 0.1:
            ledger.record([])
        else:
            ledger.record(rng.choice(120, size=12, replace=False))
    p = ledger.matrix()
    start = time.perf_counter()
    f = fairness_gap_curve(p)
    c = cardinality_curve(p)
    assert time.perf_counter() - start < 0.5
    assert f.shape == c.shape == (5000,)
    for t in (0, 1, 17, 999, 4999):
        freq = p[: t + 1].sum(axis=0) / (t + 1)
        assert f[t] == pytest.approx(freq.max() - freq.min(), abs=1e-12)
        assert c[t] == pytest.approx(p[: t + 1].sum() / (t + 1), abs=1e-12)
    assert c[-1] == pytest.approx(ledger.cardinalities.mean())


def test_batch_partition_has_zero_fairness_gap_within_batches() -> None:
    rng = np.random.default_rng(3)
    fam = batch_family(8, 4, 2)
    p = fam[rng.integers(0, len(fam), size=50)]
    counts = p.sum(axis=0)
    assert np.all(counts[0::2] == counts[1::2])
    assert np.all(fairness_gap_curve(p) >= 0)


@pytest.mark.parametrize(
    "bad", [[1, 0, 1], [[[1]]], [[0, 2]], [[0.5, 1.0]], [["a", "b"]], np.zeros((2, 0))]
)
def test_curves_reject_bad_matrix(bad: object) -> None:
    with pytest.raises(ParameterError) as info:
        fairness_gap_curve(bad)  # type: ignore[arg-type]
    assert info.value.name == "participation"
    with pytest.raises(ParameterError):
        cardinality_curve(bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ classes, t_strong, exposure
def brute_classes(p: np.ndarray) -> list[list[int]]:
    n = p.shape[1]
    seen: set[int] = set()
    out = []
    for i in range(n):
        if i in seen or not p[:, i].any():
            continue
        group = [j for j in range(n) if np.array_equal(p[:, i], p[:, j])]
        seen.update(group)
        out.append(group)
    return out


def brute_exposed(p: np.ndarray) -> list[int]:
    n = p.shape[1]
    rank = exact_rank(p)
    out = []
    for i in range(n):
        e = np.zeros((1, n), dtype=np.int64)
        e[0, i] = 1
        if exact_rank(np.vstack([p.astype(np.int64), e])) == rank:
            out.append(i)
    return out


def random_small_matrix(rng: np.random.Generator) -> np.ndarray:
    rounds = int(rng.integers(1, 9))
    n = int(rng.integers(1, 9))
    density = rng.uniform(0.2, 0.7)
    p = (rng.random((rounds, n)) < density).astype(np.uint8)
    if n > 1 and rng.random() < 0.5:  # force some identical columns
        for _ in range(int(rng.integers(1, n))):
            i, j = rng.choice(n, size=2, replace=False)
            p[:, j] = p[:, i]
    if rng.random() < 0.2:
        p[:, int(rng.integers(n))] = 0  # a never-aggregated user
    return p


def test_classes_t_strong_exposed_against_brute_force() -> None:
    rng = np.random.default_rng(2024)
    seen_exposed = seen_safe = 0
    for _ in range(400):
        p = random_small_matrix(rng)
        classes = [c.tolist() for c in participation_classes(p)]
        assert classes == brute_classes(p)
        sizes = [len(c) for c in classes]
        assert t_strong(p) == (min(sizes) if sizes else None)
        # A generic z makes every class a level set of P^T z (and no other coincidences). Large
        # random integers are generic with overwhelming probability and keep the sums exact.
        if classes:
            v = p.T.astype(np.int64) @ rng.integers(-(2**40), 2**40, size=p.shape[0])
            levels: dict[int, list[int]] = {}
            for i in np.flatnonzero(v != 0):
                levels.setdefault(int(v[i]), []).append(int(i))
            assert sorted(levels.values()) == sorted(classes)
        exposed = exposed_users(p).tolist()
        assert exposed == brute_exposed(p)
        seen_exposed += bool(exposed)
        seen_safe += len(exposed) < p.shape[1]
    assert seen_exposed > 50 and seen_safe > 50  # both outcomes were exercised


def test_exposed_fallback_path_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    # A float QR that proposes the wrong rows must not change the (exact) answer.
    def bad_qr(a: np.ndarray, **_: object) -> tuple[None, None, np.ndarray]:
        return None, None, np.zeros(a.shape[1], dtype=np.intp)  # proposes row 0 repeatedly

    rng = np.random.default_rng(7)
    # Column dependencies c_k = c_i + c_j (disjoint supports) make the collapsed matrix rank
    # deficient while it keeps more distinct rows than its rank: the row basis is needed.
    cases = []
    for _ in range(100):
        p = (rng.random((8, 7)) < 0.5).astype(np.uint8)
        for _ in range(int(rng.integers(1, 3))):
            i, j, k = rng.choice(7, size=3, replace=False)
            p[:, j] &= 1 - p[:, i]
            p[:, k] = p[:, i] + p[:, j]
        cases.append(p)
    expected = [exposed_users(p).tolist() for p in cases]
    fallbacks = []

    def counting_pivot_rows(m: np.ndarray) -> list[int]:
        fallbacks.append(m.shape)
        return pivot_rows(m)

    monkeypatch.setattr(metrics.sla, "qr", bad_qr)
    monkeypatch.setattr(metrics, "pivot_rows", counting_pivot_rows)
    for p, exp in zip(cases, expected, strict=True):
        assert exposed_users(p).tolist() == exp == brute_exposed(p)
    assert len(fallbacks) > 10, len(fallbacks)


def test_paper_example_section_3_2() -> None:
    assert exposed_users(PAPER_EXAMPLE).tolist() == [0, 1, 2]
    assert t_strong(PAPER_EXAMPLE) == 1
    # x_1 = (x^(1) + x^(3) - x^(2)) / 2
    z = np.array([0.5, -0.5, 0.5])
    np.testing.assert_allclose(z @ PAPER_EXAMPLE, [1, 0, 0])


def test_batch_partitioned_nobody_exposed() -> None:
    # The paper's example with every user replaced by a batch of two users.
    p = np.repeat(PAPER_EXAMPLE, 2, axis=1)
    assert exposed_users(p).size == 0
    assert t_strong(p) == 2
    assert [c.tolist() for c in participation_classes(p)] == [[0, 1], [2, 3], [4, 5]]
    fam = batch_family(12, 6, 3)
    assert exposed_users(fam).size == 0
    assert t_strong(fam) == 3


def test_exposed_partial_and_unaggregated() -> None:
    p = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 0]])
    # 0 and 1 always together; 2 alone in round 1; 3 never aggregated.
    assert exposed_users(p).tolist() == [2]
    assert t_strong(p) == 1
    assert t_strong(np.zeros((3, 4))) is None
    assert exposed_users(np.zeros((3, 4))).size == 0
    assert participation_classes(np.zeros((0, 2))) == []


def test_random_selection_becomes_fully_exposed() -> None:
    rng = np.random.default_rng(11)
    p = random_selection(rng, 400, 120, 12)
    start = time.perf_counter()
    exposed = exposed_users(p)
    assert time.perf_counter() - start < 5
    assert exact_rank(p) == 120
    assert exposed.tolist() == list(range(120))
    assert t_strong(p) == 1


def test_rank_deficient_large_is_exact() -> None:
    rng = np.random.default_rng(5)
    fam = batch_family(24, 8, 4)
    # Batch-partitioned rounds, plus a few rounds that single out users 0 and 5.
    p = np.vstack([fam[rng.integers(0, len(fam), size=300)], np.eye(24, dtype=np.uint8)[[0, 5]]])
    assert exposed_users(p).tolist() == brute_exposed(p)
    assert exposed_users(p).tolist() == [0, 5]
    assert t_strong(p) == 1


# ------------------------------------------------------------------ closed forms
def test_family_size_table_1() -> None:
    assert family_size(120, 12, 3) == 91390  # the paper's Table 1 prints 91389
    assert family_size(120, 12, 4) == 4060
    assert family_size(120, 12, 6) == 190
    assert family_size(120, 12, 12) == 10
    assert family_size(120, 12, 1) == math.comb(120, 12)
    assert family_size(8, 4, 2) == len(batch_family(8, 4, 2)) == 6


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((0, 1, 1), "num_users"),
        ((10, 11, 1), "per_round"),
        ((10, 0, 1), "per_round"),
        ((10, 4, 5), "target_privacy"),
        ((10, 4, 0), "target_privacy"),
        ((10, 4, 4), "target_privacy"),  # 4 does not divide 10
        ((12, 6, 4), "target_privacy"),  # 4 does not divide 6
        ((12.0, 6, 3), "num_users"),
        ((True, 1, 1), "num_users"),
    ],
)
def test_closed_forms_validate(args: tuple[object, object, object], name: str) -> None:
    for call in (
        lambda: family_size(*args),  # type: ignore[arg-type]
        lambda: theorem1_cardinality(*args, 0.1),  # type: ignore[arg-type]
        lambda: batch_partition_cardinality(*args, 0.1),  # type: ignore[arg-type]
    ):
        with pytest.raises(ParameterError) as info:
            call()
        assert info.value.name == name


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan"), "0.1", None, True])
def test_theorem1_dropout_validation(bad: object) -> None:
    with pytest.raises(ParameterError) as info:
        theorem1_cardinality(12, 6, 3, bad)  # type: ignore[arg-type]
    assert info.value.name == "dropout"


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan"), float("inf")])
def test_batch_partition_dropout_validation(bad: float) -> None:
    for value in (bad, [0.1] * 11 + [bad]):
        with pytest.raises(ParameterError) as info:
            batch_partition_cardinality(12, 6, 3, value)
        assert info.value.name == "dropout"


def test_batch_partition_dropout_shape_validation() -> None:
    with pytest.raises(ParameterError) as info:
        batch_partition_cardinality(12, 6, 3, np.full(11, 0.1))
    assert info.value.name == "dropout"


def paper_theorem1(n: int, k: int, t: int, p: float) -> float:
    """Theorem 1 written literally as in the paper (sum over unavailable batches)."""
    m = n // t
    q = 1 - (1 - p) ** t
    total = sum(math.comb(m, i) * q**i * (1 - q) ** (m - i) for i in range(m - k // t + 1, m + 1))
    return k * (1 - total)


@pytest.mark.parametrize(
    ("n", "k", "t"),
    [(120, 12, 1), (120, 12, 3), (120, 12, 4), (120, 12, 6), (120, 12, 12), (8, 4, 2), (6, 6, 3)],
)
@pytest.mark.parametrize("p", [0.0, 0.05, 0.1, 0.3, 0.5, 0.9])
def test_theorem1_and_batch_dp_agree(n: int, k: int, t: int, p: float) -> None:
    c1 = theorem1_cardinality(n, k, t, p)
    c2 = batch_partition_cardinality(n, k, t, p)
    c3 = batch_partition_cardinality(n, k, t, np.full(n, p))
    assert 0.0 <= c1 <= k
    assert c1 == pytest.approx(paper_theorem1(n, k, t, p), rel=1e-9, abs=1e-12)
    assert c2 == pytest.approx(c1, rel=1e-10, abs=1e-13)
    assert c3 == c2
    if p == 0.0:
        assert c1 == c2 == k


def test_cardinality_decreases_with_t() -> None:
    values = [theorem1_cardinality(120, 12, t, 0.3) for t in (1, 2, 3, 4, 6, 12)]
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_batch_dp_against_exact_enumeration() -> None:
    rng = np.random.default_rng(9)
    p = rng.uniform(0, 0.8, size=12)
    n, k, t = 12, 6, 3
    avail = [float(np.prod(1 - p[b * t : (b + 1) * t])) for b in range(n // t)]
    total = 0.0
    for pattern in itertools.product([0, 1], repeat=n // t):
        if sum(pattern) >= k // t:
            total += math.prod(a if s else 1 - a for a, s in zip(avail, pattern, strict=True))
    assert batch_partition_cardinality(n, k, t, p) == pytest.approx(k * total, rel=1e-12)


def test_batch_dp_against_monte_carlo_and_selection() -> None:
    # Dropouts drawn from {0.1, ..., 0.5} as in Section 6; simulate Algorithm 2's availability test.
    rng = np.random.default_rng(12345)
    n, k, t, rounds = 120, 12, 4, 40000
    p = rng.choice([0.1, 0.2, 0.3, 0.4, 0.5], size=n)
    available = rng.random((rounds, n)) >= p
    batch_up = available.reshape(rounds, n // t, t).all(axis=2)
    aggregated = np.where(batch_up.sum(axis=1) >= k // t, k, 0)
    exact = batch_partition_cardinality(n, k, t, p)
    assert aggregated.mean() == pytest.approx(exact, rel=0.02)
    # Random selection (T = 1) needs K available users; user partition (T = K) one whole group.
    for tt in (1, k):
        up = available.reshape(rounds, n // tt, tt).all(axis=2).sum(axis=1) >= k // tt
        assert (k * up).mean() == pytest.approx(batch_partition_cardinality(n, k, tt, p), rel=0.02)


def test_random_selection_closed_form_is_binomial_tail() -> None:
    c = batch_partition_cardinality(20, 5, 1, 0.7)
    assert c == pytest.approx(5 * stats.binom.sf(4, 20, 0.3), rel=1e-12)
