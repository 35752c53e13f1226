"""A run whose noise swamps its updates is warned before it starts, and its report says so."""

from __future__ import annotations

import pytest

from fedprivacy.cli.main import main
from fedprivacy.errors import NoiseWarning
from fedprivacy.fl.mechanism import CentralGaussian
from fedprivacy.fl.noise_check import SWAMPED, noise_to_signal, swamped
from fedprivacy.fl.training_config import TrainConfig, build_training


def test_the_ratio_is_the_noise_norm_over_the_largest_clipped_mean() -> None:
    # the MLP: 800 parameters, 4 users a round, z = 1
    assert noise_to_signal(CentralGaussian(1.0, 1.0), dimension=800, per_round=4) == pytest.approx(
        800**0.5 / 4
    )
    assert len(swamped(CentralGaussian(1.0, 1.0), dimension=800, per_round=4)) == 1
    # 400 users a round: a hundredth of the noise per user, not swamped
    assert swamped(CentralGaussian(1.0, 1.0), dimension=800, per_round=400) == ()
    assert SWAMPED == 5.0


def test_a_swamped_run_is_warned_once_and_its_report_says_why() -> None:
    config = TrainConfig(users=8, per_round=4, rounds=1, dp="central", noise_multiplier=1.0)
    with pytest.warns(NoiseWarning, match="times the largest clipped update"):
        build_training(config)
    quiet = TrainConfig(users=8, per_round=4, rounds=1, dp="central", noise_multiplier=0.01)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseWarning)
        build_training(quiet)  # 0.01 x sqrt(9610) / 4 = 0.25: not swamped


def test_the_command_line_warns_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "-N", "8", "-K", "4", "-R", "1", "--dp", "central"]
    assert main([*argv, "--noise-multiplier", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if "warning:" in line]
    assert len(lines) == 1 and lines[0].startswith("fedprivacy train: warning: The noise is about")
    assert "the run will learn little" in out  # the report's caveat, in --json's privacy
