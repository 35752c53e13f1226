"""Run every estimator on one setting for ``B`` replications and report MSE, SE and epsilon.

The replications are processed in vectorised batches (``chunk``; all ``B`` at once when memory
allows). Data are drawn once per batch and shared by every privacy budget of
:func:`run_regression_grid` (so the curves over ``epsilon`` use common data); each replication's
data and noise come from its own random streams, so results do not depend on the batching.
What the batches share is prepared by :mod:`fedprivacy.regression.grid_setting` and one batch
is run by :mod:`fedprivacy.regression.grid_batch`.

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

from fedprivacy.data.regression_data import RegressionSilos
from fedprivacy.regression.config import NOISY_ESTIMATORS, RegressionConfig
from fedprivacy.regression.grid_batch import Tally, run_batch
from fedprivacy.regression.grid_setting import Cell, GridSetting, prepare_grid, setting_sizes

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


def _chunk_size(setting: GridSetting) -> int:
    """Replications per batch: ``config.chunk``, else as many as fit in about 1 GiB."""
    config = setting.config
    if config.chunk is not None:
        return int(config.chunk)
    k, p, total, steps = setting.clients, setting.p, setting.total, setting.steps
    runs = len(setting.cells)
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
    setting = prepare_grid(config, epsilons, truths, silos)
    tally = Tally.empty(setting.cells, setting.config.estimators)
    cfg = setting.config
    chunk = _chunk_size(setting)
    for start in range(0, cfg.replications, chunk):
        reps = np.arange(start, min(cfg.replications, start + chunk), dtype=np.int64)
        run_batch(setting, reps, tally)
        if progress is not None:
            progress(int(reps.size))
    seconds = time.perf_counter() - started
    return [_result(setting, tally, cell, seconds) for cell in setting.cells]


def _result(setting: GridSetting, tally: Tally, cell: Cell, seconds: float) -> RegressionResult:
    """The result of one (truth, budget) cell, with notes on the privacy actually obtained."""
    cfg = setting.config
    ti, ei = cell
    e = setting.budgets[ei]
    privacy = tally.privacy[cell]
    eps: dict[str, float] = {
        str(name): float(privacy[name]["epsilon_accountant"])
        for name in NOISY_ESTIMATORS
        if name in privacy
    }
    return RegressionResult(
        config=replace(cfg, epsilon=e, truth=setting.names[ti]),
        steps=setting.steps,
        sizes=tuple(int(v) for v in setting.sizes),
        errors={name: np.concatenate(v) for name, v in tally.errors[cell].items()},
        epsilon_accountant=eps,
        privacy=privacy,
        clip_fraction={n: float(np.mean(v)) for n, v in tally.clipped[cell].items()},
        reference=setting.reference,
        seconds=seconds,
        notes=(*setting.notes, *_privacy_notes(cfg, eps, e)),
        dimension=setting.p,
        baseline_lr=setting.baseline_lr,
    )


def _privacy_notes(cfg: RegressionConfig, eps: dict[str, float], target: float) -> list[str]:
    """Caveats on the accountant's ``eps`` of each noisy estimator against the ``target``."""
    notes = []
    if "dp_sgd" in eps and cfg.calibration == "paper":
        notes.append(
            "dp_sgd: calibrated by the RDP accountant in both modes (as Opacus does); the "
            "paper calibration applies to NA-FGD / ANA-FGD and NbAFL"
        )
    for name, level in eps.items():
        if level > target * (1 + 1e-6):
            notes.append(
                f"{name}: the accountant's epsilon for the noise used is {level:.3g}, above "
                f"the target {target:g} ({cfg.calibration} calibration)"
            )
    return notes
