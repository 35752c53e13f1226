"""``train --epsilon-budget``: no reported epsilon passes the budget; batches retire whole."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.cli.main import main
from fedprivacy.dp.per_user import per_user_epsilons

BASE = ["train", "-N", "12", "-K", "4", "-R", "30", "--dp", "central", "--json", "-q"]


def _train(capsys: pytest.CaptureFixture[str], out: Path, *extra: str) -> dict[str, object]:
    assert main([*BASE, "--out", str(out), *extra]) == 0
    return dict(json.loads(capsys.readouterr().out))


@pytest.mark.parametrize(
    ("scheme", "accountant"),
    [(("--scheme", "random"), "pld"), (("--scheme", "multiround", "-T", "2"), "pld")],
)
def test_no_user_is_reported_above_the_budget(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, scheme: tuple[str, ...], accountant: str
) -> None:
    budget = 4.0
    out = _train(
        capsys, tmp_path, "--noise-multiplier", "2", "--epsilon-budget", str(budget), *scheme
    )
    privacy, filt = out["privacy"], out["privacy_filter"]
    assert isinstance(privacy, dict) and isinstance(filt, dict)
    assert filt["accountant"] == privacy["accountant"] == accountant
    assert privacy["epsilon"] <= budget < privacy["per_user_epsilon_rdp"]["max"]  # PLD: 3 rounds
    counts = np.loadtxt(tmp_path / "participation.csv", delimiter=",", skiprows=1).sum(axis=0)
    assert counts.max() == filt["max_rounds_per_user"] == 3
    assert per_user_epsilons(counts.astype(np.int64), 2.0, 1e-5, "pld").max() <= budget
    assert filt["users_retired"] == int((counts == 3).sum()) > 0
    assert out["skipped_rounds"] > 0  # the rounds without enough users left are skipped
    text = (tmp_path / "privacy.md").read_text()
    assert "## Budget" in text and "- before round " in text
    if "-T" in scheme:  # whole batches retire, so the server still isolates no fewer than T
        assert all(len(r["users"]) % 2 == 0 for r in filt["retired"])
        assert out["t_weak_lower"] >= 2


def test_distributed_dp_is_budgeted_by_rdp(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = _train(
        capsys,
        tmp_path,
        "--secagg",
        "--dp",
        "distributed",
        "--noise-multiplier",
        "2",
        "--epsilon-budget",
        "4",
        "-R",
        "12",
    )
    privacy, filt = out["privacy"], out["privacy_filter"]
    assert isinstance(privacy, dict) and isinstance(filt, dict)
    assert filt["accountant"] == privacy["accountant"] == "rdp"  # a sum of discrete Gaussians
    assert privacy["per_user_epsilon_rdp"] is None and privacy["epsilon"] <= 4.0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dp", "none", "--epsilon-budget", "2"], "--epsilon-budget: needs a DP mechanism"),
        (["--noise-multiplier", "1", "--epsilon-budget", "-1"], "--epsilon-budget"),
        (["--noise-multiplier", "1", "--epsilon-budget", "nan"], "--epsilon-budget"),
        (["--noise-multiplier", "2", "--epsilon-budget", "0.5"], "holds not even one round"),
    ],
)
def test_a_bad_budget_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_resumed_run_keeps_the_budget(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # the filter is rebuilt from the checkpoint's ledger and records: nobody passes the budget
    # across the interruption, and the run ends as the uninterrupted one
    common = ["--noise-multiplier", "2", "--epsilon-budget", "4", "--checkpoint-every", "5"]
    whole = _train(capsys, tmp_path / "whole", *common)
    assert main([*BASE, "--out", str(tmp_path / "cut"), *common, "--stop-after", "10"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "cut"), "--json", "-q"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["privacy"]["epsilon"] <= 4.0
    assert resumed["privacy"]["per_user_epsilon"] == whole["privacy"]["per_user_epsilon"]
    both = [
        np.loadtxt(d / "participation.csv", delimiter=",", skiprows=1)
        for d in (tmp_path / "whole", tmp_path / "cut")
    ]
    np.testing.assert_array_equal(both[0], both[1])
