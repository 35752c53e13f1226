from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from fedprivacy.uldp.metrics import (
    accuracy,
    concordance_index,
    roc_auc,
)


def _c_index_brute(t: np.ndarray, r: np.ndarray, e: np.ndarray) -> float:
    num = den = 0.0
    for i, j in itertools.permutations(range(len(t)), 2):
        if not e[i]:
            continue
        if t[i] < t[j] or (t[i] == t[j] and not e[j]):
            den += 1
            num += 1.0 if r[i] > r[j] else 0.5 if r[i] == r[j] else 0.0
    return num / den


def test_concordance_index_against_pair_count() -> None:
    assert concordance_index([1, 2, 3], [3, 2, 1], [1, 1, 1]) == 1.0
    assert concordance_index([1, 2, 3], [1, 2, 3], [1, 1, 1]) == 0.0
    assert concordance_index([1, 2, 3], [1, 1, 1], [1, 1, 1]) == 0.5
    assert math.isnan(concordance_index([1, 2], [0.1, 0.2], [0, 0]))
    rng = np.random.default_rng(0)
    for _ in range(5):
        n = 40
        t = rng.integers(1, 12, n).astype(float)  # many tied times
        r = np.round(rng.normal(size=n), 1)  # tied risks
        e = rng.random(n) < 0.6
        assert concordance_index(t, r, e) == pytest.approx(_c_index_brute(t, r, e), abs=1e-12)


def test_roc_auc_and_accuracy() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 200)
    s = np.round(rng.normal(size=200) + y, 1)
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert math.isnan(roc_auc([0.1, 0.2], [1, 1]))
    assert accuracy(np.array([1.0, -1.0, 2.0]), np.array([1, 0, 0])) == pytest.approx(2 / 3)
    logits = np.array([[0.1, 0.9], [2.0, 0.0]])
    assert accuracy(logits, np.array([1, 1])) == 0.5
