from __future__ import annotations

import json

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.experiments.selection_outputs import write_outputs
from fedprivacy.experiments.selection_run import SelectionConfig, run_selection_experiment
from fedprivacy.participation.metrics import cardinality_curve, fairness_gap_curve


def test_streaming_metrics_equal_matrix_metrics(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = SelectionConfig(
        scheme="random", users=30, per_round=5, rounds=80, seed=4, dropout=0.3, metrics_time_limit=5
    )
    result = run_selection_experiment(config)
    p = result.ledger.matrix()
    np.testing.assert_allclose(result.fairness_gap, fairness_gap_curve(p))
    np.testing.assert_allclose(result.cardinality, cardinality_curve(p))
    assert result.t_weak is not None
    assert np.all(np.diff(result.t_weak.upper[~np.isnan(result.t_weak.upper)]) <= 0)
    files = write_outputs(result, tmp_path)
    names = {f.name for f in files}
    assert {"metrics.csv", "summary.json", "participation.csv", "metrics.png"} <= names
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["t_weak"]["upper"] == int(result.t_weak.upper[-1])
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert len(lines) == 81


def test_metrics_none_skips_privacy() -> None:
    config = SelectionConfig(
        scheme="multiround",
        users=1000,
        per_round=100,
        target_privacy=10,
        rounds=20,
        metrics="none",
        dropout=0.05,
    )
    result = run_selection_experiment(config)
    assert result.t_weak is None and result.summary()["t_weak"] is None


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"scheme": "nope"}, "scheme"),
        ({"per_round": 200}, "per_round"),
        ({"metrics": "fast"}, "metrics"),
        ({"rounds": 0}, "rounds"),
        ({"users": 10**6, "rounds": 1000}, "metrics"),
    ],
)
def test_config_validation(kwargs: dict[str, object], name: str) -> None:
    base: dict[str, object] = {"scheme": "random", "users": 100, "per_round": 10, "rounds": 10}
    base.update(kwargs)
    with pytest.raises(ParameterError, match=name):
        SelectionConfig(**base).validate()  # type: ignore[arg-type]
