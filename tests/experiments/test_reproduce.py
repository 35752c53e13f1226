"""The comparison table of a reproduction: the privacy columns, and epsilon_hat with canaries."""

from __future__ import annotations

from fedprivacy.experiments.reproduce import Experiment, ReproductionRow, comparison_markdown

PRIVACY = {
    "epsilon": 29.2,
    "delta": 1e-5,
    "per_user_epsilon": {"min": 0.0, "median": 18.5, "max": 29.2},
    "epsilon_released": 21.3,
    "accounted_noise_multiplier": {"min": 1.05, "max": 1.05},
}
SUMMARY = {"test_accuracy": 0.7, "t_weak": 2, "average_cardinality": 12.0, "fairness_gap": 0.3}


def _row(epsilon_hat: dict[str, float] | None) -> ReproductionRow:
    row = ReproductionRow("multiround-t2", "Multi-RoundSecAgg, T=2", [], [], None, 60)
    row.add(0, {**SUMMARY, "exposed_users": 0, "privacy": PRIVACY, "epsilon_hat": epsilon_hat})
    return row


def test_both_epsilons_and_epsilon_hat_are_columns_when_the_runs_have_them() -> None:
    experiment = Experiment("compose-digits", "Composed", "paper", "note", ())
    hat = {"epsilon": 2.5, "low": 0.0, "high": 6.9, "canaries": 20}
    table = comparison_markdown(experiment, [_row(hat)], "digits")
    assert "epsilon, models' observers | noise multiplier | epsilon_hat (interval) |" in table
    assert "| 29.2 (18.5) | 21.3 | 1.05 to 1.05 | 2.5 (0-6.9) |" in table
    assert "epsilon_hat: the canaries' empirical epsilon" in table
    plain = comparison_markdown(experiment, [_row(None)], "digits")
    assert "epsilon_hat" not in plain  # no canaries: no column
