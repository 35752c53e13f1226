"""The fairness rules of Multi-RoundSecAgg: Algorithm 2 as printed ("paper") and the authors' code.

The authors' rule scores each available row of the family ``B`` by the sum of its users'
participation counts and takes a row of minimum score (uniformly among ties); on the batch
partition that is the ``K/T`` fully available batches of least total participation. It is checked
here against a brute-force argmin over the materialised family.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from fedprivacy.cli.flags import DEFAULT_FAIRNESS_RULE as CLI_DEFAULT_RULE
from fedprivacy.errors import ParameterError
from fedprivacy.participation.fairness import (
    DEFAULT_FAIRNESS_RULE,
    FAIRNESS_RULE_NAMES,
    FAIRNESS_RULES,
    FairnessRule,
    get_fairness_rule,
)
from fedprivacy.participation.family import ExplicitFamilySelector, generate_family
from fedprivacy.participation.selectors import BatchPartitionSelector

# (N, T) with N in 8..12 and T in 2..4 dividing N
SHAPES = [(n, t) for n in range(8, 13) for t in range(2, 5) if n % t == 0]


def _instance(
    rng: np.random.Generator,
) -> tuple[int, int, int, NDArray[np.bool_], NDArray[np.int64]]:
    """A random small case: sizes, availability and a random history of participation counts."""
    n, t = SHAPES[rng.integers(len(SHAPES))]
    k = t * int(rng.integers(1, n // t + 1))
    available = rng.random(n) >= rng.choice([0.0, 0.1, 0.3, 0.5])
    # small counts make ties between batch scores common
    frequency = rng.integers(0, int(rng.choice([2, 4, 20])), size=n).astype(np.int64)
    return n, k, t, available, frequency


def _brute_force_scores(
    n: int, t: int, available: NDArray[np.bool_], frequency: NDArray[np.int64]
) -> dict[int, int]:
    """Every fully available batch and its score, by enumeration of the users."""
    return {
        b: int(sum(frequency[u] for u in range(b * t, b * t + t)))
        for b in range(n // t)
        if all(available[u] for u in range(b * t, b * t + t))
    }


def test_registry_names_and_default() -> None:
    assert FAIRNESS_RULE_NAMES == ("paper", "authors")
    assert tuple(FAIRNESS_RULES) == FAIRNESS_RULE_NAMES
    assert DEFAULT_FAIRNESS_RULE == CLI_DEFAULT_RULE == "paper"
    for name, rule in FAIRNESS_RULES.items():
        assert isinstance(rule, FairnessRule) and rule.name == name and rule.summary
        assert get_fairness_rule(name) is rule


@pytest.mark.parametrize("bad", ["greedy", "", "Paper", None, 1])
def test_unknown_rule_is_a_parameter_error(bad: object) -> None:
    with pytest.raises(ParameterError, match="must be one of paper, authors") as info:
        get_fairness_rule(bad)
    assert info.value.name == "fairness_rule"
    with pytest.raises(ParameterError) as info:
        BatchPartitionSelector(12, 4, 2, True, bad)  # type: ignore[arg-type]
    assert info.value.name == "fairness_rule"


def test_register_fairness_rule_refuses_a_taken_name() -> None:
    with pytest.raises(ParameterError, match="'authors' is registered already"):
        FAIRNESS_RULES.register("authors", FAIRNESS_RULES["authors"])


def test_authors_rule_equals_brute_force_argmin_over_the_materialised_family() -> None:
    rng = np.random.default_rng(2024)
    checked = ties = 0
    for case in range(300):
        n, k, t, available, frequency = _instance(rng)
        need = k // t
        scores = _brute_force_scores(n, t, available, frequency)
        family = generate_family(n, k, t).astype(bool)
        inside = ~family[:, ~available].any(axis=1)
        row_scores = family[inside].astype(np.int64) @ frequency
        implicit = BatchPartitionSelector(n, k, t, fairness=True, fairness_rule="authors")
        explicit = ExplicitFamilySelector(family, fairness=True, fairness_rule="authors")
        for selector in (implicit, explicit):
            out = selector.select(available, frequency, np.random.default_rng(case))
            if len(scores) < need:  # B^(t) is empty: the round is skipped
                assert out.size == 0 and not inside.any()
                continue
            # a union of K/T fully available batches ...
            assert out.size == k
            chosen = sorted({int(u) // t for u in out})
            assert len(chosen) == need and all(b in scores for b in chosen)
            np.testing.assert_array_equal(
                out, np.concatenate([np.arange(b * t, b * t + t) for b in chosen])
            )
            # ... of minimal score: its batch scores are the K/T smallest (ties allowed) ...
            assert sorted(scores[b] for b in chosen) == sorted(scores.values())[:need]
            # ... i.e. the argmin of the row scores over the materialised B^(t)
            assert int(frequency[out].sum()) == int(row_scores.min())
            checked += 1
        if len(scores) >= need and int((row_scores == row_scores.min()).sum()) > 1:
            ties += 1
    assert checked > 300 and ties > 20  # both skips, selections and tied minima occurred


@pytest.mark.parametrize("seed", range(6))
def test_authors_rule_breaks_ties_uniformly_among_minimal_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    while True:  # a case with several minimal rows
        n, k, t, available, frequency = _instance(rng)
        family = generate_family(n, k, t).astype(bool)
        rows = np.flatnonzero(~family[:, ~available].any(axis=1))
        if rows.size:
            row_scores = family[rows].astype(np.int64) @ frequency
            minimal = rows[row_scores == row_scores.min()]
            if 2 <= minimal.size <= 10:
                break
    index = {tuple(np.flatnonzero(family[r]).tolist()): int(r) for r in range(family.shape[0])}
    draws = 3000
    for selector in (
        BatchPartitionSelector(n, k, t, True, "authors"),
        ExplicitFamilySelector(family, True, "authors"),
    ):
        draw_rng = np.random.default_rng(seed + 100)
        counts = Counter(
            index[tuple(selector.select(available, frequency, draw_rng).tolist())]
            for _ in range(draws)
        )
        assert set(counts) == {int(r) for r in minimal}  # every minimal row, and only those
        observed = [counts[int(r)] for r in minimal]
        assert stats.chisquare(observed).pvalue > 1e-3


def test_the_rules_differ_where_the_paper_serves_one_user() -> None:
    # batches (T = 2) 0..3 all available; user 1 was never served but its partner was served a
    # lot: the paper serves batch 0 (it holds l_min), the authors avoid it (score 9)
    frequency = np.array([9, 0, 2, 2, 2, 3, 3, 3], dtype=np.int64)
    available = np.ones(8, dtype=bool)
    for seed in range(50):
        rng = np.random.default_rng(seed)
        paper = BatchPartitionSelector(8, 4, 2, True, "paper").select(available, frequency, rng)
        authors = BatchPartitionSelector(8, 4, 2, True, "authors").select(available, frequency, rng)
        assert 1 in paper
        assert authors.tolist() == [2, 3, 4, 5]  # scores 4 and 5, the two smallest


def test_rule_is_unused_without_fairness() -> None:
    # fairness=False is uniform selection whatever the rule: the same draws
    available = np.ones(12, dtype=bool)
    frequency = np.arange(12, dtype=np.int64)
    for selector_rule in FAIRNESS_RULE_NAMES:
        selector = BatchPartitionSelector(12, 4, 2, False, selector_rule)
        assert selector.fairness_rule == selector_rule
        out = selector.select(available, frequency, np.random.default_rng(7))
        uniform = BatchPartitionSelector(12, 4, 2).select(
            available, frequency, np.random.default_rng(7)
        )
        np.testing.assert_array_equal(out, uniform)


def test_authors_rule_at_scale() -> None:
    n, k, t = 200_000, 2_000, 10
    rng = np.random.default_rng(0)
    available = rng.random(n) >= 0.05
    frequency = rng.integers(0, 50, size=n).astype(np.int64)
    out = BatchPartitionSelector(n, k, t, True, "authors").select(available, frequency, rng)
    assert out.size == k and np.all(available[out])
    ok = available.reshape(-1, t).all(axis=1)
    scores = frequency.reshape(-1, t).sum(axis=1)
    chosen = np.unique(out // t)
    assert np.sort(scores[chosen]).tolist() == np.sort(scores[ok])[: k // t].tolist()
