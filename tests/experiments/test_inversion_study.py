import json
import os
from pathlib import Path

import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.experiments.catalogue import program_experiments
from fedprivacy.experiments.inversion_study import InversionStudyConfig, run_inversion_study

DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


def test_study_on_mnist_writes_the_contract_and_t1_equals_the_true_update(tmp_path):
    if not (DATA / "mnist").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    cfg = InversionStudyConfig.from_settings(
        {"datasets": "mnist", "images": 1, "iterations": 40, "users": 8, "per_round": 4}
    )
    summary = run_inversion_study(tmp_path, cfg, str(DATA))
    data = json.loads((tmp_path / "inversion.json").read_text())
    assert data["dataset"] == "mnist" and data["images"] == 1 and data["batch_size"] == 1
    assert set(data["psnr"]) >= {"1", "2", "4"} and set(data["mse"]) >= {"1", "2", "4"}
    res = summary["datasets"]["mnist"]
    # random selection over 40 rounds: P has full rank, least squares is exact, and the
    # inversion of the estimate is the inversion of the true update (same seed, same input)
    assert res["selection"]["1"]["rank"] == 8 and res["selection"]["1"]["mean_error"] < 1e-12
    assert res["psnr"]["1"] == pytest.approx(res["psnr"]["true"], abs=1e-3)
    # batches of T: the server learns only batch sums
    assert res["selection"]["2"]["rank"] <= 4 and res["selection"]["4"]["rank"] <= 2
    assert res["selection"]["2"]["identifiable_users"] == 0
    assert res["selection"]["4"]["mean_error"] > 0.5
    # what Multi-RoundSecAgg leaves the server: each estimate is its batch's average update
    for t in ("1", "2", "4"):
        assert res["selection"][t]["max_gap_to_batch_average"] < 1e-9
    assert (tmp_path / "fig9_mnist.png").is_file()
    assert "T = 4" in (tmp_path / "inversion.md").read_text()


def test_bad_settings_are_typed_errors():
    with pytest.raises(ParameterError, match="datasets"):
        InversionStudyConfig.from_settings({"datasets": "imagenet"})
    with pytest.raises(ParameterError, match="unknown key"):
        InversionStudyConfig.from_settings({"colour": 1})
    with pytest.raises(ParameterError):
        InversionStudyConfig.from_settings({"batch_size": 5})
    with pytest.raises(ParameterError):
        InversionStudyConfig.from_settings({"images": "many"})


def test_registered_for_reproduce():
    entry = program_experiments()["attack-inversion"]
    with pytest.raises(ParameterError):
        entry.check_options({"seeds": [1]})
    entry.check_options({"settings": {"images": 1}, "data_dir": None, "progress": None})
