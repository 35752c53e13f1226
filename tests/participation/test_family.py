from __future__ import annotations

import math
from collections import Counter
from itertools import combinations

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from fedprivacy.errors import ParameterError
from fedprivacy.participation.family import (
    ExplicitFamilySelector,
    generate_family,
)
from fedprivacy.participation.metrics import family_size
from fedprivacy.participation.selectors import BatchPartitionSelector, Selector


def test_family_rows_table_1() -> None:
    # Table 1 of the paper (N = 120, K = 12). The paper prints 91,389 for T = 3; the exact
    # value C(40, 4) is 91,390.
    assert family_size(120, 12, 12) == 10
    assert family_size(120, 12, 6) == 190
    assert family_size(120, 12, 4) == 4060
    assert family_size(120, 12, 3) == 91_390
    assert family_size(120, 12, 1) == math.comb(120, 12)  # ~1.06e16, "~10^16" in Table 1


def test_example_1_of_the_paper() -> None:
    family = generate_family(8, 4, 2)
    assert family.dtype == np.uint8
    assert family.shape == (6, 8)
    assert np.all(family.sum(axis=1) == 4)
    batches = family.reshape(6, 4, 2)
    assert np.all(batches[:, :, 0] == batches[:, :, 1])  # batches enter whole
    assert np.all(batches[:, :, 0].sum(axis=1) == 2)  # two batches per row
    assert len({row.tobytes() for row in family}) == 6
    # Equation (9) of the paper, except its first row, printed as 1 1 0 0 0 0 0 0, is a typo
    # (weight 2, not K = 4): the union of batches G1 and G2 is 1 1 1 1 0 0 0 0.
    expected = [
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 0, 0, 1, 1, 0, 0],
        [1, 1, 0, 0, 0, 0, 1, 1],
        [0, 0, 1, 1, 1, 1, 0, 0],
        [0, 0, 1, 1, 0, 0, 1, 1],
        [0, 0, 0, 0, 1, 1, 1, 1],
    ]
    assert family.tolist() == expected


@pytest.mark.parametrize(
    ("n", "k", "t"), [(12, 4, 2), (12, 6, 3), (10, 4, 1), (12, 4, 4), (9, 9, 3)]
)
def test_generate_family_structure(n: int, k: int, t: int) -> None:
    family = generate_family(n, k, t)
    rows = family_size(n, k, t)
    assert family.shape == (rows, n)
    assert np.all(family.sum(axis=1) == k)
    assert len({row.tobytes() for row in family}) == rows
    per_batch = family.reshape(rows, n // t, t)
    assert np.all(per_batch.min(axis=2) == per_batch.max(axis=2))
    # rows in itertools.combinations order over batches
    combos = [tuple(np.flatnonzero(r[:, 0]).tolist()) for r in per_batch]
    assert combos == list(combinations(range(n // t), k // t))


def test_generate_family_t1_is_all_k_subsets() -> None:
    family = generate_family(6, 3, 1)
    got = {tuple(np.flatnonzero(r).tolist()) for r in family}
    assert got == set(combinations(range(6), 3))


def test_generate_family_refuses_huge_families() -> None:
    with pytest.raises(ParameterError) as info:
        generate_family(120, 12, 1)
    assert info.value.name == "max_rows"
    with pytest.raises(ParameterError) as info:
        generate_family(12, 4, 2, max_rows=14)
    assert info.value.name == "max_rows"
    assert generate_family(12, 4, 2, max_rows=15).shape == (15, 12)
    with pytest.raises(ParameterError) as info:
        generate_family(12, 4, 2, max_rows=0)
    assert info.value.name == "max_rows"


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((12, 4, 3), "target_privacy"),
        ((12, 4, 5), "target_privacy"),
        ((10, 4, 4), "target_privacy"),
        ((4, 8, 2), "per_round"),
        ((0, 4, 2), "num_users"),
    ],
)
def test_family_validation(args: tuple[int, int, int], name: str) -> None:
    with pytest.raises(ParameterError) as info:
        family_size(*args)
    assert info.value.name == name
    with pytest.raises(ParameterError) as info:
        generate_family(*args)
    assert info.value.name == name


@pytest.mark.parametrize(
    "family", [[[1, 1, 0], [1, 0, 0]], [[0, 0, 0]], np.zeros((0, 3)), [[1, 2, 0]], [1, 0]]
)
def test_explicit_selector_validation(family: object) -> None:
    with pytest.raises(ParameterError) as info:
        ExplicitFamilySelector(family)  # type: ignore[arg-type]
    assert info.value.name == "family"


def test_explicit_selector_available_rows_and_skip() -> None:
    sel = ExplicitFamilySelector.batch_partition(8, 4, 2)
    assert (sel.num_users, sel.per_round, sel.num_rows) == (8, 4, 6)
    assert sel.name == "multiround-explicit"
    available = np.array([1, 1, 1, 0, 1, 1, 1, 1], dtype=bool)  # batch 1 unavailable
    np.testing.assert_array_equal(sel.available_rows(available), [1, 2, 5])
    rng = np.random.default_rng(0)
    freq = np.zeros(8, dtype=np.int64)
    for _ in range(50):
        assert sel.select(available, freq, rng).tolist() in (
            [0, 1, 4, 5],
            [0, 1, 6, 7],
            [4, 5, 6, 7],
        )
    only_one_batch = np.array([1, 1, 0, 1, 0, 1, 1, 0], dtype=bool)
    assert sel.select(only_one_batch, freq, rng).size == 0


# --------------------------------------------------------------------------------------------
# Explicit (Algorithm 2 on the materialised B) versus implicit (batch-level) selection.

N, K, T = 12, 4, 2  # 6 batches, R = C(6, 2) = 15 rows
DRAWS = 20_000

# Availability patterns: all available; batch 5 broken (users 10, 11 partly down); batches 0 and
# 3 broken (only 4 batches left), with user 0 -- the least frequent user -- still available.
PATTERNS = {
    "all": np.ones(N, dtype=bool),
    "one-batch-down": np.array([1] * 10 + [1, 0], dtype=bool),
    "two-batches-down": np.array([1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1], dtype=bool),
}
# Frequency vectors with ties: min 1 at users 1, 3, 6 (batches 0, 1, 3); min 0 at users 0 and 5
# (batches 0, 2); and all equal.
FREQUENCIES = {
    "ties-3": np.array([3, 1, 2, 1, 5, 5, 1, 4, 2, 2, 3, 3], dtype=np.int64),
    "ties-2": np.array([0, 2, 2, 2, 1, 0, 3, 3, 1, 1, 2, 2], dtype=np.int64),
    "flat": np.full(N, 7, dtype=np.int64),
}


def _row_index() -> dict[tuple[int, ...], int]:
    family = generate_family(N, K, T)
    return {tuple(np.flatnonzero(row).tolist()): r for r, row in enumerate(family)}


def _draw(
    selector: Selector, available: NDArray[np.bool_], freq: NDArray[np.int64], seed: int
) -> NDArray[np.int64]:
    index = _row_index()
    rng = np.random.default_rng(seed)
    counts = Counter(
        index[tuple(selector.select(available, freq, rng).tolist())] for _ in range(DRAWS)
    )
    return np.array([counts.get(r, 0) for r in range(len(index))], dtype=np.int64)


def _exact(
    available: NDArray[np.bool_], freq: NDArray[np.int64], fairness: bool
) -> NDArray[np.float64]:
    """Distribution of Algorithm 2 over the rows of B, computed by enumeration."""
    family = generate_family(N, K, T).astype(bool)
    ok = ~family[:, ~available].any(axis=1)
    prob = np.zeros(family.shape[0])
    if not fairness:
        prob[ok] = 1.0 / ok.sum()
        return prob
    covered = np.flatnonzero(family[ok].any(axis=0))
    ties = covered[freq[covered] == freq[covered].min()]
    for user in ties:
        rows = ok & family[:, user]
        prob[rows] += 1.0 / (len(ties) * rows.sum())
    return prob


@pytest.mark.parametrize("fairness", [False, True])
@pytest.mark.parametrize(
    ("pattern", "freq_key"),
    [
        ("all", "ties-3"),
        ("one-batch-down", "ties-2"),
        ("two-batches-down", "ties-2"),
        ("two-batches-down", "flat"),
    ],
)
def test_explicit_and_implicit_agree_in_distribution(
    fairness: bool, pattern: str, freq_key: str
) -> None:
    available = PATTERNS[pattern]
    freq = FREQUENCIES[freq_key]
    explicit = _draw(ExplicitFamilySelector(generate_family(N, K, T), fairness), available, freq, 1)
    implicit = _draw(BatchPartitionSelector(N, K, T, fairness), available, freq, 2)
    exact = _exact(available, freq, fairness)

    # Same support, and it is the support Algorithm 2 prescribes.
    np.testing.assert_array_equal(explicit > 0, exact > 0)
    np.testing.assert_array_equal(implicit > 0, exact > 0)

    support = exact > 0
    if support.sum() > 1:
        table = np.stack([explicit[support], implicit[support]])
        assert stats.chi2_contingency(table).pvalue > 1e-3
        for counts in (explicit, implicit):
            assert stats.chisquare(counts[support], DRAWS * exact[support]).pvalue > 1e-3


def test_fairness_support_excludes_user_of_unavailable_batch() -> None:
    # User 0 has the minimum frequency and is available, but its batch (users 0, 1) is not:
    # no available row contains it, so l_min is taken among the users of available batches.
    available = PATTERNS["two-batches-down"]
    freq = FREQUENCIES["ties-2"]  # min 0 at users 0 (batch 0, down) and 5 (batch 2, up)
    for selector in (
        ExplicitFamilySelector(generate_family(N, K, T), fairness=True),
        BatchPartitionSelector(N, K, T, fairness=True),
    ):
        rng = np.random.default_rng(0)
        for _ in range(200):
            out = selector.select(available, freq, rng)
            assert 5 in out and 0 not in out
