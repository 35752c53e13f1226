"""The privacy report of a run: both adversaries' figures, from the ledger and the mechanism."""

from __future__ import annotations

import csv
import json

import dp_accounting
import numpy as np
import pytest

from fedprivacy.cli.main import main
from fedprivacy.dp.per_user import per_user_epsilons
from fedprivacy.fl.mechanism import CentralGaussian, NoMechanism
from fedprivacy.report import privacy_report


def test_without_dp_the_report_claims_no_guarantee() -> None:
    r = privacy_report(
        np.array([2, 1, 0]),
        NoMechanism(),
        1e-5,
        t_weak=None,
        t_strong=None,
        exposed_users=None,
        secure_aggregation=False,
    )
    assert r.epsilon is None and r.per_user_epsilon is None and r.delta is None
    assert any("no formal guarantee" in c for c in r.caveats)
    assert "no differential privacy" in r.to_markdown()


def test_train_with_central_dp_reports_per_user_epsilon_from_the_ledger(capsys, tmp_path):  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    args = ["train", "-N", "10", "-K", "4", "-R", "4", "--dp", "central"]
    args += ["--noise-multiplier", "1.2", "--clip", "0.5", "--json", "--out", str(run)]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    privacy = out["privacy"]
    for key in (
        "t_weak",
        "t_strong",
        "exposed_users",
        "epsilon",
        "delta",
        "per_user_epsilon",
        "mechanism",
        "accountant",
    ):
        assert key in privacy
    assert privacy["mechanism"] == "central" and privacy["delta"] == 1e-5
    assert privacy["epsilon_server"] is None  # the server adds the noise: no guarantee against it
    assert set(privacy["t_weak"]) == {"lower", "upper", "exact"}
    counts = np.loadtxt(run / "participation.csv", delimiter=",", skiprows=1).sum(axis=0)
    eps = per_user_epsilons(counts.astype(np.int64), 1.2, 1e-5)
    assert privacy["per_user_epsilon"]["max"] == privacy["epsilon"]
    assert privacy["epsilon"] == float(eps.max())
    assert privacy["per_user_epsilon"]["median"] == float(np.median(eps))
    assert "per-user epsilon" in (run / "privacy.md").read_text()


def test_dp_flags_without_a_mechanism_name_the_flag(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["train", "--noise-multiplier", "1", "-q"]) == 2
    assert "--noise-multiplier:" in capsys.readouterr().err
    assert main(["train", "--dp", "central", "-q"]) == 2
    assert "--noise-multiplier:" in capsys.readouterr().err
    assert main(["train", "--delta", "1e-6", "-q"]) == 2
    assert "--delta:" in capsys.readouterr().err


def test_central_report_against_secure_aggregation_states_who_sees_what() -> None:
    r = privacy_report(
        np.array([3, 3]),
        CentralGaussian(noise_multiplier=2.0, clip=1.0),
        1e-6,
        t_weak=None,
        t_strong=2,
        exposed_users=0,
        secure_aggregation=True,
    )
    assert r.per_user_epsilon is not None and r.per_user_epsilon["min"] == r.epsilon
    text = " ".join(r.caveats)
    assert "one round" in text and "noise-free sum" in text


def test_train_with_distributed_dp_accounts_the_noise_really_aggregated(capsys, tmp_path):  # type: ignore[no-untyped-def]
    """Redone from the run's files: the ledger and each round's noise multiplier."""
    run = tmp_path / "run"
    args = ["train", "-N", "8", "-K", "4", "-R", "3", "--secagg", "--dp", "distributed"]
    args += ["--noise-multiplier", "0.9", "--json", "--out", str(run), "--metrics", "none"]
    assert main(args) == 0
    privacy = json.loads(capsys.readouterr().out)["privacy"]
    assert privacy["mechanism"] == "distributed" and privacy["noise_multiplier"] == 0.9
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    noise = [float(r["noise_multiplier"] or "nan") for r in rows]  # empty: nothing aggregated
    released = [z for z, r in zip(noise, rows, strict=True) if int(r["aggregated"])]
    assert released and all(np.isfinite(released))
    assert min(released) >= 0.9  # over-provisioned: never below the target
    assert privacy["accounted_noise_multiplier"] == {"min": min(released), "max": max(released)}
    ledger = np.loadtxt(run / "participation.csv", delimiter=",", skiprows=1).astype(bool)
    eps = []
    for u in range(ledger.shape[1]):
        accountant = dp_accounting.rdp.RdpAccountant()
        for t in np.flatnonzero(ledger[:, u]):
            accountant.compose(dp_accounting.GaussianDpEvent(noise[t]))
        eps.append(float(accountant.get_epsilon(1e-5)) if ledger[:, u].any() else 0.0)
    assert privacy["epsilon"] == pytest.approx(max(eps), rel=1e-9)
    assert privacy["per_user_epsilon"]["median"] == pytest.approx(float(np.median(eps)), rel=1e-9)
    assert privacy["wrap_around_log10_bound"] < -40
    assert privacy["epsilon_server"] == privacy["epsilon"]  # the noise is in all it can compute
    text = (run / "privacy.md").read_text()
    assert "Distributed DP" in text and "wrapped around the modulus" in text
