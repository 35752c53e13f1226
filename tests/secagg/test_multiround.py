"""Batch-atomic aggregation keeps the multi-round guarantee under protocol dropouts."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import BernoulliDropout
from fedprivacy.participation.privacy import t_weak
from fedprivacy.participation.selectors import BatchPartitionSelector
from fedprivacy.secagg import SecAggParameters
from fedprivacy.secagg.driver import Stage
from fedprivacy.secagg.multiround import (
    SecureSelectionConfig,
    aggregation_policy,
    run_secure_selection,
    sample_dropouts,
)


def complete(selected: list[int]) -> SecAggParameters:
    codec = FixedPointCodec.for_sum(1.0, len(selected), 32)
    return SecAggParameters.create(os.urandom(16), 0, selected, 3, codec)


def test_atomic_policy_keeps_only_whole_batches() -> None:
    selected = [0, 1, 2, 3, 8, 9, 10, 11]
    policy = aggregation_policy(complete(selected), 4, "atomic")
    assert policy(frozenset(selected)) == frozenset(selected)
    assert policy(frozenset(selected) - {9}) == frozenset({0, 1, 2, 3})
    assert policy(frozenset({1, 2, 3, 9})) == frozenset()


def test_round_and_partial_policies() -> None:
    selected = [4, 5, 6, 7]
    whole = aggregation_policy(complete(selected), 2, "round")
    assert whole(frozenset(selected)) == frozenset(selected)
    assert whole(frozenset({4, 5, 6})) == frozenset()
    partial = aggregation_policy(complete(selected), 2, "partial")
    assert partial(frozenset({4, 5, 6})) == frozenset({4, 5, 6})
    with pytest.raises(ParameterError, match="batch_policy"):
        aggregation_policy(complete(selected), 2, "most")


def test_sample_dropouts_rate_and_stages() -> None:
    rng = np.random.default_rng(0)
    drops = sample_dropouts(list(range(4000)), 0.25, rng)
    assert 900 < len(drops) < 1100
    assert {int(s) for s in drops.values()} == {int(s) for s in Stage}
    assert sample_dropouts([1, 2], 0.0, rng) == {}
    with pytest.raises(ParameterError):
        sample_dropouts([1], 1.0, rng)


def run(policy: str, seed: int = 3) -> tuple[np.ndarray, float, int]:
    n, k, t = 24, 8, 4
    selector = BatchPartitionSelector(n, k, t)
    config = SecureSelectionConfig(
        dimension=6, protocol_dropout=0.2, batch_policy=policy, batch_size=t
    )
    ledger, report = run_secure_selection(
        selector, BernoulliDropout(n, 0.0), 40, np.random.default_rng(seed), config
    )
    summary = report.summary()
    assert summary["rounds_aggregated"] + summary["rounds_aborted"] == 40  # type: ignore[operator]
    return ledger.matrix(), float(summary["max_abs_error"]), int(summary["rounds_aborted"])  # type: ignore[arg-type]


def test_atomic_policy_keeps_t_and_partial_loses_it() -> None:
    atomic, error, aborted = run("atomic")
    assert error < 1e-6
    assert aborted > 0  # some rounds lost whole batches below the threshold
    batches = atomic.reshape(atomic.shape[0], -1, 4)
    # every aggregated set is a union of whole batches
    assert np.all((batches.sum(axis=2) == 0) | (batches.sum(axis=2) == 4))
    assert t_weak(atomic).upper == 4
    partial, _, _ = run("partial")
    batches = partial.reshape(partial.shape[0], -1, 4)
    assert np.any((batches.sum(axis=2) > 0) & (batches.sum(axis=2) < 4))
    result = t_weak(partial)
    assert result.upper is not None and result.upper < 4
