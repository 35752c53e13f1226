"""``flower deploy --overlap-rounds``: checked before any process starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedprivacy.cli.main import main
from fedprivacy.flower.deploy.apps import app_pyproject


def test_overlapped_rounds_without_secure_ones_are_refused_before_any_process(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    assert main(["flower", "deploy", "-N", "6", "--overlap-rounds", "--out", str(out)]) == 2
    assert "--overlap-rounds: overlaps secure rounds: add --secagg" in capsys.readouterr().err
    assert not out.exists()


def test_overlapped_rounds_with_the_privacy_guard_are_refused_before_any_process(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The guard must see round t's outcome; overlapping would silently turn it off."""
    config = tmp_path / "guarded.toml"
    config.write_text('guard = "refuse"\n')
    out = tmp_path / "run"
    args = ["flower", "deploy", "-N", "6", "--secagg", "--overlap-rounds", "--config", str(config)]
    assert main([*args, "--out", str(out)]) == 2
    assert "--overlap-rounds: selects round t+1 before round t" in capsys.readouterr().err
    assert not out.exists()


def test_the_app_reads_the_option_from_its_run_config() -> None:
    assert "overlap-rounds = false" in app_pyproject()
