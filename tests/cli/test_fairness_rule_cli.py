"""``--fairness [RULE]``: a bare flag is the paper's rule, ``--fairness authors`` the authors'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedprivacy.cli.main import main

SIMULATE = ["simulate", "--scheme", "multiround", "-N", "24", "-K", "6", "-T", "3"]
SIMULATE += ["--dropout", "heterogeneous", "--rounds", "40", "--metrics", "none", "--json"]


def _config(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    assert main([*SIMULATE, *extra]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert isinstance(config, dict)
    return config


def test_simulate_fairness_rule(capsys: pytest.CaptureFixture[str]) -> None:
    plain = _config(capsys)
    assert (plain["fairness"], plain["fairness_rule"]) == (False, "paper")
    bare = _config(capsys, "--fairness")
    assert (bare["fairness"], bare["fairness_rule"]) == (True, "paper")
    paper = _config(capsys, "--fairness", "paper")
    assert (paper["fairness"], paper["fairness_rule"]) == (True, "paper")
    authors = _config(capsys, "--fairness", "authors")
    assert (authors["fairness"], authors["fairness_rule"]) == (True, "authors")
    # a bare --fairness followed by another option still parses
    assert main([*SIMULATE[:-1], "--fairness", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["fairness_rule"] == "paper"


@pytest.mark.parametrize("bad", ["greedy", "", "Authors"])
def test_simulate_unknown_rule_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    assert main([*SIMULATE, "--fairness", bad]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "fedprivacy simulate: error: --fairness: must be one of paper, authors; got" in (
        captured.err
    )
    assert repr(bad) in captured.err and "Traceback" not in captured.err


def test_train_unknown_rule_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "--scheme", "multiround", "-T", "2", "--fairness", "greedy", "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert "fedprivacy train: error: --fairness: must be one of paper, authors; got 'greedy'" in err
    assert "Traceback" not in err


def test_train_rule_needs_multiround_and_fairness(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["train", "--fairness", "authors", "-q"]) == 2  # scheme random
    err = capsys.readouterr().err
    assert "--fairness: applies to the multiround scheme only" in err
    config = tmp_path / "c.toml"
    config.write_text('scheme = "multiround"\ntarget_privacy = 2\nfairness_rule = "authors"\n')
    assert main(["train", "--config", str(config), "-q"]) == 2
    err = capsys.readouterr().err
    assert "--fairness: chooses the fairness-aware selection; it needs fairness = true" in err
    assert "Traceback" not in err


def test_train_with_the_authors_rule_records_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    argv = ["train", "-N", "8", "-K", "4", "-R", "2", "--scheme", "multiround", "-T", "2"]
    argv += ["--fairness", "authors", "--metrics", "none", "-q", "--out", str(run)]
    assert main(argv) == 0
    capsys.readouterr()
    text = (run / "config.toml").read_text()
    assert "fairness = true" in text and 'fairness_rule = "authors"' in text
