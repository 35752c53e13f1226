"""Bad options refused in one line naming the flag, exit 2, before any work (issue #30's cases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedprivacy.cli.main import main

SIM = ["simulate", "--scheme", "random", "-N", "20", "-K", "4", "--rounds", "5"]


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # refused by the parser
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]  # argparse's usage lines come before its one-line error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*SIM, "-T", "2"], "--target-privacy: only the multiround scheme has batches"),
        ([*SIM, "--fairness"], "--fairness: applies to the multiround scheme only"),
        ([*SIM, "--dimension", "10"], "--dimension: is the update length of --secagg"),
        ([*SIM, "--time-limit", "0"], "--time-limit: must be a number of seconds > 0"),
        (["train", "--stop-after", "0", "--rounds", "3"], "--stop-after: must be >= 1, got 0"),
        (["train", "--stop-after", "5", "--rounds", "3"], "--stop-after: must be <= 3, got 5"),
        (["train", "--rounds", "2", "--beta", "0.5"], "--beta: applies to --partition dirichlet"),
        (["train", "--rounds", "2", "--local-lr-decay", "0.5"], "--local-lr-decay: needs"),
        ([*SIM, "--guard", "refuse", "--guard-target", "100"], "--guard-target: must be at most"),
        ([*SIM, "--secagg", "--secagg-degree", "1000"], "--secagg-degree: must be at most"),
        ([*SIM, "--out", ""], "--out: is empty"),
        (["train", "--rounds", "1", "--out", "/proc/fedprivacy-x"], "error: --out: "),
        (["audit", "/nonexistent/log.csv"], "file: No such file or directory"),
        (["audit", "/nonexistent/log.csv", "--follow"], "file: No such file or directory"),
        (["flower", "deploy", "-N", "4", "--tls", "--no-tls"], "--no-tls contradicts --tls"),
        (["train", "--rounds", "1", "--update-clip", "1e-30"], "--update-clip: 1e-30 would round"),
        (["account", "-z", "1e300", "-T", "10", "--delta", "1e-5"], "--noise-multiplier: must"),
        (
            ["account", "-z", "1e300", "-T", "10", "--delta", "1e-5", "--accountant", "pld"],
            "--noise-multiplier: must be at most 1e+100",
        ),
    ],
)
def test_refused_in_one_line_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in _refusal(argv, capsys)


def test_reproduce_refuses_an_empty_seed_list_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["reproduce", "compose-digits", "--seeds", " ", "--rounds", "1"]
    err = _refusal([*argv, "--out", str(tmp_path / "r")], capsys)
    assert "--seeds: expected at least one seed" in err
    assert not (tmp_path / "r").exists()


def test_audit_refuses_a_negative_time_limit_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.csv"
    log.write_text("a,b,c\n1,1,0\n0,1,1\n")
    err = _refusal(["audit", "--time-limit", "-1", str(log)], capsys)
    assert "argument --time-limit: must be a number of seconds > 0, got '-1'" in err


def test_plain_words_for_a_missing_file_a_window_and_a_negative_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.toml")
    assert f"{missing}: no such experiment file" in _refusal(["reproduce", missing], capsys)
    err = _refusal(["reproduce", "attack-cifar10", "--window", "0"], capsys)
    assert "--window: the attack needs window >= 1, got 0" in err
    log = tmp_path / "long.csv"
    log.write_text("round,user\n0,1\n-1,2\n")
    assert "round -1 is negative (rounds count from 0)" in _refusal(["audit", str(log)], capsys)


def test_regress_refuses_the_simulation_options_with_a_real_dataset(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _refusal(["regress", "--dataset", "diabetes", "--n", "50", "--p", "5"], capsys)
    assert "--n: describes the simulated data; --n, --p mean nothing with --dataset" in err


def test_reproduce_list_json_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {"name", "title"} <= set(listed[0]) and len(listed) >= 20


def test_uldp_refuses_a_key_size_without_the_protocol_that_uses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["uldp", "--dataset", "creditcard-synthetic", "--method", "ULDP-AVG", "-N", "9"]
    err = _refusal([*argv, "-R", "1", "--secure-key-bits", "1024"], capsys)
    assert "--secure-key-bits: sets the Paillier key of --secure-weighting" in err


def test_an_interrupt_stops_in_one_line_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import fedprivacy.experiments.selection_run as selection_run

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # as Ctrl-C, or SIGTERM under terminate_as_interrupt

    monkeypatch.setattr(selection_run, "run_selection_experiment", interrupted)
    assert main(SIM) == 130
    assert capsys.readouterr().err == "fedprivacy simulate: interrupted\n"


def test_an_out_folder_the_run_would_mix_into_is_refused_before_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("a user's own file")
    err = _refusal([*SIM, "--out", str(mine)], capsys)
    assert "--out:" in err and "holds no fedprivacy run" in err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]  # nothing written
    run = tmp_path / "run"
    assert main(["train", "-R", "1", "--metrics", "none", "--out", str(run), "-q"]) == 0
    capsys.readouterr()
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir()}
    err = _refusal(["train", "-R", "2", "--out", str(run)], capsys)  # a run: --resume it
    assert "--out:" in err and f"--resume {run}" in err
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before
    assert main([*SIM, "--out", str(tmp_path / "sim"), "--json"]) == 0
    assert main([*SIM, "--out", str(tmp_path / "sim"), "--json"]) == 0  # a simulation's: replaced


def test_reading_a_log_stops_at_the_time_limit_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log too large to read within --time-limit is refused when the time is up, not after."""
    log = tmp_path / "log.csv"
    log.write_text("\n".join(",".join("01"[(r + u) % 2] for u in range(50)) for r in range(600)))
    err = _refusal(["audit", str(log), "--time-limit", "1e-9"], capsys)
    assert err.startswith("fedprivacy audit: error: --time-limit: reading ")
    assert "stopped at row" in err  # inside the parse, not after it
