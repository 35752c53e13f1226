"""The configuration of a regression run (``fedprivacy regress`` options and TOML keys)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from fedprivacy._validation import require_int, require_one_of
from fedprivacy.config import Config
from fedprivacy.config_sections import DataSection
from fedprivacy.dp._checks import require_delta, require_nonnegative, require_positive
from fedprivacy.errors import ParameterError
from fedprivacy.regression.data import TRUTHS
from fedprivacy.regression.privacy import CALIBRATIONS, MECHANISMS, NEIGHBOURINGS
from fedprivacy.regression.schedule import PAPER_ITERATION_CONSTANT, PAPER_REAL_DATA_LR

__all__ = [
    "DATASETS",
    "ESTIMATORS",
    "NOISY_ESTIMATORS",
    "SIMULATION_LR",
    "RegressionConfig",
]

#: Every estimator, in report order.
ESTIMATORS: Final = ("ols", "fgd", "na_fgd", "ana_fgd", "dp_sgd", "nbafl")
#: The estimators that add privacy noise (each reports the accountant's epsilon).
NOISY_ESTIMATORS: Final = ("na_fgd", "ana_fgd", "dp_sgd", "nbafl")
#: Real data sets substituting the paper's (non-public) NIO data.
DATASETS: Final = ("california", "diabetes")
#: Learning rate of the simulations (Section 3.1's value is not in the supplement; see
#: :class:`RegressionConfig`).
SIMULATION_LR: Final = 0.5
MISSING: Final = ("impute", "drop")


@dataclass(frozen=True)
class RegressionConfig(Config, DataSection):
    """One regression experiment. Every field is a TOML key; most are ``regress`` options.

    Simulation defaults (our reconstruction of the paper's Section 3.1, which the supplement
    does not contain): ``p = 200``, ``K = 15`` clients of ``n`` records, ``x ~ N(0, I)``,
    errors ``N(0, 0.5^2)``, ``||theta|| = 1``, ``C = 1``, ``delta = 1e-5``, ``B = 100``
    replications, learning rate ``alpha = 0.5`` and ``T = ceil(c N^(3/4) / alpha)`` with
    ``c = 0.25`` (Appendix C.2's constant), i.e. ``T = N^(3/4) / 2``. With ``T`` tied to
    ``alpha`` this way, ``alpha T = c N^(3/4)`` fixes NA-FGD's noise variance (up to the factor
    ``(2 - alpha lambda)^-1``), ANA-FGD's noise variance ``~ sigma^2 / (T lambda^2)`` does not
    depend on ``alpha`` and neither does its start-up bias ``~ 1 / (alpha T lambda)`` (see
    :mod:`fedprivacy.regression.theory`), so ``alpha`` mainly sets the run time; 0.5 keeps
    ``alpha lambda_max(Sigma_hat) <= 1.15`` for every setting of the study. Appendix C.2's
    ``alpha = 0.01`` is the default for the real data sets. With ``gamma > 0`` the learning
    rate is ``lr0 * t^(-gamma)`` (Appendix B.3, ``lr0 = 1``) while ``T`` still comes from
    ``lr``. ``dataset`` (:class:`~fedprivacy.config_sections.DataSection`, with ``data_dir``)
    is ``california`` or ``diabetes`` for real data, ``None`` (the default) for a simulation.

    Attributes
    ----------
    clients, n, p : int
        ``K``, the (mean) local sample size and the dimension.
    epsilon, delta : float
        Privacy budget.
    truth : {"sparse", "dense"}
        True parameter (:func:`~fedprivacy.regression.data.true_parameter`).
    replications : int
        ``B`` (>= 2, for standard errors).
    calibration : {"accountant", "paper"}
        Noise calibration of NA-FGD / ANA-FGD and NbAFL: the RDP accountant's, which delivers
        ``epsilon`` (default), or the paper's formulas (the paper's study uses them; the
        accountant then reports a different epsilon).
    seed : int
        Base seed.
    mechanism : {"gaussian", "laplace"}
        NA-FGD's noise.
    lr : float or None
        ``alpha``; ``None``: 0.5 (simulation) or 0.01 (real data).
    c : float
        Constant of ``T = c N^(3/4) / alpha``.
    iterations : int or None
        ``T`` overriding the formula.
    gamma, lr0 : float
        Diminishing rate ``lr0 t^(-gamma)`` when ``gamma > 0``.
    spread : float
        Heterogeneous sizes ``n_k ~ N(n, (spread sqrt(n))^2)`` (0: all ``n``).
    noise_sd, rho, theta_norm : float
        Error standard deviation, AR(1) covariate correlation, ``||theta||``.
    clip : float
        ``C`` for NA-FGD and DP-SGD's per-sample clipping.
    neighbouring : {"add-remove", "replace"}
        Neighbouring relation of NA-FGD's reported epsilon.
    estimators : tuple of str
        Subset of :data:`ESTIMATORS`.
    dp_sgd_epochs, dp_sgd_rate : float
        DP-SGD's expected passes over the data and Poisson sampling rate ``q``: it runs
        ``ceil(epochs / q)`` steps (100 by default) with the constant learning rate ``lr``.
    baseline_lr : float or None
        Learning rate of DP-SGD and NbAFL's local steps; ``None``: ``lr`` in simulations and
        ``1 / p`` on the (standardised) real data, where ``lr = 0.01`` is tuned to NA-FGD's long
        runs (``lambda_max(Sigma_hat) <= p`` for standardised covariates, so ``1 / p`` is stable
        without looking at the data).
    nbafl_rounds, nbafl_local_steps : int
        NbAFL's rounds ``T`` (= exposures ``L``) and local steps per round.
    nbafl_clip : float
        NbAFL's parameter clipping norm ``W``.
    missing : {"impute", "drop"}
        California Housing's missing ``total_bedrooms``.
    chunk : int or None
        Replications per vectorised batch (memory bound); automatic when ``None``.
    """

    clients: int = 15
    n: int = 300
    p: int = 200
    epsilon: float = 0.8
    delta: float = 1e-5
    truth: str = "sparse"
    replications: int = 100
    calibration: str = "accountant"
    seed: int = 0
    mechanism: str = "gaussian"
    lr: float | None = None
    c: float = PAPER_ITERATION_CONSTANT
    iterations: int | None = None
    gamma: float = 0.0
    lr0: float = 1.0
    spread: float = 0.0
    noise_sd: float = 0.5
    rho: float = 0.0
    theta_norm: float = 1.0
    clip: float = 1.0
    neighbouring: str = "add-remove"
    estimators: tuple[str, ...] = ESTIMATORS
    dp_sgd_epochs: float = 5.0
    dp_sgd_rate: float = 0.05
    baseline_lr: float | None = None
    nbafl_rounds: int = 3
    nbafl_local_steps: int = 10
    nbafl_clip: float = 1.0
    missing: str = "impute"
    chunk: int | None = None

    @property
    def learning_rate(self) -> float:
        """``alpha`` with the default resolved."""
        if self.lr is not None:
            return self.lr
        return SIMULATION_LR if self.dataset is None else PAPER_REAL_DATA_LR

    def validate(self) -> RegressionConfig:
        """Check every field; return ``self``. :class:`ParameterError` names the first bad one."""
        if self.dataset is not None and self.dataset not in DATASETS:
            raise ParameterError("dataset", f"must be one of {', '.join(DATASETS)}")
        require_int("clients", self.clients, minimum=1)
        require_int("n", self.n, minimum=1)
        require_int("p", self.p, minimum=1)
        require_positive("epsilon", self.epsilon)
        require_delta("delta", self.delta)
        require_one_of("truth", self.truth, TRUTHS)
        require_int("replications", self.replications, minimum=2)
        require_one_of("calibration", self.calibration, CALIBRATIONS)
        require_int("seed", self.seed, minimum=0)
        require_one_of("mechanism", self.mechanism, MECHANISMS)
        if self.lr is not None:
            require_positive("lr", self.lr)
        require_positive("c", self.c)
        if self.iterations is not None:
            require_int("iterations", self.iterations, minimum=1)
        require_nonnegative("gamma", self.gamma)
        require_positive("lr0", self.lr0)
        require_nonnegative("spread", self.spread)
        require_positive("noise_sd", self.noise_sd)
        if not (math.isfinite(self.rho) and -1.0 < self.rho < 1.0):
            raise ParameterError("rho", f"must lie in (-1, 1), got {self.rho!r}")
        require_positive("theta_norm", self.theta_norm)
        require_positive("clip", self.clip)
        require_one_of("neighbouring", self.neighbouring, NEIGHBOURINGS)
        if not self.estimators:
            raise ParameterError("estimators", "name at least one estimator")
        for name in self.estimators:
            require_one_of("estimators", name, ESTIMATORS)
        require_positive("dp_sgd_epochs", self.dp_sgd_epochs)
        if not 0.0 < self.dp_sgd_rate <= 1.0:
            raise ParameterError("dp_sgd_rate", f"must lie in (0, 1], got {self.dp_sgd_rate!r}")
        require_int("nbafl_rounds", self.nbafl_rounds, minimum=1)
        require_int("nbafl_local_steps", self.nbafl_local_steps, minimum=1)
        require_positive("nbafl_clip", self.nbafl_clip)
        if self.baseline_lr is not None:
            require_positive("baseline_lr", self.baseline_lr)
        require_one_of("missing", self.missing, MISSING)
        if self.chunk is not None:
            require_int("chunk", self.chunk, minimum=1)
        if self.dataset is None and self.spread == 0 and self.clients * self.n <= self.p:
            raise ParameterError(
                "n",
                f"the pooled least squares needs N = K n > p: K n = {self.clients * self.n} "
                f"<= p = {self.p}",
            )
        return self
