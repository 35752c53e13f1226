import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.regression.config import ESTIMATORS, RegressionConfig
from fedprivacy.regression.simulation import run_regression, run_regression_grid

SMALL = {"clients": 3, "n": 40, "p": 6, "replications": 6}


def test_run_reports_every_estimator():
    res = run_regression(RegressionConfig(**SMALL, epsilon=1.0, calibration="paper"))
    d = res.to_dict()
    assert set(d["mse"]) == set(ESTIMATORS) == set(d["se"])
    assert set(d["epsilon"]) == {"na_fgd", "ana_fgd", "dp_sgd", "nbafl"}
    assert d["mse"]["fgd"] == pytest.approx(d["mse"]["ols"], rel=1e-2)
    assert d["iterations"] == int(np.ceil(0.25 * 120**0.75 / 0.5))  # c N^(3/4) / alpha
    assert res.errors["ols"].shape == (6,)
    assert any("above the target" in note for note in d["notes"])  # paper calibration


def test_grid_shares_data_and_accountant_mode_meets_target():
    cfg = RegressionConfig(**SMALL, calibration="accountant")
    out = run_regression_grid(cfg, (0.5, 4.0))
    assert [r.config.epsilon for r in out] == [0.5, 4.0]
    assert np.array_equal(out[0].errors["ols"], out[1].errors["ols"])
    for r in out:
        eps = r.config.epsilon
        assert r.epsilon_accountant["na_fgd"] == pytest.approx(eps, rel=1e-3)
        assert r.epsilon_accountant["dp_sgd"] == pytest.approx(eps, rel=1e-3)
        assert r.epsilon_accountant["nbafl"] == pytest.approx(eps, rel=1e-3)
        assert not any("above the target" in note for note in r.notes)
    assert out[1].mse["na_fgd"] < out[0].mse["na_fgd"]


def test_results_do_not_depend_on_chunking():
    a = run_regression(RegressionConfig(**SMALL, estimators=("na_fgd", "dp_sgd"), chunk=6))
    b = run_regression(RegressionConfig(**SMALL, estimators=("na_fgd", "dp_sgd"), chunk=4))
    for name in ("na_fgd", "dp_sgd"):
        assert np.allclose(a.errors[name], b.errors[name], rtol=1e-6)


def test_config_validation_and_toml(tmp_path):
    with pytest.raises(ParameterError, match="epsilon"):
        RegressionConfig(epsilon=-1.0).validate()
    with pytest.raises(ParameterError, match="replications"):
        RegressionConfig(replications=1).validate()
    with pytest.raises(ParameterError, match="N = K n > p"):
        RegressionConfig(clients=2, n=50, p=200).validate()
    with pytest.raises(ParameterError, match="estimators"):
        RegressionConfig(estimators=("ols", "lasso")).validate()
    path = tmp_path / "c.toml"
    path.write_text('clients = 4\nestimators = ["ols", "ana_fgd"]\nmechanism = "laplace"\n')
    cfg = RegressionConfig.from_toml(path)
    assert cfg.clients == 4 and cfg.estimators == ("ols", "ana_fgd")
    path.write_text("colour = 3\n")
    with pytest.raises(ParameterError, match="unknown key"):
        RegressionConfig.from_toml(path)
    assert RegressionConfig().learning_rate == 0.5
    assert RegressionConfig(dataset="diabetes").learning_rate == 0.01


def test_truths_share_the_data():
    cfg = RegressionConfig(**SMALL, estimators=("ols", "na_fgd", "dp_sgd"))
    both = run_regression_grid(cfg, (1.0,), truths=("sparse", "dense"))
    alone = run_regression(cfg.with_overrides(truth="dense", epsilon=1.0))
    assert [r.config.truth for r in both] == ["sparse", "dense"]
    for name in ("ols", "na_fgd", "dp_sgd"):
        assert np.allclose(both[1].errors[name], alone.errors[name], rtol=1e-9)
