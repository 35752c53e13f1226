"""``fedprivacy reproduce compose-digits``: selection, SecAgg and distributed DP in one table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.cli.main import main
from fedprivacy.dp.per_user import per_user_epsilons_by_round


def test_compose_digits_reports_accuracy_t_weak_and_per_user_epsilon_side_by_side(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["reproduce", "compose-digits", "--out", str(tmp_path), "--rounds", "6"]
    args += ["--set", "users=24", "--set", "per_round=6", "--set", "eval_every=3"]
    args += ["--set", "canaries=8"]  # 2 a round beside the 6 users (20 by default, for 60)
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "per-user epsilon" in printed and "Multi-RoundSecAgg, T=2" in printed
    assert "epsilon, models' observers" in printed and "epsilon_hat (interval)" in printed
    folder = tmp_path / "compose-digits"
    rows = {r["run"]: r for r in json.loads((folder / "comparison.json").read_text())}
    dropout = {f"multiround-t2-dropout{s}" for s in ("", "-exact", "-exact-matched")}
    assert set(rows) == {"multiround-t2", "random", "multiround-t2-budget", *dropout}
    for name, row in rows.items():
        privacy = row["privacy"][0]
        requested = 0.904 if name.endswith("matched") else 0.8
        assert privacy["mechanism"] == "distributed"
        assert privacy["noise_multiplier"] == requested
        assert privacy["accounted_noise_multiplier"]["min"] >= requested
        mode = "exact" if "exact" in name else "over-provisioned"
        assert privacy["noise_mode"] == mode
        # the table's epsilon is the one the run's own files give
        run = folder / f"{name}-seed0"
        ledger = np.loadtxt(run / "participation.csv", delimiter=",", skiprows=1).astype(bool)
        ledger = ledger[:, :24]  # the canaries' columns are no user's epsilon
        hat = row["epsilon_hat"][0]
        assert hat["canaries"] == 8 and hat["low"] <= hat["epsilon"] <= hat["high"]
        noise = [
            float(line.rsplit(",", 1)[1] or "nan")
            for line in (run / "metrics.csv").read_text().splitlines()[1:]
        ]
        eps = per_user_epsilons_by_round(ledger, np.array(noise), 1e-5)
        assert privacy["epsilon"] == pytest.approx(float(eps.max()), rel=1e-12)
    # batches of two: the server never isolates fewer than two users' updates
    assert rows["multiround-t2"]["t_weak"][0] >= 2
    assert rows["multiround-t2"]["exposed_users"] == [0]
    # the budget run: nobody above its budget, and its filter in the run's summary
    assert rows["multiround-t2-budget"]["privacy"][0]["epsilon"] <= 15.0
    budget_run = json.loads((folder / "multiround-t2-budget-seed0" / "summary.json").read_text())
    assert budget_run["privacy_filter"]["epsilon_budget"] == 15.0
    # the exact mode releases the target itself (rounded up on the grid), whoever dropped
    exact = rows["multiround-t2-dropout-exact"]["privacy"][0]["accounted_noise_multiplier"]
    assert exact["min"] == pytest.approx(0.8, rel=1e-6)
    assert (folder / "privacy.png").stat().st_size > 10_000
