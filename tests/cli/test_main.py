from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for sub in ("simulate", "audit", "demo"):
        with pytest.raises(SystemExit) as exc:
            main([sub, "--help"])
        assert exc.value.code == 0
        assert "usage" in capsys.readouterr().out


def test_simulate_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(
        capsys,
        "simulate",
        "--scheme",
        "multiround",
        "--users",
        "60",
        "--per-round",
        "12",
        "--target-privacy",
        "4",
        "--dropout",
        "heterogeneous",
        "--fairness",
        "--rounds",
        "300",
        "--seed",
        "2",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert code == 0
    data = json.loads(out)
    for key in ("average_cardinality", "fairness_gap", "t_weak", "t_strong"):
        assert key in data
    assert data["t_weak"]["lower"] >= 4 and data["t_weak"]["exact"]
    assert data["t_strong"] == 4
    assert (tmp_path / "metrics.png").exists() and (tmp_path / "metrics.csv").exists()


def test_simulate_random_exposes_users(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "simulate", "--scheme", "random", "-N", "20", "-K", "4", "--rounds", "200", "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert data["t_weak"] == {**data["t_weak"], "lower": 1, "upper": 1, "exact": True}
    assert len(data["exposed_users"]) == 20


def test_simulate_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "simulate",
        "--scheme",
        "partition",
        "-N",
        "40",
        "-K",
        "10",
        "--rounds",
        "50",
        "--dropout",
        "0.05",
        "--quiet",
    )
    assert code == 0 and "T_weak" in out and "10" in out


def test_simulate_bad_parameters_name_the_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys,
        "simulate",
        "--scheme",
        "multiround",
        "-N",
        "100",
        "-K",
        "12",
        "-T",
        "5",
        "--rounds",
        "10",
    )
    assert code == 2 and "--target-privacy:" in err
    code, _, err = run(
        capsys, "simulate", "--scheme", "random", "-N", "10", "-K", "20", "--rounds", "10"
    )
    assert code == 2 and "--per-round:" in err
    with pytest.raises(SystemExit):
        main(
            [
                "simulate",
                "--scheme",
                "random",
                "-N",
                "10",
                "-K",
                "2",
                "--rounds",
                "5",
                "--dropout",
                "lots",
            ]
        )
    code, _, err = run(
        capsys,
        "simulate",
        "--scheme",
        "random",
        "-N",
        "10",
        "-K",
        "2",
        "--rounds",
        "5",
        "--dropout",
        "1.5",
    )
    assert code == 2 and "dropout" in err


def test_audit_with_and_without_header(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text("alice,bob,carol\n1,1,0\n0,1,1\n1,0,1\n")
    code, out, _ = run(capsys, "audit", str(log), "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["rounds"], data["users"]) == (3, 3)
    assert data["t_weak"]["upper"] == 1 and data["t_weak"]["exact"]
    assert data["exposed_users"] == ["alice", "bob", "carol"]
    z = np.array(data["witness"]["z"])
    p = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]])
    assert np.count_nonzero(z @ p) == 1
    bare = tmp_path / "bare.csv"
    bare.write_text("1,1,0,0\n0,0,1,1\n")
    code, out, _ = run(capsys, "audit", str(bare))
    assert code == 0 and "T_weak = 2" in out and "No user" in out


def test_audit_rejects_malformed_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("1,0,1\n1,2,0\n")  # (two columns with a 2 would be a long-form log)
    code, _, err = run(capsys, "audit", str(bad))
    assert code == 2 and "expected 0 or 1" in err
    code, _, err = run(capsys, "audit", str(tmp_path / "missing.csv"))
    assert code == 2


def test_simulate_secagg_json_and_audit_of_its_ledger(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    common = ["simulate", "--scheme", "multiround", "-N", "24", "-K", "8", "-T", "4", "-R", "30"]
    common += ["--dropout", "0", "--secagg", "--dimension", "16", "--protocol-dropout", "0.2"]
    common += ["--seed", "2", "--json"]
    reports = {}
    for policy in ("atomic", "partial"):
        out_dir = tmp_path / policy
        code, out, _ = run(capsys, *common, "--batch-policy", policy, "--out", str(out_dir))
        assert code == 0
        summary = json.loads(out)
        secagg = summary["secagg"]
        assert len(secagg["client_seconds"]) == len(secagg["server_seconds"]) == 30
        assert 0 < secagg["rounds_aggregated"] <= 30
        assert secagg["max_abs_error"] < 1e-6
        assert (out_dir / "secagg.csv").read_text().count("\n") == 31
        code, out, _ = run(capsys, "audit", str(out_dir / "participation.csv"), "--json")
        assert code == 0
        reports[policy] = json.loads(out)
    assert reports["atomic"]["t_weak"]["upper"] == 4
    assert reports["partial"]["t_weak"]["upper"] < 4


def test_protocol_options_need_secagg(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys,
        "simulate",
        "--scheme",
        "random",
        "-N",
        "10",
        "-K",
        "3",
        "-R",
        "5",
        "--protocol-dropout",
        "0.1",
    )
    assert code == 2 and "secagg" in err
    code, _, err = run(
        capsys,
        "simulate",
        "--scheme",
        "random",
        "-N",
        "10",
        "-K",
        "3",
        "-R",
        "5",
        "--secagg",
        "--dimension",
        "0",
    )
    assert code == 2 and "dimension" in err


def test_weak_key_warnings_reach_the_user_once_as_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import warnings

    from fedprivacy.cli.main import _warnings_as_lines
    from fedprivacy.errors import WeakKeyWarning

    with _warnings_as_lines("uldp"):
        for _ in range(3):  # the same weak key, checked at three layers
            warnings.warn("2048-bit keys are weak", WeakKeyWarning, stacklevel=1)
        with pytest.warns(UserWarning, match="not ours"):
            warnings.warn("not ours", UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err.count("fedprivacy uldp: warning: 2048-bit keys are weak") == 1
    assert "WeakKeyWarning" not in err and "warnings.warn" not in err


def test_demo_json_prints_one_json_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "demo", "--rounds", "30", "--out", str(tmp_path / "d"), "--json")
    assert code == 0
    summary = json.loads(out)
    assert len(summary["schemes"]) == 9 and (tmp_path / "d" / "summary.json").is_file()
