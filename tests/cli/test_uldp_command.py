from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fedprivacy.cli.main import main
from fedprivacy.uldp.method_names import METHODS

DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


@pytest.fixture()
def data_dir() -> Path:
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    return DATA


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def heart(data_dir: Path, *extra: str) -> tuple[str, ...]:
    return (
        "uldp",
        "--dataset",
        "heart_disease",
        "--users",
        "20",
        "--rounds",
        "2",
        "--data-dir",
        str(data_dir),
        *extra,
    )


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["uldp", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--sampling-rate" in out and "ULDP-AVG-ws" in out


def test_json_keys(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, out, err = run(
        capsys, *heart(data_dir, "--method", "ULDP-AVG-ws", "--sampling-rate", "0.5", "--json")
    )
    assert code == 0
    data = json.loads(out)
    for key in ("metric", "metric_name", "epsilon", "method", "dataset", "data_source", "rounds"):
        assert key in data
    assert data["metric_name"] == "accuracy" and data["method"] == "ULDP-AVG-ws"
    assert data["dataset"] == "heart_disease" and data["rounds"] == 2
    assert data["sampling_rate"] == 0.5 and 0 < data["epsilon"] < 5
    assert len(data["records"]) == 2
    assert data["noise_source"].startswith("seeded (reproducible; no privacy against")
    assert "rounds:" not in err  # no progress bar with --json


def test_human_output_and_files(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, *heart(data_dir, "--method", "ULDP-SGD", "--out", str(tmp_path)))
    assert code == 0
    assert "ULDP-SGD on heart_disease" in out and "epsilon" in out and "final accuracy" in out
    assert "is against the aggregation server, which chooses and knows the user sample" in out
    assert "noise: seeded (reproducible; no privacy against whoever holds the seed)" in out
    assert {p.name for p in tmp_path.iterdir()} == {
        "rounds.csv",
        "summary.json",
        "uldp.png",
        "privacy.md",
        "config.toml",
        "checkpoint.pt",
    }


def test_synthetic_creditcard_is_marked(capsys: pytest.CaptureFixture[str]) -> None:
    argv = (
        "uldp",
        "--dataset",
        "creditcard-synthetic",
        "--method",
        "ULDP-SGD",
        "--users",
        "10",
        "--rounds",
        "1",
        "--json",
    )
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert "synthetic stand-in" in json.loads(out)["data_source"]


def test_config_file_and_override(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path
) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text('dataset = "heart_disease"\nmethod = "ULDP-NAIVE"\nusers = 15\nrounds = 3\n')
    argv = ("uldp", "--config", str(cfg), "--rounds", "1", "--data-dir", str(data_dir), "--json")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    data = json.loads(out)
    assert data["method"] == "ULDP-NAIVE" and data["users"] == 15 and data["rounds"] == 1


def test_validation_errors(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, _, err = run(capsys, "uldp", "--dataset", "heart_disease", "--users", "5")
    assert code == 2 and "--method" in err and "--config" in err
    code, _, err = run(capsys, *heart(data_dir, "--method", "ULDP-AVG", "--sampling-rate", "0.5"))
    assert code == 2 and "--sampling-rate" in err and "-s" in err
    code, _, err = run(capsys, *heart(data_dir, "--method", "ULDP-AVG", "--silos", "3"))
    assert code == 2 and "fixed silos" in err
    code, _, err = run(capsys, *heart(data_dir, "--method", "ULDP-AVG", "--noise-multiplier", "0"))
    assert code == 2 and "error: --noise-multiplier: must be" in err  # the flag, not the field
    with pytest.raises(SystemExit) as exc:
        main(["uldp", "--dataset", "heart_disease", "--method", "ULDP-FOO"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert all(name in err for name in METHODS)


def test_missing_data_dir(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = (
        "uldp",
        "--dataset",
        "heart_disease",
        "--method",
        "ULDP-AVG",
        "--users",
        "5",
        "--rounds",
        "1",
        "--data-dir",
        str(tmp_path / "nothing"),
    )
    code, _, err = run(capsys, *argv)
    assert code == 2 and "does not exist" in err


def test_group_on_tcga_prints_the_cox_caveat(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    argv = ("uldp", "--dataset", "tcga_brca", "--method", "ULDP-GROUP-2", "--users", "20")
    code, out, _ = run(capsys, *argv, "--rounds", "1", "--data-dir", str(data_dir))
    assert code == 0
    assert "caveat: ULDP-GROUP on a Cox loss" in out
    code, out, _ = run(capsys, *heart(data_dir, "--method", "ULDP-GROUP-2"))
    assert code == 0 and "caveat" not in out


def test_json_privacy_object_like_train(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, out, _ = run(
        capsys, *heart(data_dir, "--method", "ULDP-AVG-ws", "--sampling-rate", "0.5", "--json")
    )
    assert code == 0
    data = json.loads(out)
    privacy = data["privacy"]
    for key in ("t_weak", "t_strong", "exposed_users", "epsilon", "delta", "per_user_epsilon"):
        assert key in privacy
    assert privacy["mechanism"] == "ULDP-AVG-ws" and privacy["accountant"] == "rdp"
    assert privacy["epsilon"] == data["epsilon"] and privacy["delta"] == data["delta"]
    # one meaning of epsilon: the largest per-user epsilon, here against the server, which knows
    # the sample; the released models' (amplified by sub-sampling) is under its own key
    assert privacy["epsilon"] == privacy["per_user_epsilon"]["max"] == data["epsilon_server"]
    assert privacy["epsilon_released"] == data["epsilon_released"] < data["epsilon"]
    last = data["records"][-1]  # the per-round records say the same
    assert (last["epsilon"], last["epsilon_released"]) == (
        data["epsilon"],
        data["epsilon_released"],
    )
    assert "server" in privacy["epsilon_adversary"]
    # per user against the server, from the ledger of samples: the most-sampled user is the max
    spread = privacy["per_user_epsilon"]
    assert spread["min"] <= spread["median"] <= spread["max"] == data["epsilon_server"]
    assert privacy["noise_multiplier"] == data["noise_multiplier"]
    assert privacy["t_weak"]["upper"] >= 1 and isinstance(privacy["exposed_users"], int)
    assert any(c.startswith("Noise: seeded") for c in privacy["caveats"])


def test_json_privacy_without_dp_claims_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("uldp", "--dataset", "creditcard-synthetic", "--method", "DEFAULT")
    code, out, _ = run(capsys, *argv, "--users", "10", "--rounds", "1", "--json")
    assert code == 0
    privacy = json.loads(out)["privacy"]
    assert privacy["epsilon"] is None and privacy["per_user_epsilon"] is None
    assert privacy["epsilon_server"] is None and privacy["accountant"] is None


def test_a_selection_scheme_prints_the_server_view_and_amplifies_for_the_models_only(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    argv = heart(data_dir, "--method", "ULDP-AVG-ws", "--scheme", "multiround", "-K", "4")
    code, out, _ = run(capsys, *argv, "-T", "2")
    assert code == 0
    assert "random allocation over the batch schedule" in out
    assert "It never holds against the server or the parties" in out
    assert "server view (ledger of who each round aggregated): T_weak" in out
    code, out, _ = run(capsys, *argv, "-T", "2", "--json")
    data = json.loads(out)
    assert data["epsilon_released"] < data["epsilon_server"] == data["epsilon"]


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (("--method", "ULDP-AVG", "--scheme", "random"), "--scheme:"),
        (("--method", "ULDP-AVG-s", "-T", "2"), "--target-privacy:"),
        (("--method", "ULDP-AVG-s", "--scheme", "multiround", "-K", "4"), "--target-privacy:"),
        (
            ("--method", "ULDP-AVG-s", "--scheme", "random", "-K", "4", "--sampling-rate", "0.2"),
            "--per-round:",
        ),
        (
            ("--method", "ULDP-AVG-s", "--scheme", "multiround", "-K", "4", "-T", "3"),
            "--target-privacy:",
        ),
    ],
)
def test_bad_selection_options_are_errors_naming_the_flag(
    capsys: pytest.CaptureFixture[str], data_dir: Path, extra: tuple[str, ...], flag: str
) -> None:
    code, _, err = run(capsys, *heart(data_dir, *extra))
    assert code == 2 and flag in err and "Traceback" not in err


def test_resume_continues_a_stopped_run_bit_for_bit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # creditcard-synthetic ships with the package: no data needed
    args = ("uldp", "--dataset", "creditcard-synthetic", "--method", "ULDP-AVG-w", "--users")
    args += ("30", "--silos", "3", "--epochs", "1", "--rounds", "4", "--json")
    code, out, _ = run(capsys, *args)
    straight = json.loads(out)["records"]
    folder = str(tmp_path / "run")
    assert run(capsys, *args, "--out", folder, "--stop-after", "2")[0] == 0
    code, out, _ = run(capsys, "uldp", "--resume", folder, "--json")
    resumed = json.loads(out)["records"]
    assert code == 0 and len(resumed) == 4
    for a, b in zip(straight, resumed, strict=True):
        a.pop("seconds"), b.pop("seconds")
        assert a == b
    code, _, err = run(capsys, "uldp", "--resume", folder, "--noise-multiplier", "2", "--json")
    assert code == 2 and "only --rounds" in err and "--noise-multiplier" in err
    assert "Traceback" not in err
    code, _, err = run(capsys, "uldp", "--resume", str(tmp_path / "nothing"), "--json")
    assert code == 2 and "has no config.toml" in err


def test_secagg_sums_the_silos_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["uldp", "--dataset", "creditcard-synthetic", "--method", "ULDP-AVG", "-N", "20"]
    argv += ["--silos", "3", "-R", "1"]
    assert main([*argv, "--secagg"]) == 2
    assert "--update-clip: is required with secagg" in capsys.readouterr().err
    assert main([*argv, "--secagg", "--update-clip", "50"]) == 0
    assert "sum over silos: SecAgg between the 3 silos" in capsys.readouterr().out
    assert main(argv) == 0
    assert "sum over silos: in the clear" in capsys.readouterr().out


def test_gradient_flag_chooses_how_users_are_differentiated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("uldp", "--dataset", "creditcard-synthetic", "--method", "ULDP-AVG-w", "--users")
    args += ("30", "--silos", "3", "--epochs", "1", "--rounds", "2", "--json")
    records = {}
    for gradient in ("vmap", "bmm"):
        code, out, _ = run(capsys, *args, "--gradient", gradient)
        assert code == 0
        records[gradient] = json.loads(out)["records"]
    for a, b in zip(records["vmap"], records["bmm"], strict=True):
        assert a["epsilon"] == b["epsilon"]  # the same mechanism, the same accounting
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)  # the same model, to rounding
    with pytest.raises(SystemExit) as stop:  # argparse's own choice check
        run(capsys, *args, "--gradient", "loop")
    assert stop.value.code == 2 and "--gradient: invalid choice" in capsys.readouterr().err
