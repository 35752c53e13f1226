"""Clear errors naming the flag: sizes that cannot fit, config fields, human output."""

from __future__ import annotations

import pytest

from fedprivacy.cli.main import main

HUGE = "1000000000000"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["simulate", "--scheme", "random", "-N", HUGE, "-K", "2", "-R", "3", "--metrics", "none"],
         "--users"),
        (["simulate", "--scheme", "random", "-N", "10", "-K", "2", "-R", HUGE, "--metrics", "none"],
         "--rounds"),
        (["uldp", "--dataset", "creditcard-synthetic", "--method", "DEFAULT", "--users", HUGE,
          "--rounds", "1"], "--users"),
        (["regress", "--n", HUGE], "--n"),
        (["demo", "--rounds", HUGE], "--rounds"),
    ],
)  # fmt: skip
def test_sizes_that_cannot_fit_are_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(f"fedprivacy {argv[0]}: error: {flag}: ")
    assert ("memory" in err or "matrix" in err) and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["simulate", "--scheme", "random", "-N", "10", "-K", "0", "-R", "3"], "--per-round"),
        (["train", "--per-round", "0", "-q"], "--per-round"),
        (["train", "--protocol-dropout", "2", "-q"], "--protocol-dropout"),
        (["regress", "--p", "0"], "--p"),
        (["uldp", "--dataset", "creditcard-synthetic", "--method", "DEFAULT", "--users", "100000",
          "--rounds", "1", "-q"], "--users"),
    ],
)  # fmt: skip
def test_errors_name_the_flag_not_the_field(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(f"fedprivacy {argv[0]}: error: {flag}: "), err


def test_bounds_mode_says_so_and_seconds_are_no_dict(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--scheme", "random", "-N", "40", "-K", "20", "-R", "10"]
    code, out, _ = run(capsys, *argv, "--metrics", "bounds")
    assert code == 0
    assert "--metrics bounds" in out and "time limit" not in out
    seconds = next(line for line in out.splitlines() if "seconds" in line)
    assert "{" not in seconds and "selection" in seconds and "metrics" in seconds


def test_no_progress_bars_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    # capsys's stderr is not a terminal: no carriage returns although --quiet is not given
    code, _, err = run(capsys, "simulate", "--scheme", "random", "-N", "20", "-K", "4", "-R", "50")
    assert code == 0 and "\r" not in err and "selection" not in err
