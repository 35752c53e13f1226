import json
import os
from pathlib import Path

import pytest

from fedprivacy.cli.main import main

DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)
SMALL = ("regress", "--clients", "3", "--n", "30", "--p", "5", "--replications", "4")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_keys(capsys):
    code, out, _ = run(capsys, *SMALL, "--epsilon", "2", "--seed", "1", "--json")
    assert code == 0
    data = json.loads(out)
    keys = {"ols", "fgd", "na_fgd", "ana_fgd", "dp_sgd", "nbafl"}
    assert set(data["mse"]) == keys and set(data["se"]) == keys
    assert set(data["epsilon"]) == {"na_fgd", "ana_fgd", "dp_sgd", "nbafl"}
    s = data["settings"]
    assert (s["clients"], s["n"], s["p"], s["epsilon"], s["replications"]) == (3, 30, 5, 2.0, 4)
    assert s["delta"] == 1e-5 and s["calibration"] == "accountant" and s["truth"] == "sparse"
    assert data["target_epsilon"] == 2.0 and data["iterations"] > 0


def test_the_default_delivers_the_requested_epsilon(capsys):
    """The paper's calibration gave NA-FGD 2.16 and NbAFL 0.36 for --epsilon 0.8."""
    argv = ("regress", "--clients", "15", "--n", "150", "--p", "20", "--replications", "2")
    code, out, _ = run(capsys, *argv, "--epsilon", "0.8", "--json")
    assert code == 0
    epsilons = json.loads(out)["epsilon"]
    for name in ("na_fgd", "ana_fgd", "nbafl"):
        assert epsilons[name] == pytest.approx(0.8, rel=0.02), name
    code, out, _ = run(capsys, *argv, "--epsilon", "0.8", "--calibration", "paper", "--json")
    paper = json.loads(out)["epsilon"]
    assert paper["na_fgd"] > 1.0 and paper["nbafl"] < 0.6  # the paper's formulas miss the target


def test_text_output_and_options(capsys, tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('truth = "dense"\nestimators = ["ols", "na_fgd", "ana_fgd"]\n')
    code, out, _ = run(
        capsys, *SMALL, "--epsilon", "1", "--config", str(cfg), "--calibration", "accountant",
        "--mechanism", "laplace",
    )  # fmt: skip
    assert code == 0
    assert "dense theta" in out and "laplace noise" in out and "ANA-FGD" in out
    assert "DP-SGD" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--epsilon", "-1"), "epsilon"),
        (("--epsilon", "1", "--delta", "2"), "delta"),
        (("--epsilon", "1", "--estimators", "ols,lasso"), "estimators"),
        (("--epsilon", "1", "--p", "500"), "N = K n > p"),
        (("--epsilon", "1", "--config", "/nonexistent.toml"), "file not found"),
    ],
)
def test_errors(capsys, args, message):
    code, _, err = run(capsys, *SMALL, *args)
    assert code == 2 and message in err and "fedprivacy regress: error" in err


def test_bad_choice_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main([*SMALL, "--truth", "medium"])
    assert exc.value.code == 2


def test_dataset_mentions_nio(capsys):
    if not (DATA / "diabetes_sklearn").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    argv = ("regress", "--dataset", "diabetes", "--data-dir", str(DATA), "--clients", "4")
    code, out, _ = run(capsys, *argv, "--replications", "3", "--iterations", "200", "--json")
    assert code == 0
    data = json.loads(out)
    assert "NIO" in data["data_note"] and any("NIO" in n for n in data["notes"])
    assert data["mse"]["ols"] == 0.0 and data["reference"].startswith("pooled OLS")
    assert data["settings"]["clients"] == 4 and data["settings"]["p"] == 11
    assert "truth" not in data["settings"]
    code, out, _ = run(capsys, *argv, "--replications", "3", "--iterations", "200")
    assert "NIO" in out and "diabetes data" in out
    code, _, err = run(capsys, *argv, "--replications", "3", "--data-dir", "/nonexistent")
    assert code == 2 and "does not exist" in err
