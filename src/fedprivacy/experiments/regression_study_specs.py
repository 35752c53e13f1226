"""The experiments of the NA-FGD study: settings, figure specifications and names.

:data:`FIGURES` holds the simulated figures (Appendix B's Figures B.1-B.7 and the main
comparison) as :class:`FigureSpec`; :data:`REGRESSION_EXPERIMENTS` adds the real-data and theory
experiments. :mod:`fedprivacy.experiments.regression_study` runs them (its docstring lists the
settings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fedprivacy.regression.config import ESTIMATORS

__all__ = [
    "EPSILONS",
    "FIGURES",
    "PAPER_B",
    "REGRESSION_EXPERIMENTS",
    "SIZES",
    "FigureSpec",
    "experiment_names",
]

SIZES = (150, 300, 500, 750)
EPSILONS = (0.8, 2.0, 5.0)
PAPER_B = 100
THREE = ("ols", "fgd", "na_fgd", "ana_fgd")


@dataclass(frozen=True)
class FigureSpec:
    """A simulated figure: panels over one setting, lines over ``n``, one line per estimator."""

    name: str
    title: str
    paper: str
    panel: str  # "clients", "epsilon", "gamma" or "spread"
    values: tuple[float, ...]
    truths: tuple[str, ...]
    estimators: tuple[str, ...]
    base: Mapping[str, Any] = field(default_factory=dict)


def label_of_panel(panel: str, value: float) -> str:
    if panel == "clients":
        return f"K = {int(value)}"
    if panel == "epsilon":
        return f"epsilon = {value:g}"
    if panel == "gamma":
        return f"gamma = {value:g}"
    return f"Delta = {value:g} sqrt(n)" if value != 1 else "Delta = sqrt(n)"


FIGURES: dict[str, FigureSpec] = {
    s.name: s
    for s in (
        FigureSpec(
            "regression-main",
            "Gaussian NA-FGD: all estimators (K = 15)",
            "Section 3.1 (Figs. 1-2, not in the supplement) and Appendix B.4: ANA-FGD beats "
            "NA-FGD, approaches OLS/FGD as n grows, and beats the Opacus and NbAFL baselines.",
            "epsilon",
            EPSILONS,
            ("sparse", "dense"),
            ESTIMATORS,
        ),
        FigureSpec(
            "regression-b1",
            "Fig. B.1: effect of K (sparse, epsilon = 0.8)",
            "All three estimators improve as K grows; ANA-FGD beats NA-FGD.",
            "clients",
            (5, 15, 30),
            ("sparse",),
            THREE,
        ),
        FigureSpec(
            "regression-b2",
            "Fig. B.2: effect of K (dense, epsilon = 0.8)",
            "All three estimators improve as K grows; ANA-FGD beats NA-FGD.",
            "clients",
            (5, 15, 30),
            ("dense",),
            THREE,
        ),
        FigureSpec(
            "regression-b3",
            "Fig. B.3: Laplace mechanism (sparse)",
            "The DP estimators approach FGD as epsilon grows; ANA-FGD is much better than "
            "NA-FGD and nearly matches FGD as n grows; both are worse than with Gaussian noise.",
            "epsilon",
            EPSILONS,
            ("sparse",),
            THREE,
            {"mechanism": "laplace"},
        ),
        FigureSpec(
            "regression-b4",
            "Fig. B.4: Laplace mechanism (dense)",
            "The DP estimators approach FGD as epsilon grows; ANA-FGD is much better than "
            "NA-FGD and nearly matches FGD as n grows; both are worse than with Gaussian noise.",
            "epsilon",
            EPSILONS,
            ("dense",),
            THREE,
            {"mechanism": "laplace"},
        ),
        FigureSpec(
            "regression-b5",
            "Fig. B.5: diminishing rates alpha_t = t^-gamma (sparse, epsilon = 0.8)",
            "NA-FGD improves as gamma increases (gamma in (1/2, 1] is appropriate); ANA-FGD "
            "beats NA-FGD for every gamma.",
            "gamma",
            (0.2, 0.5, 0.8),
            ("sparse",),
            THREE,
            {"lr0": 1.0},
        ),
        FigureSpec(
            "regression-b6",
            "Fig. B.6: diminishing rates alpha_t = t^-gamma (dense, epsilon = 0.8)",
            "NA-FGD improves as gamma increases (gamma in (1/2, 1] is appropriate); ANA-FGD "
            "beats NA-FGD for every gamma.",
            "gamma",
            (0.2, 0.5, 0.8),
            ("dense",),
            THREE,
            {"lr0": 1.0},
        ),
        FigureSpec(
            "regression-b7",
            "Fig. B.7: heterogeneous n_k ~ N(n, Delta^2) (sparse, epsilon = 0.8)",
            "ANA-FGD, Opacus and NbAFL get worse as Delta grows; ANA-FGD still beats Opacus "
            "and NbAFL.",
            "spread",
            (1.0, 3.0, 5.0),
            ("sparse",),
            ("ols", "fgd", "na_fgd", "ana_fgd", "dp_sgd", "nbafl"),
        ),
    )
}

REGRESSION_EXPERIMENTS: dict[str, str] = {
    **{name: spec.title for name, spec in FIGURES.items()},
    "regression-real": "Real data (substitutes for NIO): California Housing and Diabetes",
    "regression-theory": "Conditional covariance of Theorems 2-3 vs the empirical covariance",
}


def experiment_names() -> list[str]:
    """Names accepted by :func:`run_regression_experiment` (module ``regression_study``)."""
    return list(REGRESSION_EXPERIMENTS)
