"""What a new user sees: data-not-found, unknown experiments, early refusals, figures."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from fedprivacy.cli.main import main
from fedprivacy.experiments.catalogue import program_experiments
from fedprivacy.experiments.plots import STYLES
from fedprivacy.experiments.reproduce import experiment_names


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_heart_disease_data_shows_its_own_layout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["uldp", "--dataset", "heart_disease", "--method", "DEFAULT", "--users", "10"]
    code, _, err = run(capsys, *argv, "--rounds", "1", "--data-dir", str(tmp_path / "nope"))
    assert code == 2
    assert "heart_disease/processed.cleveland.data" in err
    assert "mnist" not in err.lower() and "cifar" not in err.lower()


def test_unknown_experiment_lists_all_of_them(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "reproduce", "nonexistent")
    assert code == 2
    for name in [*experiment_names(), *program_experiments()]:
        assert name in err
    assert "reproduce list" in err


def test_demo_refuses_bad_rounds_before_any_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "demo"
    code, out, err = run(capsys, "demo", "--rounds", "-1", "--out", str(out_dir))
    assert code == 2 and out == "" and "--rounds" in err
    assert not out_dir.exists()


def test_tiny_simulation_figure_raises_no_matplotlib_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["simulate", "--scheme", "random", "-N", "2", "-K", "2", "-R", "3", "--out"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, _, _ = run(capsys, *argv, str(tmp_path))
    assert code == 0 and (tmp_path / "metrics.png").exists()
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []


def test_curve_styles_are_distinct() -> None:
    pairs = {(s["linestyle"], s["marker"]) for s in STYLES}
    assert len(pairs) == len(STYLES) >= 6
