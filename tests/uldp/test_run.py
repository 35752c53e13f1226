from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import torch

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.results import write_outputs
from fedprivacy.uldp.run import COX_DP_SGD_CAVEAT, privacy_caveats, run_uldp


def test_run_records_and_determinism(data_dir: Path, tmp_path: Path) -> None:
    cfg = UldpConfig(
        dataset="heart_disease", method="ULDP-AVG-w", users=30, rounds=3, data_dir=str(data_dir)
    )
    calls: list[int] = []
    res = run_uldp(cfg, progress=calls.append)
    assert calls == [1, 1, 1]
    assert [r.round_index + 1 for r in res.records] == [1, 2, 3]
    for t, r in enumerate(res.records, start=1):
        expected = PrivacyAccountant().compose_gaussian(5.0, t).epsilon(1e-5)
        assert r.get("epsilon") == pytest.approx(expected)
        assert 0 <= r.get("metric") <= 1 and math.isfinite(r.get("loss")) and r.seconds > 0
    s = res.summary()
    assert s["metric_name"] == "accuracy" and s["method"] == "ULDP-AVG-w"
    assert s["epsilon_released"] == res.final.get("epsilon") and s["silos"] == 4
    # no user sub-sampling: the server's view has the same guarantee as the released models
    assert s["epsilon_server"] == s["epsilon_released"] == s["epsilon"]
    assert set(s["epsilon_adversaries"]) == {"epsilon", "epsilon_released", "epsilon_server"}
    assert "UCI Heart Disease" in s["data_source"]
    again = run_uldp(cfg)
    assert torch.equal(again.final_params, res.final_params)  # same seed, same run
    files = write_outputs(res, tmp_path / "out")
    assert [f.name for f in files] == ["rounds.csv", "summary.json", "privacy.md", "uldp.png"]
    rows = list(csv.DictReader((tmp_path / "out" / "rounds.csv").open()))
    assert len(rows) == 3 and float(rows[-1]["epsilon"]) == pytest.approx(res.final.get("epsilon"))
    assert [int(r["exposed_users"]) for r in rows] == [0, 0, 0]  # every user, every round
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert len(data["records"]) == 3 and data["metric"] == s["metric"]
    assert (tmp_path / "out" / "uldp.png").stat().st_size > 1000
    privacy = (tmp_path / "out" / "privacy.md").read_text()
    assert "ULDP-AVG-w" in privacy and "T_weak" in privacy


def test_run_tcga_c_index_and_eval_every(data_dir: Path) -> None:
    cfg = UldpConfig(
        dataset="tcga_brca",
        method="ULDP-SGD",
        users=20,
        rounds=3,
        eval_every=2,
        data_dir=str(data_dir),
    )
    res = run_uldp(cfg)
    assert res.metric_name == "c_index"
    assert math.isnan(res.records[0].get("metric")) and 0 <= res.records[1].get("metric") <= 1
    assert 0 <= res.final.get("metric") <= 1  # the last round is always evaluated
    assert res.allocation["num_silos"] == 6
    assert res.caveats == () and res.summary()["caveats"] == []


def test_group_dp_sgd_on_a_cox_loss_carries_its_caveat(data_dir: Path) -> None:
    cfg = UldpConfig(
        dataset="tcga_brca", method="ULDP-GROUP-2", users=20, rounds=1, data_dir=str(data_dir)
    )
    res = run_uldp(cfg)
    assert res.caveats == (COX_DP_SGD_CAVEAT,)
    assert res.summary()["caveats"] == [COX_DP_SGD_CAVEAT]
    assert privacy_caveats("ULDP-GROUP-max", "binary") == ()
    assert privacy_caveats("ULDP-AVG", "survival") == ()


def test_run_default_and_synthetic_creditcard() -> None:
    cfg = UldpConfig(dataset="creditcard-synthetic", method="DEFAULT", users=20, rounds=1)
    res = run_uldp(cfg)
    s = res.summary()
    assert "synthetic stand-in" in s["data_source"]
    assert s["epsilon"] is None and s["private"] is False
    assert s["roc_auc"] is not None and s["silos"] == 5


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_missing_gpu_is_a_clear_error_before_any_work(tmp_path: Path) -> None:
    from fedprivacy.errors import ParameterError

    cfg = UldpConfig(
        dataset="heart_disease",
        method="ULDP-AVG",
        users=10,
        rounds=1,
        device="cuda",
        data_dir=str(tmp_path),  # no data there: the device is checked first
    )
    with pytest.raises(ParameterError, match="sees no CUDA GPU"):
        run_uldp(cfg)


def test_sub_sampled_run_reports_both_adversaries(data_dir: Path) -> None:
    cfg = UldpConfig(
        dataset="heart_disease",
        method="ULDP-AVG-ws",
        users=30,
        rounds=2,
        sampling_rate=0.3,
        data_dir=str(data_dir),
    )
    res = run_uldp(cfg, epsilon_at=200)
    assert res.final.get("epsilon") == pytest.approx(
        PrivacyAccountant().compose_gaussian(5.0, 2, 0.3).epsilon(1e-5)
    )
    assert res.final.get("epsilon_server") > 1.5 * res.final.get("epsilon")  # no amplification
    s = res.summary()
    assert s["epsilon_server"] == res.final.get("epsilon_server")
    at = s["epsilon_at"]
    assert at["rounds"] == 200
    # against the server, after 200 rounds in the worst case: a user sampled every round
    assert at["epsilon_server"] == pytest.approx(
        PrivacyAccountant().compose_gaussian(5.0, 200, 1.0).epsilon(1e-5)
    )
    assert at["epsilon_server"] > 3 * at["epsilon"]


def test_rounds_csv_counts_the_users_the_ledger_exposes(data_dir: Path, tmp_path: Path) -> None:
    cfg = UldpConfig(
        dataset="heart_disease",
        method="ULDP-AVG-s",
        users=20,
        rounds=30,
        scheme="random",
        per_round=4,
        data_dir=str(data_dir),
    )
    res = run_uldp(cfg)
    write_outputs(res, tmp_path)
    rows = list(csv.DictReader((tmp_path / "rounds.csv").open()))
    exposed = [int(r["exposed_users"]) for r in rows]
    assert exposed == sorted(exposed) and exposed[0] == 0  # exposure never goes away
    assert res.server_view is not None and exposed[-1] == res.server_view["exposed_users"] > 0
