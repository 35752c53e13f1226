"""``train --noise-mode``: the noise really released in each mode; exact needs distributed DP."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fedprivacy.cli.main import main
from fedprivacy.errors import ParameterError
from fedprivacy.uldp.config import UldpConfig

BASE = ["train", "-N", "16", "-K", "8", "-R", "6", "--secagg", "--dp", "distributed", "-q"]


def _noise(out: Path) -> list[float]:
    rows = csv.DictReader((out / "metrics.csv").open())
    return [float(r["noise_multiplier"]) for r in rows if r["noise_multiplier"]]


@pytest.mark.parametrize("mode", ["exact", "over-provisioned"])
def test_train_reports_the_noise_really_released_in_either_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, mode: str
) -> None:
    args = [*BASE, "-z", "1", "--noise-mode", mode, "--protocol-dropout", "0.2", "--json"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    privacy = json.loads(capsys.readouterr().out)["privacy"]
    assert privacy["noise_mode"] == mode
    noise = _noise(tmp_path)
    assert noise and min(noise) >= 1.0
    if mode == "exact":  # no survivor keeps its excess unless it left before unmasking
        assert min(noise) == pytest.approx(1.0, rel=1e-9)
    else:  # over-provisioned for the threshold (5 of 8): more noise whenever more are summed
        assert max(noise) > 1.05
    assert f"noise mode {mode}" in (tmp_path / "privacy.md").read_text()


def test_the_exact_mode_is_refused_where_no_party_adds_distributed_noise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["train", "--dp", "central", "-z", "1", "--noise-mode", "exact", "-q"]) == 2
    assert "--noise-mode: applies to distributed DP" in capsys.readouterr().err
    with pytest.raises(ParameterError, match="noise_mode"):
        UldpConfig(dataset="creditcard-synthetic", noise_mode="exact").validate()


@pytest.mark.parametrize("transport", ["--no-tls", "--simulation"])
def test_flower_deploy_refuses_the_exact_mode_without_node_authentication(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, transport: str
) -> None:
    """The nodes' consistency check needs their keys: refused before any process starts."""
    args = ["flower", "deploy", "-N", "6", "--secagg", "--dp", "distributed", "-z", "1"]
    out = tmp_path / "run"
    assert main([*args, "--noise-mode", "exact", transport, "--out", str(out)]) == 2
    assert "--noise-mode: exact needs node authentication" in capsys.readouterr().err
    assert not out.exists()
