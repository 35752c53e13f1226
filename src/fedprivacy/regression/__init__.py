"""Noise-added federated gradient descent for linear regression (Qi, Wang and Wang).

Estimators (vectorised over replications: every array has a leading replication axis):

* :func:`~fedprivacy.regression.estimators.ols`, :func:`~fedprivacy.regression.estimators.fgd`,
  :func:`~fedprivacy.regression.estimators.na_fgd` (NA-FGD and, as ``.average``, ANA-FGD; the
  Laplace variant with ``mechanism="laplace"``), :func:`~fedprivacy.regression.estimators.ana_fgd`;
* baselines :func:`~fedprivacy.regression.baselines.dp_sgd` (record-level, Opacus-style) and
  :func:`~fedprivacy.regression.baselines.nbafl` (Wei et al. 2020);
* noise calibration in :mod:`fedprivacy.regression.privacy` (``paper`` and ``accountant`` modes;
  the accountant's epsilon for the noise actually used is always reported), the Gaussian and
  Laplace accountants in :mod:`fedprivacy.regression.accounting` and NbAFL's noise in
  :mod:`fedprivacy.regression.nbafl_calibration`;
* :func:`~fedprivacy.regression.schedule.iteration_count` (Appendix C.2's ``T = c N^(3/4) /
  alpha``) and :func:`~fedprivacy.regression.schedule.learning_rates`;
* the conditional covariances of Theorems 2-3 in :mod:`fedprivacy.regression.theory`;
* :func:`~fedprivacy.regression.simulation.run_regression` (one setting, every estimator: MSE,
  standard errors, epsilons) driven by :class:`~fedprivacy.regression.config.RegressionConfig`.

The study (Appendix B's figures) is :mod:`fedprivacy.experiments.regression_study`; the command
line is ``fedprivacy regress``.
"""

from fedprivacy.regression.accounting import laplace_epsilon
from fedprivacy.regression.baselines import DPSGDResult, NbAFLResult, dp_sgd, nbafl
from fedprivacy.regression.config import ESTIMATORS, RegressionConfig
from fedprivacy.regression.data import (
    RegressionData,
    data_from_silos,
    heterogeneous_sizes,
    simulate_data,
    true_parameter,
)
from fedprivacy.regression.engine import GDRun, Spectral, noisy_gradient_descent, spectral
from fedprivacy.regression.estimators import NAFGDResult, ana_fgd, fgd, na_fgd, ols
from fedprivacy.regression.nbafl_calibration import NbAFLNoise, nbafl_noise
from fedprivacy.regression.privacy import (
    C_MA,
    ClientNoise,
    calibrate_client_noise,
    dp_sgd_noise_multiplier,
    paper_noise_scale,
)
from fedprivacy.regression.schedule import iteration_count, learning_rates
from fedprivacy.regression.simulation import RegressionResult, run_regression, run_regression_grid
from fedprivacy.regression.theory import conditional_covariance, theory_check

__all__ = [
    "C_MA",
    "ESTIMATORS",
    "ClientNoise",
    "DPSGDResult",
    "GDRun",
    "NAFGDResult",
    "NbAFLNoise",
    "NbAFLResult",
    "RegressionConfig",
    "RegressionData",
    "RegressionResult",
    "Spectral",
    "ana_fgd",
    "calibrate_client_noise",
    "conditional_covariance",
    "data_from_silos",
    "dp_sgd",
    "dp_sgd_noise_multiplier",
    "fgd",
    "heterogeneous_sizes",
    "iteration_count",
    "laplace_epsilon",
    "learning_rates",
    "na_fgd",
    "nbafl",
    "nbafl_noise",
    "noisy_gradient_descent",
    "ols",
    "paper_noise_scale",
    "run_regression",
    "run_regression_grid",
    "simulate_data",
    "spectral",
    "theory_check",
    "true_parameter",
]
