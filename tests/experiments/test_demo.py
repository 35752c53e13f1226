from __future__ import annotations

import json
from pathlib import Path

from fedprivacy.experiments.demo import DemoConfig, run_demo


def test_small_demo_writes_figures_and_table(tmp_path: Path) -> None:
    cfg = DemoConfig(rounds=150, metrics_time_limit=1.0, point_time_limit=0.2, attack_window=150)
    report = run_demo(cfg, tmp_path, log=lambda _: None)
    for name in (
        "fig3a_t_weak.png",
        "fig3b_fairness_gap.png",
        "fig3c_cardinality.png",
        "fig4_tradeoff.png",
        "summary.md",
        "summary.json",
    ):
        assert (tmp_path / name).exists(), name
    rows = {r["scheme"]: r for r in report["schemes"]}  # type: ignore[index]
    assert len(rows) == 9  # three baselines, Multi-RoundSecAgg T = 6, 4, 3 under both rules
    for t in (6, 4, 3):
        for label, rule in (
            (f"Multi-RoundSecAgg, T={t}", "paper"),
            (f"Multi-RoundSecAgg, T={t}, authors rule", "authors"),
        ):
            row = rows[label]
            assert row["fairness_rule"] == rule
            assert row["t_weak_lower"] >= t and row["t_strong"] >= t and row["exposed_users"] == 0
            assert row["ls_users_reconstructed"] == 0
            key = f"multiround-{t}" + ("" if rule == "paper" else "-authors")
            assert (tmp_path / f"metrics_{key}.csv").exists()
    assert rows["Random selection"]["fairness_rule"] is None
    assert rows["User partition"]["t_weak_lower"] == 12
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["schemes"][0]["scheme"] == "Random selection"
