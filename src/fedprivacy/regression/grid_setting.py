"""What every batch of :func:`~fedprivacy.regression.simulation.run_regression_grid` shares.

:func:`prepare_grid` validates the grid (the setting, every budget and every truth), finds its
data (real silos, or simulated sizes and true parameters), and works out the learning-rate
schedules and NA-FGD's noise for each budget, once for all batches of replications.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from fedprivacy.data.regression_data import RegressionSilos, load_regression_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.regression.config import RegressionConfig
from fedprivacy.regression.data import heterogeneous_sizes, true_parameter
from fedprivacy.regression.privacy import ClientNoise, calibrate_client_noise
from fedprivacy.regression.schedule import iteration_count, learning_rates

__all__ = ["Cell", "GridSetting", "prepare_grid", "setting_sizes"]

F64 = NDArray[np.float64]


def setting_sizes(config: RegressionConfig) -> NDArray[np.int64]:
    """The local sample sizes of a simulated setting (heterogeneous when ``spread > 0``)."""
    return heterogeneous_sizes(config.clients, config.n, config.spread, seed=config.seed)


#: A (truth, budget) pair of indices: one result of the grid.
Cell = tuple[int, int]


@dataclass(frozen=True)
class GridSetting:
    """What every batch of :func:`~fedprivacy.regression.simulation.run_regression_grid` shares.

    Attributes
    ----------
    config : RegressionConfig
        The validated setting.
    budgets : list of float
        The privacy budgets (validated).
    names : tuple of str
        The truths' names (``config.truth`` alone unless several were asked for).
    thetas : list of ndarray or None
        The true parameters (``[None]`` on real data).
    silos : RegressionSilos or None
        The real data, if any.
    sizes : ndarray of int64
        Local sample sizes.
    p : int
        Dimension.
    reference : str
        What the errors are measured against.
    notes : tuple of str
        The data's caveats.
    steps, rates, baseline_lr, dp_rates
        ``T``, NA-FGD's learning rates, DP-SGD's and NbAFL's learning rate and DP-SGD's rates.
    cals : list of ClientNoise
        NA-FGD's noise, per budget.
    cells : list of (int, int)
        (truth, budget) index pairs, truth by truth.
    """

    config: RegressionConfig
    budgets: list[float]
    names: tuple[str, ...]
    thetas: list[F64 | None]
    silos: RegressionSilos | None
    sizes: NDArray[np.int64]
    p: int
    reference: str
    notes: tuple[str, ...]
    steps: int
    rates: F64
    baseline_lr: float
    dp_rates: F64
    cals: list[ClientNoise]
    cells: list[Cell]

    @property
    def clients(self) -> int:
        """``K``."""
        return int(self.sizes.size)

    @property
    def total(self) -> int:
        """``N``."""
        return int(self.sizes.sum())

    @property
    def wanted(self) -> set[str]:
        """The estimators to run."""
        return set(self.config.estimators)


@dataclass(frozen=True)
class _Source:
    """Where the data come from: real silos or simulated clients with true parameters."""

    silos: RegressionSilos | None
    sizes: NDArray[np.int64]
    p: int
    thetas: list[F64 | None]
    reference: str
    notes: tuple[str, ...]


def prepare_grid(
    config: RegressionConfig,
    epsilons: Sequence[float],
    truths: Sequence[str] | None,
    silos: RegressionSilos | None,
) -> GridSetting:
    """Validate the grid, find its data and work out the schedules and NA-FGD's noise."""
    cfg = config.validate()
    if not epsilons:
        raise ParameterError("epsilons", "give at least one privacy budget")
    budgets = [float(replace(cfg, epsilon=e).validate().epsilon) for e in epsilons]
    names = tuple(truths) if truths else (cfg.truth,)
    for t in names:
        replace(cfg, truth=t).validate()
    source = _source(cfg, names, truths, silos)
    sizes, p = source.sizes, source.p
    lr = cfg.learning_rate
    steps = cfg.iterations or iteration_count(int(sizes.sum()), lr, cfg.c)
    rates = learning_rates(steps, cfg.lr0 if cfg.gamma > 0 else lr, cfg.gamma)
    blr = cfg.baseline_lr or (1.0 / p if cfg.dataset is not None else lr)
    dp_rates = learning_rates(math.ceil(cfg.dp_sgd_epochs / cfg.dp_sgd_rate - 1e-9), blr)
    cals = [
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
    cells = [(ti, ei) for ti in range(len(source.thetas)) for ei in range(len(budgets))]
    return GridSetting(
        config=cfg,
        budgets=budgets,
        names=names,
        thetas=source.thetas,
        silos=source.silos,
        sizes=sizes,
        p=p,
        reference=source.reference,
        notes=source.notes,
        steps=steps,
        rates=rates,
        baseline_lr=blr,
        dp_rates=dp_rates,
        cals=cals,
        cells=cells,
    )


def _source(
    cfg: RegressionConfig,
    names: tuple[str, ...],
    truths: Sequence[str] | None,
    silos: RegressionSilos | None,
) -> _Source:
    """The real silos (loaded unless given) or the simulated sizes and true parameters."""
    if cfg.dataset is not None:
        if truths:
            raise ParameterError("truths", "real data have no true parameter to vary")
        if silos is None:
            silos = load_regression_dataset(
                cfg.dataset, cfg.data_dir, clients=cfg.clients, seed=cfg.seed, missing=cfg.missing
            )
        return _Source(
            silos=silos,
            sizes=silos.sizes,
            p=silos.dimension,
            thetas=[None],
            reference="pooled OLS on the real data (only the privacy noise is replicated)",
            notes=tuple(silos.notes),
        )
    sizes = setting_sizes(cfg)
    p = cfg.p
    thetas: list[F64 | None] = [true_parameter(p, t, cfg.theta_norm) for t in names]
    if int(sizes.sum()) <= p:
        raise ParameterError("n", f"the sizes give N = {int(sizes.sum())} <= p = {p}")
    return _Source(silos=None, sizes=sizes, p=p, thetas=thetas, reference="true theta", notes=())
