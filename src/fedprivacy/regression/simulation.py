"""Run every estimator on one setting for ``B`` replications and report MSE, SE and epsilon.

The replications are processed in vectorised batches (``chunk``; all ``B`` at once when memory
allows). Data are drawn once per batch and shared by every privacy budget of
:func:`run_regression_grid` (so the curves over ``epsilon`` use common data); each replication's
data and noise come from its own random streams, so results do not depend on the batching.

Squared error of replication ``b``: ``||theta_hat_b - theta||^2`` with the true ``theta`` in
simulations and the pooled OLS estimate on real data (where only the privacy noise is
replicated). ``mse`` is its mean over the replications and ``se`` the standard error
``sd / sqrt(B)``.

Calibration: ``config.calibration`` applies to NA-FGD / ANA-FGD (the paper's c_MA formula or
the RDP accountant) and to NbAFL (Wei et al.'s formulas or the accountant). DP-SGD is always
calibrated by the accountant, as Opacus' ``make_private_with_epsilon`` does (Abadi et al.'s
asymptotic formula, available as ``dp_sgd(..., calibration="paper")``, is far off at small
sampling rates).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.data.regression_data import RegressionSilos, load_regression_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.regression.baselines import dp_sgd_budgets, nbafl_budgets
from fedprivacy.regression.config import NOISY_ESTIMATORS, RegressionConfig
from fedprivacy.regression.data import (
    RegressionData,
    data_from_silos,
    heterogeneous_sizes,
    simulate_data,
    true_parameter,
)
from fedprivacy.regression.engine import (
    Spectral,
    noisy_gradient_descent,
    noisy_gradient_descent_runs,
    spectral,
)
from fedprivacy.regression.noise import aggregated_noise
from fedprivacy.regression.privacy import ClientNoise, calibrate_client_noise
from fedprivacy.regression.schedule import iteration_count, learning_rates

__all__ = ["RegressionResult", "run_regression", "run_regression_grid", "setting_sizes"]

F64 = NDArray[np.float64]
_CHUNK_BYTES = 1024 * 2**20


@dataclass(frozen=True)
class RegressionResult:
    """MSE, standard errors and privacy of every estimator on one setting.

    Attributes
    ----------
    config : RegressionConfig
        The setting (``epsilon`` is the budget of this result).
    steps : int
        ``T``.
    sizes : tuple of int
        Local sample sizes.
    errors : dict of str to ndarray
        Squared error of every replication, per estimator.
    epsilon_accountant : dict of str to float
        The accountant's epsilon for the noise used, per noisy estimator.
    privacy : dict of str to dict
        Noise details per noisy estimator.
    clip_fraction : dict of str to float
        Fraction of clipped client-iterations (NA-FGD), sampled gradients (DP-SGD) or uploads
        (NbAFL).
    reference : str
        What the errors are measured against.
    seconds : float
        Wall time of the whole run (shared by a grid's results).
    notes : tuple of str
        Caveats to show with the numbers.
    dimension : int
        ``p``.
    baseline_lr : float
        Learning rate used by DP-SGD and NbAFL.
    """

    config: RegressionConfig
    steps: int
    sizes: tuple[int, ...]
    errors: dict[str, F64]
    epsilon_accountant: dict[str, float]
    privacy: dict[str, dict[str, Any]]
    clip_fraction: dict[str, float]
    reference: str
    seconds: float
    notes: tuple[str, ...] = field(default=())
    dimension: int = 0
    baseline_lr: float = 0.0

    @property
    def mse(self) -> dict[str, float]:
        """Mean squared error per estimator."""
        return {k: float(v.mean()) for k, v in self.errors.items()}

    @property
    def se(self) -> dict[str, float]:
        """Standard error of the MSE per estimator."""
        return {k: float(v.std(ddof=1) / math.sqrt(v.size)) for k, v in self.errors.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the CLI's ``--json`` output)."""
        cfg = self.config
        settings = cfg.to_dict()
        settings.pop("data_dir", None)
        settings["lr"] = cfg.learning_rate
        settings["baseline_lr"] = self.baseline_lr
        if cfg.dataset is not None:  # simulation-only settings do not apply to real data
            for key in ("n", "truth", "spread", "noise_sd", "rho", "theta_norm"):
                settings.pop(key, None)
            settings["clients"] = len(self.sizes)
            settings["p"] = self.dimension
        settings["total_samples"] = int(sum(self.sizes))
        settings["sizes_min"] = int(min(self.sizes))
        settings["sizes_max"] = int(max(self.sizes))
        return {
            "settings": settings,
            "iterations": self.steps,
            "reference": self.reference,
            "mse": self.mse,
            "se": self.se,
            "epsilon": self.epsilon_accountant,
            "target_epsilon": cfg.epsilon,
            "delta": cfg.delta,
            "privacy": self.privacy,
            "clip_fraction": self.clip_fraction,
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }


def setting_sizes(config: RegressionConfig) -> NDArray[np.int64]:
    """The local sample sizes of a simulated setting (heterogeneous when ``spread > 0``)."""
    return heterogeneous_sizes(config.clients, config.n, config.spread, seed=config.seed)


def _chunk_size(config: RegressionConfig, k: int, p: int, total: int, steps: int, runs: int) -> int:
    if config.chunk is not None:
        return int(config.chunk)
    per = 4 * k * p * p + 16 * p * p + 8 * runs * steps * p + 4 * k * p * 64 * 3 + 8 * k * p
    if "dp_sgd" in config.estimators:
        per += 4 * total * p + 8 * total
    return int(max(1, min(config.replications, _CHUNK_BYTES // per)))


def run_regression(
    config: RegressionConfig,
    *,
    progress: Callable[[int], None] | None = None,
    silos: RegressionSilos | None = None,
) -> RegressionResult:
    """Run ``config`` (one privacy budget); see :func:`run_regression_grid`."""
    return run_regression_grid(config, (config.epsilon,), progress=progress, silos=silos)[0]


def run_regression_grid(
    config: RegressionConfig,
    epsilons: Sequence[float],
    *,
    truths: Sequence[str] | None = None,
    progress: Callable[[int], None] | None = None,
    silos: RegressionSilos | None = None,
) -> list[RegressionResult]:
    """Run every estimator of ``config`` for each budget (and truth) on shared data.

    Parameters
    ----------
    config : RegressionConfig
        The setting (its ``epsilon`` is ignored in favour of ``epsilons``).
    epsilons : sequence of float
        Privacy budgets.
    truths : sequence of str, optional
        Simulations: true parameters to run on the same designs and errors (``config.truth``
        when omitted); the results are ordered truth by truth, then by budget.
    progress : callable, optional
        Called with the number of replications just finished (per batch).
    silos : RegressionSilos, optional
        Preloaded real data (else loaded when ``config.dataset`` is set).

    Returns
    -------
    list of RegressionResult
        One per (truth, budget).

    Raises
    ------
    ParameterError
        If the configuration is invalid.
    DataNotFoundError, ChecksumError
        If a real data set is missing or corrupt.
    """
    started = time.perf_counter()
    cfg = config.validate()
    if not epsilons:
        raise ParameterError("epsilons", "give at least one privacy budget")
    budgets = [float(replace(cfg, epsilon=e).validate().epsilon) for e in epsilons]
    names = tuple(truths) if truths else (cfg.truth,)
    for t in names:
        replace(cfg, truth=t).validate()
    notes: list[str] = []
    thetas: list[F64 | None] = [None]
    if cfg.dataset is not None:
        if truths:
            raise ParameterError("truths", "real data have no true parameter to vary")
        if silos is None:
            silos = load_regression_dataset(
                cfg.dataset, cfg.data_dir, clients=cfg.clients, seed=cfg.seed, missing=cfg.missing
            )
        sizes = silos.sizes
        p = silos.dimension
        notes.extend(silos.notes)
        reference = "pooled OLS on the real data (only the privacy noise is replicated)"
    else:
        sizes = setting_sizes(cfg)
        p = cfg.p
        thetas = [true_parameter(p, t, cfg.theta_norm) for t in names]
        reference = "true theta"
        if int(sizes.sum()) <= p:
            raise ParameterError("n", f"the sizes give N = {int(sizes.sum())} <= p = {p}")
    k, total = int(sizes.size), int(sizes.sum())
    lr = cfg.learning_rate
    steps = cfg.iterations or iteration_count(total, lr, cfg.c)
    rates = learning_rates(steps, cfg.lr0 if cfg.gamma > 0 else lr, cfg.gamma)
    wanted = set(cfg.estimators)
    blr = cfg.baseline_lr or (1.0 / p if cfg.dataset is not None else lr)
    dp_rates = learning_rates(math.ceil(cfg.dp_sgd_epochs / cfg.dp_sgd_rate - 1e-9), blr)
    records = "dp_sgd" in wanted
    cals: list[ClientNoise] = [
        calibrate_client_noise(
            e,
            cfg.delta,
            steps,
            sizes,
            mechanism=cfg.mechanism,
            calibration=cfg.calibration,
            clip=cfg.clip,
            neighbouring=cfg.neighbouring,
        )
        for e in budgets
    ]
    cells = [(ti, ei) for ti in range(len(thetas)) for ei in range(len(budgets))]
    errors: dict[tuple[int, int], dict[str, list[F64]]] = {
        c: {name: [] for name in cfg.estimators} for c in cells
    }
    privacy: dict[tuple[int, int], dict[str, dict[str, Any]]] = {c: {} for c in cells}
    clipped: dict[tuple[int, int], dict[str, list[float]]] = {c: {} for c in cells}
    chunk = _chunk_size(cfg, k, p, total, steps, len(cells))
    for start in range(0, cfg.replications, chunk):
        reps = np.arange(start, min(cfg.replications, start + chunk), dtype=np.int64)
        datas: list[RegressionData] = []
        specs: list[Spectral] = []
        for theta in thetas:
            if silos is not None:
                data = data_from_silos(silos.x, silos.y, reps.size, records=records)
            elif not datas:
                assert theta is not None
                data = simulate_data(
                    reps, sizes, theta, noise_sd=cfg.noise_sd, rho=cfg.rho, seed=cfg.seed,
                    records=records,
                )  # fmt: skip
            else:
                assert theta is not None
                data = datas[0].with_theta(theta)
            datas.append(data)
            specs.append(spectral(data, reuse=specs[0] if specs else None))
        targets = [
            sp.ols if th is None else np.broadcast_to(th, sp.ols.shape)
            for sp, th in zip(specs, thetas, strict=True)
        ]

        def err(estimate: F64, ti: int, targets: list[F64] = targets) -> F64:
            return np.asarray(((estimate - targets[ti]) ** 2).sum(axis=1), dtype=np.float64)

        for ti, (data, spec) in enumerate(zip(datas, specs, strict=True)):
            for name, est in (("ols", spec.ols), ("fgd", None)):
                if name not in wanted:
                    continue
                if est is None:
                    est = noisy_gradient_descent(data, rates, spec=spec).final
                value = err(est, ti)
                for ei in range(len(budgets)):
                    errors[(ti, ei)][name].append(value)
        if wanted & {"na_fgd", "ana_fgd"}:
            noise_runs = [
                aggregated_noise(reps, steps, p, cals[ei], datas[ti].weights, seed=cfg.seed)
                for ti, ei in cells
            ]
            runs = noisy_gradient_descent_runs(
                datas[0], rates, [datas[ti].moment for ti, _ in cells],
                [specs[ti].ols for ti, _ in cells], noise_runs, clip=cals[0].clip,
                norm=1 if cfg.mechanism == "laplace" else 2, spec=specs[0],
            )  # fmt: skip
            del noise_runs
            for (ti, ei), run in zip(cells, runs, strict=True):
                frac = run.clip_fraction(k)
                for name, est in (("na_fgd", run.final), ("ana_fgd", run.average)):
                    if name in wanted:
                        errors[(ti, ei)][name].append(err(est, ti))
                        privacy[(ti, ei)][name] = cals[ei].to_dict()
                        clipped[(ti, ei)].setdefault(name, []).extend(frac.tolist())
        for ti, data in enumerate(datas):
            if "dp_sgd" in wanted:
                dres = dp_sgd_budgets(
                    data, dp_rates, epsilons=budgets, delta=cfg.delta,
                    sampling_rate=cfg.dp_sgd_rate, clip=cfg.clip, calibration="accountant",
                    seed=cfg.seed, reps=reps,
                )  # fmt: skip
                for ei, res_dp in enumerate(dres):
                    errors[(ti, ei)]["dp_sgd"].append(err(res_dp.estimate, ti))
                    privacy[(ti, ei)]["dp_sgd"] = res_dp.to_dict()
                    clipped[(ti, ei)].setdefault("dp_sgd", []).append(res_dp.clipped_fraction)
            if "nbafl" in wanted:
                nres = nbafl_budgets(
                    data, epsilons=budgets, delta=cfg.delta, rounds=cfg.nbafl_rounds,
                    local_steps=cfg.nbafl_local_steps, lr=blr, clip=cfg.nbafl_clip,
                    calibration=cfg.calibration, seed=cfg.seed, reps=reps,
                )  # fmt: skip
                for ei, res_nb in enumerate(nres):
                    errors[(ti, ei)]["nbafl"].append(err(res_nb.estimate, ti))
                    privacy[(ti, ei)]["nbafl"] = res_nb.to_dict()
                    clipped[(ti, ei)].setdefault("nbafl", []).append(res_nb.clipped_fraction)
        if progress is not None:
            progress(int(reps.size))
    seconds = time.perf_counter() - started
    results = []
    for ti, ei in cells:
        e = budgets[ei]
        cell = (ti, ei)
        eps: dict[str, float] = {
            str(name): float(privacy[cell][name]["epsilon_accountant"])
            for name in NOISY_ESTIMATORS
            if name in privacy[cell]
        }
        extra = list(notes)
        if "dp_sgd" in eps and cfg.calibration == "paper":
            extra.append(
                "dp_sgd: calibrated by the RDP accountant in both modes (as Opacus does); the "
                "paper calibration applies to NA-FGD / ANA-FGD and NbAFL"
            )
        for name, level in eps.items():
            if level > e * (1 + 1e-6):
                extra.append(
                    f"{name}: the accountant's epsilon for the noise used is {level:.3g}, above "
                    f"the target {e:g} ({cfg.calibration} calibration)"
                )
        results.append(
            RegressionResult(
                config=replace(cfg, epsilon=e, truth=names[ti]),
                steps=steps,
                sizes=tuple(int(v) for v in sizes),
                errors={name: np.concatenate(v) for name, v in errors[cell].items()},
                epsilon_accountant=eps,
                privacy=privacy[cell],
                clip_fraction={n: float(np.mean(v)) for n, v in clipped[cell].items()},
                reference=reference,
                seconds=seconds,
                notes=tuple(extra),
                dimension=p,
                baseline_lr=blr,
            )
        )
    return results
