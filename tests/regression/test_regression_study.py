import json

import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.experiments.regression_study import (
    RUNNERS,
    run_regression_experiment,
    run_regression_study,
)
from fedprivacy.experiments.regression_study_specs import experiment_names


def test_names():
    names = experiment_names()
    for n in ("regression-main", "regression-real", "regression-theory"):
        assert n in names
    assert [f"regression-b{i}" for i in range(1, 8)] == [n for n in names if "-b" in n]
    with pytest.raises(ParameterError, match="unknown experiment"):
        run_regression_experiment("regression-b9", "/tmp")


def test_small_figure_and_combined_table(tmp_path):
    calls = []

    def factory(desc, total):
        return lambda k: calls.append((desc, total, k))

    res = run_regression_study(
        tmp_path, replications=3, sizes=(40, 60), dimension=6, progress=factory,
        names=["regression-b5", "regression-b7"],
    )  # fmt: skip
    b5 = res["experiments"]["regression-b5"]
    assert len(b5["rows"]) == 3 * 2  # gamma x n
    assert (tmp_path / "regression-b5" / "regression-b5.png").stat().st_size > 1000
    assert "mse_ana_fgd" in b5["rows"][0] and "eps_acc_na_fgd" in b5["rows"][0]
    b7 = res["experiments"]["regression-b7"]
    assert "mse_dp_sgd" in b7["rows"][0] and "mse_nbafl" in b7["rows"][0]
    md = (tmp_path / "regression_results.md").read_text()
    assert "Fig. B.5" in md and "Paper:" in md and "ANA-FGD < NA-FGD" in md
    data = json.loads((tmp_path / "regression_results.json").read_text())
    assert set(data["experiments"]) == {"regression-b5", "regression-b7"}
    assert sum(k for d, _, k in calls if d == "regression-b5") == 3 * 2 * 3


def test_theory_experiment_small(tmp_path):
    res = run_regression_experiment(
        "regression-theory", tmp_path, replications=40, sizes=(120,), dimension=5
    )
    theory = res["theory"]
    assert theory["replications"] == 200
    assert abs(theory["na_fgd"]["z_exact"]) < 4 and abs(theory["ana_fgd"]["z_exact"]) < 4
    assert (tmp_path / "regression-theory" / "regression-theory.png").exists()
    assert "tr(exact)" in (tmp_path / "regression-theory" / "results.md").read_text()


def test_pair_shares_data_and_workers(tmp_path):
    res = run_regression_study(
        tmp_path, replications=3, sizes=(40,), dimension=5, workers=2,
        names=["regression-b5", "regression-b6", "regression-theory"],
    )  # fmt: skip
    b5, b6 = res["experiments"]["regression-b5"], res["experiments"]["regression-b6"]
    assert {r["truth"] for r in b5["rows"]} == {"sparse"}
    assert {r["truth"] for r in b6["rows"]} == {"dense"}
    assert b5["shared_with"] == "regression-b6"
    # same designs and errors: OLS errors differ only through theta (equal norms, Sigma = I)
    assert len(b5["rows"]) == len(b6["rows"]) == 3
    assert set(res["timing"]) == {"regression-b5+regression-b6", "regression-theory"}
    assert (tmp_path / "regression-b6" / "regression-b6.png").exists()


@pytest.fixture
def saved_runners():
    with RUNNERS.restoring():
        yield RUNNERS


def test_runner_registry(saved_runners, tmp_path):
    assert list(RUNNERS) == experiment_names()
    with pytest.raises(ParameterError, match="'regression-real' is registered already") as info:
        RUNNERS.register("regression-real", RUNNERS["regression-theory"])
    assert info.value.name == "name"
    calls = []

    def run(out, replications, progress, sizes, dimension, data_dir):
        calls.append((out, replications, progress, sizes, dimension, data_dir))
        return {"ok": True}

    assert RUNNERS.register("regression-toy", run) is run
    res = run_regression_experiment(
        "regression-toy", tmp_path, replications=4, sizes=(10,), dimension=3, data_dir="d"
    )
    assert res == {"ok": True}
    assert calls == [(tmp_path / "regression-toy", 4, None, (10,), 3, "d")]
    assert (tmp_path / "regression-toy").is_dir()
    with pytest.raises(ParameterError) as info:
        run_regression_experiment("regression-b9", tmp_path)
    assert str(info.value).endswith("known: " + ", ".join([*experiment_names(), "regression-toy"]))
    with pytest.raises(
        ParameterError, match="^names: unknown experiment 'regression-b9'; known: regression-"
    ):
        run_regression_study(tmp_path, names=["regression-toy", "regression-b9"])
