from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.uldp.checkpoint import CHECKPOINT
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.results import UldpResult
from fedprivacy.uldp.run import run_uldp


def _config(method: str, **changes: object) -> UldpConfig:
    base = {
        "dataset": "creditcard-synthetic",
        "method": method,
        "users": 40,
        "silos": 3,
        "rounds": 5,
        "distribution": "zipf",
        "local_epochs": 1,
    }
    return UldpConfig.from_mapping({**base, **changes})


def _same(a: UldpResult, b: UldpResult) -> None:
    assert torch.equal(a.final_params, b.final_params)
    ra = [{k: v for k, v in asdict(r).items() if k != "seconds"} for r in a.records]
    rb = [{k: v for k, v in asdict(r).items() if k != "seconds"} for r in b.records]
    np.testing.assert_equal(ra, rb)
    assert a.summary()["epsilon"] == b.summary()["epsilon"]
    np.testing.assert_array_equal(a.participation, b.participation)


@pytest.mark.parametrize(
    "method", ["ULDP-AVG-ws", "ULDP-SGD", "ULDP-NAIVE", "ULDP-GROUP-2", "DEFAULT"]
)
def test_a_resumed_run_is_the_straight_run_bit_for_bit(method: str, tmp_path: Path) -> None:
    config = _config(method, sampling_rate=0.5) if method.endswith("-ws") else _config(method)
    straight = run_uldp(config)
    first = run_uldp(config, checkpoint_dir=tmp_path, stop_after_rounds=2)
    assert len(first.records) == 2 and (tmp_path / CHECKPOINT).is_file()
    resumed = run_uldp(config, checkpoint_dir=tmp_path, resume=True)
    _same(straight, resumed)
    # the checkpoint of the finished run extends it further, as a longer straight run
    longer = run_uldp(config.with_overrides(rounds=7))
    _same(longer, run_uldp(config.with_overrides(rounds=7), checkpoint_dir=tmp_path, resume=True))


def test_resume_refuses_what_does_not_continue_the_run(tmp_path: Path) -> None:
    config = _config("ULDP-AVG")
    with pytest.raises(ParameterError, match="no checkpoint.pt"):
        run_uldp(config, checkpoint_dir=tmp_path, resume=True)
    with pytest.raises(ParameterError, match="stop_after"):
        run_uldp(config, checkpoint_dir=tmp_path, stop_after_rounds=0)
    run_uldp(config, checkpoint_dir=tmp_path, stop_after_rounds=1)
    with pytest.raises(ParameterError, match="noise_multiplier"):
        run_uldp(config.with_overrides(noise_multiplier=2.0), checkpoint_dir=tmp_path, resume=True)
    run_uldp(config, checkpoint_dir=tmp_path)  # all 5 rounds
    with pytest.raises(ParameterError, match="more than 3"):
        run_uldp(config.with_overrides(rounds=3), checkpoint_dir=tmp_path, resume=True)
    (tmp_path / CHECKPOINT).write_bytes(b"not a checkpoint")
    with pytest.raises(ParameterError, match="cannot read"):
        run_uldp(config, checkpoint_dir=tmp_path, resume=True)
    secure = _config(
        "ULDP-AVG-w", secure_weighting=True, secure_key_bits=1024, insecure_test_keys=True
    )
    with pytest.raises(ParameterError, match="private weighting"):
        run_uldp(secure, checkpoint_dir=tmp_path, resume=True)
