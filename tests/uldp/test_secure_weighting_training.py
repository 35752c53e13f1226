"""ULDP-AVG-w / ULDP-SGD-w trained through the private weighting protocol (--secure-weighting)."""

import json

import pytest
import torch

from fedprivacy.cli.main import main
from fedprivacy.errors import ParameterError, WeakKeyWarning
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.run import NOISE_OS, NOISE_SEEDED, run_uldp


@pytest.mark.parametrize("method", ["ULDP-AVG-w", "ULDP-SGD-ws"])
def test_secure_weighting_trains_with_the_silos_own_noise(heart, method):
    base = UldpConfig(dataset="heart_disease", method=method, users=12, rounds=2)
    plain = run_uldp(base, dataset=heart)
    secure = run_uldp(
        base.with_overrides(secure_weighting=True, secure_key_bits=768, insecure_test_keys=True),
        dataset=heart,
    )
    report = secure.summary()["secure_weighting"]
    assert report["rounds"] == 2 and report["key_bits"] == 768
    assert report["max_abs_deviation"] < 1e-8  # Theorem 4: within the fixed-point precision
    # the engine's float32 pre-noise sum plus the noise the silos report they added
    assert report["engine_float32_deviation"] < 1e-4
    assert set(report["setup_seconds"]) and set(report["round_seconds_total"])
    # the protocol's silos drew their own noise (OS randomness), not the run's seeded noise
    assert not torch.allclose(plain.final_params, secure.final_params, rtol=0, atol=1e-3)
    assert plain.noise_source == NOISE_SEEDED and secure.noise_source == NOISE_OS
    assert secure.summary()["noise_source"] == NOISE_OS
    # the accountant uses the grid's effective noise multiplier: a hair below sigma
    sigma = secure.config.noise_multiplier
    effective = report["noise_multiplier_effective"]
    assert report["noise_multiplier_nominal"] == sigma
    assert sigma * (1 - 1e-8) < effective < sigma
    for p, s in zip(plain.records, secure.records, strict=True):
        assert p.get("epsilon") <= s.get("epsilon") <= p.get("epsilon") * (1 + 1e-6)
    assert "secure_weighting" not in plain.summary()


def test_secure_weighting_needs_a_weighted_method_and_a_real_key():
    with pytest.raises(ParameterError, match="secure_weighting"):
        UldpConfig(method="ULDP-AVG", secure_weighting=True).validate()
    with pytest.raises(ParameterError, match="secure_key_bits"):
        UldpConfig(
            method="ULDP-AVG-w", secure_weighting=True, secure_key_bits=256, insecure_test_keys=True
        ).validate()
    with pytest.raises(ParameterError, match="insecure_test_keys"):
        UldpConfig(method="ULDP-AVG-w", secure_weighting=True, secure_key_bits=1024).validate()
    with pytest.raises(ParameterError, match="insecure_test_keys"):
        UldpConfig(method="ULDP-AVG-w", insecure_test_keys="yes").validate()
    with pytest.warns(WeakKeyWarning):
        UldpConfig(method="ULDP-AVG-w", secure_weighting=True, secure_key_bits=2048).validate()


def test_cli_reports_secure_weighting(capsys, data_dir):
    data = str(data_dir)
    args = ["uldp", "--dataset", "heart_disease", "--method", "ULDP-AVG-w", "--users", "8"]
    args += ["--rounds", "1", "--secure-weighting", "--secure-key-bits", "768"]
    assert main([*args, "--data-dir", data, "--json"]) == 2  # small keys need the test option
    assert "insecure-test-keys" in capsys.readouterr().err
    assert main([*args, "--insecure-test-keys", "--data-dir", data, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["secure_weighting"]["max_abs_deviation"] < 1e-8
    assert out["noise_source"] == NOISE_OS
    assert main([*args, "--insecure-test-keys", "--data-dir", data, "--quiet"]) == 0
    text = capsys.readouterr().out
    assert f"noise: {NOISE_OS}" in text and "effective noise multiplier" in text
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
