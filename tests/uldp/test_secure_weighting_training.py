"""ULDP-AVG-w / ULDP-SGD-w trained through the private weighting protocol (--secure-weighting)."""

import json

import pytest
import torch

from fedprivacy.cli.main import main
from fedprivacy.errors import ParameterError
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.run import run_uldp


@pytest.mark.parametrize("method", ["ULDP-AVG-w", "ULDP-SGD-ws"])
def test_secure_weighting_trains_the_same_model_as_the_plaintext_weights(heart, method):
    base = UldpConfig(dataset="heart_disease", method=method, users=12, rounds=2)
    plain = run_uldp(base, dataset=heart)
    secure = run_uldp(
        base.with_overrides(secure_weighting=True, secure_key_bits=768), dataset=heart
    )
    report = secure.summary()["secure_weighting"]
    assert report["rounds"] == 2 and report["key_bits"] == 768
    assert report["max_abs_deviation"] < 1e-8  # Theorem 4: within the fixed-point precision
    assert set(report["setup_seconds"]) and set(report["round_seconds_total"])
    # the same noise and sampling: only float rounding separates the two models
    assert torch.allclose(plain.final_params, secure.final_params, rtol=0, atol=1e-5)
    assert [r.epsilon for r in plain.records] == [r.epsilon for r in secure.records]
    assert "secure_weighting" not in plain.summary()


def test_secure_weighting_needs_a_weighted_method():
    with pytest.raises(ParameterError, match="secure_weighting"):
        UldpConfig(method="ULDP-AVG", secure_weighting=True).validate()
    with pytest.raises(ParameterError, match="secure_key_bits"):
        UldpConfig(method="ULDP-AVG-w", secure_weighting=True, secure_key_bits=256).validate()


def test_cli_reports_secure_weighting(capsys, data_dir):
    data = str(data_dir)
    args = ["uldp", "--dataset", "heart_disease", "--method", "ULDP-AVG-w", "--users", "8"]
    args += ["--rounds", "1", "--secure-weighting", "--key-bits", "768", "--json"]
    assert main([*args, "--data-dir", data]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["secure_weighting"]["max_abs_deviation"] < 1e-8
    assert (
        main(
            [
                "uldp",
                "--dataset",
                "heart_disease",
                "--method",
                "ULDP-SGD",
                "--users",
                "8",
                "--rounds",
                "1",
                "--secure-weighting",
                "--data-dir",
                data,
            ]
        )
        == 2
    )
    assert "weighted methods" in capsys.readouterr().err
