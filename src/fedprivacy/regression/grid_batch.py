"""One batch of replications of :func:`~fedprivacy.regression.simulation.run_regression_grid`.

:func:`run_batch` draws the batch's data once (shared by every truth's and every budget's
estimators), runs every estimator of the setting on it and adds the squared errors, the noise
details and the clipped fractions to a :class:`Tally` of the whole grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.regression.baselines import DPSGDResult, NbAFLResult, dp_sgd_budgets, nbafl_budgets
from fedprivacy.regression.data import RegressionData, data_from_silos, simulate_data
from fedprivacy.regression.engine import (
    Spectral,
    noisy_gradient_descent,
    noisy_gradient_descent_runs,
    spectral,
)
from fedprivacy.regression.grid_setting import Cell, GridSetting
from fedprivacy.regression.noise import aggregated_noise

__all__ = ["Batch", "Tally", "draw_batch", "run_batch"]

F64 = NDArray[np.float64]


def run_batch(setting: GridSetting, reps: NDArray[np.int64], tally: Tally) -> None:
    """Run every estimator of ``setting`` on replications ``reps`` and add them to ``tally``."""
    batch = draw_batch(setting, reps)
    _noise_free(setting, batch, tally)
    if setting.wanted & {"na_fgd", "ana_fgd"}:
        _noisy_fgd(setting, batch, tally)
    for ti in range(len(batch.datas)):
        _baselines(setting, batch, ti, tally)


@dataclass
class Tally:
    """Squared errors, noise details and clipped fractions gathered per (truth, budget) cell."""

    errors: dict[Cell, dict[str, list[F64]]]
    privacy: dict[Cell, dict[str, dict[str, Any]]]
    clipped: dict[Cell, dict[str, list[float]]]

    @classmethod
    def empty(cls, cells: Sequence[Cell], estimators: Sequence[str]) -> Tally:
        """Nothing gathered yet for ``estimators`` on ``cells``."""
        return cls(
            errors={c: {name: [] for name in estimators} for c in cells},
            privacy={c: {} for c in cells},
            clipped={c: {} for c in cells},
        )

    def add_private(
        self,
        cell: Cell,
        name: str,
        error: F64,
        privacy: dict[str, Any],
        clipped: Sequence[float],
    ) -> None:
        """A noisy estimator's errors, noise and clipped fractions on one batch."""
        self.errors[cell][name].append(error)
        self.privacy[cell][name] = privacy
        self.clipped[cell].setdefault(name, []).extend(clipped)


@dataclass(frozen=True)
class Batch:
    """A batch of replications: its data, their spectra and the targets, per truth."""

    reps: NDArray[np.int64]
    datas: list[RegressionData]
    specs: list[Spectral]
    targets: list[F64]

    def error(self, estimate: F64, ti: int) -> F64:
        """Squared error of each replication against truth ``ti``'s target."""
        return np.asarray(((estimate - self.targets[ti]) ** 2).sum(axis=1), dtype=np.float64)


def draw_batch(setting: GridSetting, reps: NDArray[np.int64]) -> Batch:
    """Draw (or copy) the data of replications ``reps`` once and share them across truths."""
    cfg = setting.config
    records = "dp_sgd" in setting.wanted
    datas: list[RegressionData] = []
    specs: list[Spectral] = []
    for theta in setting.thetas:
        if setting.silos is not None:
            silos = setting.silos
            data = data_from_silos(silos.x, silos.y, reps.size, records=records)
        elif not datas:
            assert theta is not None
            data = simulate_data(
                reps,
                setting.sizes,
                theta,
                noise_sd=cfg.noise_sd,
                rho=cfg.rho,
                seed=cfg.seed,
                records=records,
            )
        else:
            assert theta is not None
            data = datas[0].with_theta(theta)
        datas.append(data)
        specs.append(spectral(data, reuse=specs[0] if specs else None))
    targets = [
        sp.ols if th is None else np.broadcast_to(th, sp.ols.shape)
        for sp, th in zip(specs, setting.thetas, strict=True)
    ]
    return Batch(reps, datas, specs, targets)


def _noise_free(setting: GridSetting, batch: Batch, tally: Tally) -> None:
    """Pooled OLS and FGD (the same errors for every budget)."""
    for ti, (data, spec) in enumerate(zip(batch.datas, batch.specs, strict=True)):
        for name, est in (("ols", spec.ols), ("fgd", None)):
            if name not in setting.wanted:
                continue
            if est is None:
                est = noisy_gradient_descent(data, setting.rates, spec=spec).final
            value = batch.error(est, ti)
            for ei in range(len(setting.budgets)):
                tally.errors[(ti, ei)][name].append(value)


def _noisy_fgd(setting: GridSetting, batch: Batch, tally: Tally) -> None:
    """NA-FGD and ANA-FGD, every cell advanced together on the shared designs."""
    cfg, cells = setting.config, setting.cells
    noise_runs = [
        aggregated_noise(
            batch.reps,
            setting.steps,
            setting.p,
            setting.cals[ei],
            batch.datas[ti].weights,
            seed=cfg.seed,
        )
        for ti, ei in cells
    ]
    runs = noisy_gradient_descent_runs(
        batch.datas[0],
        setting.rates,
        [batch.datas[ti].moment for ti, _ in cells],
        [batch.specs[ti].ols for ti, _ in cells],
        noise_runs,
        clip=setting.cals[0].clip,
        norm=1 if cfg.mechanism == "laplace" else 2,
        spec=batch.specs[0],
    )
    del noise_runs
    for (ti, ei), run in zip(cells, runs, strict=True):
        frac = run.clip_fraction(setting.clients)
        for name, est in (("na_fgd", run.final), ("ana_fgd", run.average)):
            if name in setting.wanted:
                error = batch.error(est, ti)
                tally.add_private((ti, ei), name, error, setting.cals[ei].to_dict(), frac.tolist())


def _baselines(setting: GridSetting, batch: Batch, ti: int, tally: Tally) -> None:
    """DP-SGD and NbAFL on truth ``ti``'s data, all budgets at once."""
    cfg = setting.config
    data = batch.datas[ti]
    results: dict[str, Sequence[DPSGDResult | NbAFLResult]] = {}
    if "dp_sgd" in setting.wanted:
        results["dp_sgd"] = dp_sgd_budgets(
            data,
            setting.dp_rates,
            epsilons=setting.budgets,
            delta=cfg.delta,
            sampling_rate=cfg.dp_sgd_rate,
            clip=cfg.clip,
            calibration="accountant",
            seed=cfg.seed,
            reps=batch.reps,
        )
    if "nbafl" in setting.wanted:
        results["nbafl"] = nbafl_budgets(
            data,
            epsilons=setting.budgets,
            delta=cfg.delta,
            rounds=cfg.nbafl_rounds,
            local_steps=cfg.nbafl_local_steps,
            lr=setting.baseline_lr,
            clip=cfg.nbafl_clip,
            calibration=cfg.calibration,
            seed=cfg.seed,
            reps=batch.reps,
        )
    for name, per_budget in results.items():
        for ei, res in enumerate(per_budget):
            error = batch.error(res.estimate, ti)
            tally.add_private((ti, ei), name, error, res.to_dict(), [res.clipped_fraction])
