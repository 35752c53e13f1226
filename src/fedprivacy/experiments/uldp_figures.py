"""Figs. 4-9 of the ULDP-FL paper (Kato et al.): privacy-utility curves, weighting, sampling.

Each figure is a :class:`FigureSpec`: panels (a dataset, a number of users, a record
distribution, rounds) and the curves of each panel (a method, for the ``-s`` variants a
user-level sampling rate). :func:`run_figure` runs every curve of every panel with
:func:`fedprivacy.uldp.run.run_uldp` for each seed, and writes into the output folder

* ``PANEL-METHOD.csv`` per curve: per round (0 = the initial model) the mean and standard
  deviation over the seeds of the test metric and loss, the mean user-level epsilon and the mean
  seconds of the round;
* ``NAME.png``: one row per panel, columns test metric, (test loss,) epsilon against round (one
  line per method; epsilon on a log scale, DEFAULT left out as it has no finite epsilon);
* ``NAME.md`` and ``summary.json``: the final metric, loss and epsilon per method and panel;

and returns the Markdown.

Settings, from Section 5 of the paper and the authors' scripts
(``exp/script/privacy_utility.sh``, ``optimal_weighting.sh``, ``user_level_subsampling.sh``):
sigma = 5 and delta = 1e-5 throughout;

* Fig. 4, Creditcard: |U| = 100, 1000 x uniform, zipf; 5 silos; 100 rounds.
* Fig. 5, MNIST: |U| = 100, 10000 x uniform, zipf, zipf non-IID (at most 2 labels per user);
  5 silos; 200 rounds.
* Fig. 6, Heart Disease and Fig. 7, TCGA-BRCA: |U| = 50, 200 x uniform, zipf; the datasets'
  4 and 6 silos; 50 rounds.
* Fig. 8, Creditcard: ULDP-AVG against ULDP-AVG-w, |U| = 1000, 5, 20 and 50 silos x uniform,
  zipf; 100 rounds; test loss.
* Fig. 9: ULDP-AVG-w (q = 1) and ULDP-AVG-ws; (a) Creditcard, |U| = 1000, zipf, q = 0.1, 0.3,
  0.5, 0.7, 100 rounds; (b) MNIST, |U| = 10000, zipf, q = 0.1, 0.3, 0.5, 200 rounds.

Figs. 4-7 compare DEFAULT, ULDP-NAIVE, ULDP-GROUP-max, -median, -2, -8, ULDP-SGD, ULDP-AVG and
ULDP-AVG-w (the authors' scripts; the paper omits ULDP-NAIVE on MNIST).

Differences from the paper, stated in every report:

* Hyper-parameters are :data:`fedprivacy.uldp.config.DEFAULT_HYPER` (the paper tunes them per
  method and does not list them; the authors' scripts use e.g. 50 local epochs at
  ``eta_l = 0.001`` for Heart Disease).
* One seed by default (the paper averages 5 runs); ``--seeds 0,1,2,3,4`` gives the paper's count.
* Creditcard is the generated stand-in ``creditcard-synthetic`` (the Kaggle file is not
  available here): its numbers are **synthetic** and say nothing about the paper's values.
* Compute: on a 2-core CPU the MNIST and Creditcard figures default to fewer rounds (and MNIST
  Fig. 5 to fewer panels' users) than the paper; :data:`FIGURES` records each reduction and
  ``options["rounds"]`` overrides the rounds of every panel.
"""

from __future__ import annotations

import csv
import io
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fedprivacy.data.tabular import SiloDataset, load_silo_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_bytes, atomic_write_json, atomic_write_text
from fedprivacy.fl.engine import resolve_device
from fedprivacy.uldp.config import HyperDefaults, UldpConfig
from fedprivacy.uldp.run import EPSILON_ADVERSARIES, UldpResult, run_uldp

__all__ = [
    "FIGURES",
    "PRIVACY_UTILITY_METHODS",
    "Curve",
    "CurveResult",
    "FigureSpec",
    "Panel",
    "figure_markdown",
    "run_figure",
    "runner_for",
]

PRIVACY_UTILITY_METHODS: Final[tuple[str, ...]] = (
    "DEFAULT",
    "ULDP-NAIVE",
    "ULDP-GROUP-max",
    "ULDP-GROUP-median",
    "ULDP-GROUP-2",
    "ULDP-GROUP-8",
    "ULDP-SGD",
    "ULDP-AVG",
    "ULDP-AVG-w",
)
"""The methods of Figs. 4-7 (the authors' ``privacy_utility.sh``)."""

SIGMA: Final = 5.0
DELTA: Final = 1e-5


@dataclass(frozen=True)
class Curve:
    """One line of a panel: a method and, for the ``-s`` variants, its sampling rate.

    Attributes
    ----------
    method : str
        A name of :data:`fedprivacy.uldp.methods.METHODS`.
    sampling_rate : float or None
        User-level sampling rate ``q`` (``-s`` / ``-ws`` methods only).
    """

    method: str
    sampling_rate: float | None = None

    @property
    def label(self) -> str:
        """Legend text: the method, with ``q`` for the sampled variants."""
        if self.sampling_rate is None:
            return self.method
        return f"{self.method} (q={self.sampling_rate:g})"

    @property
    def slug(self) -> str:
        """File-name form of :attr:`label`."""
        return re.sub(r"[^A-Za-z0-9.-]+", "_", self.label).strip("_")


def _curves(methods: Sequence[str]) -> tuple[Curve, ...]:
    return tuple(Curve(m) for m in methods)


@dataclass(frozen=True)
class Panel:
    """One sub-figure: a data setting and its curves.

    Attributes
    ----------
    key : str
        Sub-figure letter as in the paper (``a``, ``b``, ...).
    dataset : str
        A dataset of :func:`fedprivacy.data.tabular.load_silo_dataset`.
    users : int
        ``|U|``.
    distribution : {"uniform", "zipf"}
        Record allocation.
    rounds : int
        Rounds run by default (see ``paper``).
    curves : tuple of Curve
        The lines.
    silos : int or None
        Silos of the pool datasets (``None``: the default 5, or the fixed silos).
    max_labels_per_user : int or None
        Non-IID MNIST (the paper: 2).
    paper : str
        The paper's setting of this panel where the default here is reduced ("" if not).
    """

    key: str
    dataset: str
    users: int
    distribution: str
    rounds: int
    curves: tuple[Curve, ...]
    silos: int | None = None
    max_labels_per_user: int | None = None
    paper: str = ""

    @property
    def paper_rounds(self) -> int:
        """The paper's rounds of this panel: from ``paper`` (``"200 rounds"``), else ``rounds``."""
        found = re.search(r"(\d+) rounds", self.paper)
        return int(found.group(1)) if found else self.rounds

    @property
    def label(self) -> str:
        """Human-readable setting, e.g. ``heart_disease, |U|=50, uniform``."""
        text = f"{self.dataset}, |U|={self.users}, {self.distribution}"
        if self.max_labels_per_user is not None:
            text += f" non-IID ({self.max_labels_per_user} labels/user)"
        if self.silos is not None:
            text += f", |S|={self.silos}"
        return text

    def config(self, curve: Curve, seed: int, rounds: int, data_dir: str | None) -> UldpConfig:
        """The :class:`UldpConfig` of ``curve`` in this panel (paper's sigma and delta)."""
        return UldpConfig(
            dataset=self.dataset,
            method=curve.method,
            users=self.users,
            silos=self.silos,
            distribution=self.distribution,
            rounds=rounds,
            sampling_rate=curve.sampling_rate,
            seed=seed,
            sigma=SIGMA,
            delta=DELTA,
            max_labels_per_user=self.max_labels_per_user,
            data_dir=data_dir,
        )


@dataclass(frozen=True)
class FigureSpec:
    """A figure of the paper and how it is reproduced.

    Attributes
    ----------
    name : str
        ``fedprivacy reproduce`` name (``uldp-fig4`` ...).
    title : str
        One line for ``reproduce list``.
    paper_setting : str
        The paper's setting of the figure.
    claims : tuple of str
        What the paper says the figure shows (its curves print no numbers).
    panels : tuple of Panel
        Sub-figures.
    show_loss : bool
        Plot the test loss too (MNIST, Fig. 8).
    reduction : str
        How the default differs from the paper for compute ("" if it does not).
    """

    name: str
    title: str
    paper_setting: str
    claims: tuple[str, ...]
    panels: tuple[Panel, ...]
    show_loss: bool = False
    reduction: str = ""


@dataclass
class CurveResult:
    """One curve over its seeds.

    Attributes
    ----------
    panel, curve
        Where it belongs.
    seeds : list of int
        Seeds run.
    metric, loss, epsilon, seconds : numpy.ndarray
        Shape ``(len(seeds), rounds + 1)``; column 0 is the initial model (epsilon 0, seconds
        0); ``nan`` where not evaluated.
    metric_name : str
        ``accuracy`` or ``c_index``.
    data_source : str
        Provenance of the data (``synthetic`` for the stand-in).
    group_size : int or None
        ``k`` of ULDP-GROUP-k (of the first seed).
    caveats : tuple of str
        Limits of the reported epsilon (:func:`fedprivacy.uldp.run.privacy_caveats`).
    epsilon_at : tuple of (int, numpy.ndarray) or None
        When fewer rounds than the paper's ``R`` were trained: ``R`` and the epsilon of each
        seed after ``R`` rounds (:meth:`fedprivacy.uldp.methods.MethodRunner.epsilon_after`).
    epsilon_server : numpy.ndarray or None
        Each seed's final epsilon against the aggregation server, which knows the user sample
        (:meth:`fedprivacy.uldp.methods.MethodRunner.epsilon_server`); ``None`` when unknown.
    hyper : dict of str to float or int or None
        The hyper-parameters the runs used (``global_lr``, ``local_lr``, ``clip``,
        ``local_epochs``, ``batch_size``; ``None`` where the method has none), so that a result
        stays readable when the defaults change.
    """

    panel: Panel
    curve: Curve
    seeds: list[int]
    metric: NDArray[np.float64]
    loss: NDArray[np.float64]
    epsilon: NDArray[np.float64]
    seconds: NDArray[np.float64]
    metric_name: str
    data_source: str
    group_size: int | None = None
    caveats: tuple[str, ...] = ()
    epsilon_at: tuple[int, NDArray[np.float64]] | None = None
    hyper: dict[str, float | int | None] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    epsilon_server: NDArray[np.float64] | None = None

    @property
    def synthetic(self) -> bool:
        """Whether the data are the generated stand-in."""
        return "synthetic" in self.data_source

    def final(self, values: NDArray[np.float64]) -> tuple[float, float]:
        """Mean and standard deviation over the seeds of the last column."""
        col = values[:, -1]
        if not np.all(np.isfinite(col)):
            return _nanmean(col), math.nan
        return float(np.mean(col)), float(np.std(col)) if len(col) > 1 else 0.0

    def to_csv(self) -> str:
        """Per-round CSV of the means and standard deviations over the seeds."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(
            [
                "round",
                f"{self.metric_name}_mean",
                f"{self.metric_name}_std",
                "loss_mean",
                "loss_std",
                "epsilon",
                "seconds",
                "seeds",
            ]
        )
        seeds = " ".join(map(str, self.seeds))
        with np.errstate(all="ignore"):
            for t in range(self.metric.shape[1]):
                w.writerow(
                    [
                        t,
                        _fmt(_nanmean(self.metric[:, t])),
                        _fmt(_nanstd(self.metric[:, t])),
                        _fmt(_nanmean(self.loss[:, t])),
                        _fmt(_nanstd(self.loss[:, t])),
                        _fmt(_nanmean(self.epsilon[:, t])),
                        _fmt(_nanmean(self.seconds[:, t])),
                        seeds,
                    ]
                )
        return buf.getvalue()


def _nanmean(v: NDArray[np.float64]) -> float:
    finite = v[np.isfinite(v)]
    if len(finite) == 0:
        return math.inf if np.any(np.isposinf(v)) else math.nan
    return float(np.mean(finite))


def _nanstd(v: NDArray[np.float64]) -> float:
    finite = v[np.isfinite(v)]
    return float(np.std(finite)) if len(finite) > 1 else math.nan


def _fmt(x: float) -> str:
    return "" if math.isnan(x) else ("inf" if math.isinf(x) else f"{x:.6g}")


# -- the figures -------------------------------------------------------------------------------

_PU = _curves(PRIVACY_UTILITY_METHODS)
_MNIST_PU = _curves([m for m in PRIVACY_UTILITY_METHODS if m != "ULDP-NAIVE"])

_PU_CLAIMS: Final = (
    "ULDP-AVG/SGD reach competitive utility with small user-level epsilon (that of "
    "ULDP-NAIVE: one Gaussian mechanism per round).",
    "ULDP-AVG-w converges much faster than ULDP-AVG; ULDP-SGD converges more slowly than ULDP-AVG.",
    "ULDP-NAIVE has a low epsilon but much lower utility than the other methods.",
    "ULDP-GROUP-k has reasonable utility (best when n is small) but a very large epsilon "
    "(group-privacy conversion).",
    "DEFAULT (non-private) stays above ULDP-AVG in convergence speed and final utility.",
)


def _pu_panels(
    dataset: str, users: Sequence[int], rounds: int, curves: tuple[Curve, ...]
) -> tuple[Panel, ...]:
    panels = []
    letters = iter("abcdefgh")
    for u in users:
        for dist in ("uniform", "zipf"):
            panels.append(Panel(next(letters), dataset, u, dist, rounds, curves))
    return tuple(panels)


def _mnist_panels(rounds_small: int, rounds_large: int) -> tuple[Panel, ...]:
    panels = []
    letters = iter("abcdef")
    for users, rounds in ((100, rounds_small), (10000, rounds_large)):
        for dist, labels in (("uniform", None), ("zipf", None), ("zipf", 2)):
            panels.append(
                Panel(
                    next(letters),
                    "mnist",
                    users,
                    dist,
                    rounds,
                    _MNIST_PU,
                    max_labels_per_user=labels,
                    paper="200 rounds",
                )
            )
    return tuple(panels)


_WEIGHTING = _curves(("ULDP-AVG", "ULDP-AVG-w"))

FIGURES: Final[dict[str, FigureSpec]] = {
    "uldp-fig4": FigureSpec(
        "uldp-fig4",
        "ULDP-FL Fig. 4: privacy-utility on Creditcard (SYNTHETIC stand-in), |U| 100/1000",
        "Creditcard (Kaggle, under-sampled, ~25K records, 4K-parameter MLP), 5 silos, "
        "|U| = 100, 1000, uniform / zipf, 100 rounds, sigma 5, delta 1e-5, 5 runs",
        (
            *_PU_CLAIMS,
            "Fig. 4c (|U| = 1000, small n): ULDP-GROUP-max/median are more accurate than ULDP-AVG.",
        ),
        tuple(
            replace(p, paper="100 rounds")
            for p in _pu_panels("creditcard-synthetic", (100, 1000), 10, _PU)
        ),
        reduction="10 rounds instead of 100 (one ULDP-GROUP round on 1,000 users takes ~8 s "
        "on 2 CPU cores); data: the generated stand-in, not Kaggle's file",
    ),
    "uldp-fig5": FigureSpec(
        "uldp-fig5",
        "ULDP-FL Fig. 5: privacy-utility on MNIST, |U| 100/10000, uniform/zipf/non-IID",
        "MNIST (60K train, CNN ~20K parameters), 5 silos, |U| = 100 (a-c), 10000 (d-f); "
        "uniform, zipf, zipf non-IID (2 labels per user); 200 rounds, sigma 5, delta 1e-5",
        (
            *_PU_CLAIMS[:2],
            *_PU_CLAIMS[3:],
            "Fig. 5c (non-IID, |U| = 100): ULDP-AVG converges worse; less so with |U| = 10000 "
            "(5f).",
            "Figs. 5d-f (|U| = 10000, 1-2 records per user): ULDP-GROUP-2 reaches a reasonably "
            "small epsilon.",
        ),
        _mnist_panels(20, 3),
        show_loss=True,
        reduction="20 rounds for |U| = 100 and 3 rounds for |U| = 10000 instead of 200 (an "
        "MNIST round of the 9 methods takes minutes on 2 CPU cores); ULDP-NAIVE left out as "
        "in the paper",
    ),
    "uldp-fig6": FigureSpec(
        "uldp-fig6",
        "ULDP-FL Fig. 6: privacy-utility on Heart Disease, |U| 50/200, uniform/zipf",
        "Heart Disease (FLamby, 4 silos, logistic regression), |U| = 50, 200, uniform / zipf, "
        "50 rounds, sigma 5, delta 1e-5, 5 runs",
        _PU_CLAIMS,
        _pu_panels("heart_disease", (50, 200), 50, _PU),
    ),
    "uldp-fig7": FigureSpec(
        "uldp-fig7",
        "ULDP-FL Fig. 7: privacy-utility on TCGA-BRCA (C-index), |U| 50/200, uniform/zipf",
        "TCGA-BRCA (FLamby, 6 silos, Cox model, C-index), |U| = 50, 200, uniform / zipf, "
        "50 rounds, sigma 5, delta 1e-5, 5 runs",
        _PU_CLAIMS,
        _pu_panels("tcga_brca", (50, 200), 50, _PU),
    ),
    "uldp-fig8": FigureSpec(
        "uldp-fig8",
        "ULDP-FL Fig. 8: ULDP-AVG vs ULDP-AVG-w test loss, Creditcard (SYNTHETIC), 5/20/50 silos",
        "Creditcard, |U| = 1000, |S| = 5, 20, 50, uniform / zipf, ULDP-AVG vs ULDP-AVG-w, "
        "100 rounds, sigma 5, test loss",
        (
            "Under zipf (skewed records) ULDP-AVG-w has a clearly lower test loss than ULDP-AVG.",
            "The gap grows with the number of silos (all weights 1/|S| get smaller).",
        ),
        tuple(
            Panel(
                key,
                "creditcard-synthetic",
                1000,
                dist,
                20,
                _WEIGHTING,
                silos=silos,
                paper="100 rounds",
            )
            for key, (silos, dist) in zip(
                "abcdef",
                [(s, d) for s in (5, 20, 50) for d in ("uniform", "zipf")],
                strict=True,
            )
        ),
        show_loss=True,
        reduction="20 rounds instead of 100; data: the generated stand-in, not Kaggle's file",
    ),
    "uldp-fig9": FigureSpec(
        "uldp-fig9",
        "ULDP-FL Fig. 9: user-level sub-sampling (ULDP-AVG-ws, q), Creditcard (SYNTHETIC), MNIST",
        "ULDP-AVG-w (q = 1) and ULDP-AVG-ws: (a) Creditcard, |U| = 1000, zipf, q = 0.1, 0.3, "
        "0.5, 0.7, 100 rounds; (b) MNIST, |U| = 10000, zipf, q = 0.1, 0.3, 0.5, 200 rounds",
        (
            "Smaller q gives a much smaller epsilon at some cost in utility; q = 0.7 loses "
            "little on Creditcard.",
            "On MNIST with 10000 users sub-sampling costs little utility while improving "
            "privacy greatly.",
        ),
        (
            Panel(
                "a",
                "creditcard-synthetic",
                1000,
                "zipf",
                20,
                (Curve("ULDP-AVG-w"), *(Curve("ULDP-AVG-ws", q) for q in (0.1, 0.3, 0.5, 0.7))),
                paper="100 rounds",
            ),
            Panel(
                "b",
                "mnist",
                10000,
                "zipf",
                3,
                (Curve("ULDP-AVG-w"), *(Curve("ULDP-AVG-ws", q) for q in (0.1, 0.3, 0.5))),
                paper="200 rounds",
            ),
        ),
        reduction="(a) 20 rounds instead of 100 on the generated Creditcard stand-in; "
        "(b) 3 rounds instead of 200 (a 10,000-user MNIST round takes about a minute on 2 CPU "
        "cores)",
    ),
}
"""Every figure by its ``reproduce`` name, with the default (possibly reduced) settings."""


# -- running ---------------------------------------------------------------------------------


def _log(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def _run_curve(
    panel: Panel,
    curve: Curve,
    seeds: Sequence[int],
    rounds: int,
    data_dir: str | None,
    datasets: dict[tuple[str, int], SiloDataset],
    quiet: bool,
    settings: dict[str, Any] | None = None,
    epsilon_at: int | None = None,
) -> CurveResult:
    rows: dict[str, list[list[float]]] = {k: [] for k in ("metric", "loss", "eps", "sec")}
    first: UldpResult | None = None
    projected: list[float] = []
    against_server: list[float] = []
    for seed in seeds:
        key = (panel.dataset, seed)
        if key not in datasets:
            datasets[key] = load_silo_dataset(panel.dataset, data_dir, seed=seed)
        started = time.perf_counter()
        config = panel.config(curve, seed, rounds, data_dir).with_overrides(**(settings or {}))
        res = run_uldp(config, dataset=datasets[key], epsilon_at=epsilon_at)
        if res.epsilon_at is not None:
            projected.append(res.epsilon_at[1])
        against_server.append(res.final.epsilon_server)
        first = first or res
        rows["metric"].append(
            [res.initial.get("metric", math.nan)] + [r.metric for r in res.records]
        )
        rows["loss"].append([res.initial.get("loss", math.nan)] + [r.loss for r in res.records])
        rows["eps"].append([0.0] + [r.epsilon for r in res.records])
        rows["sec"].append([0.0] + [r.seconds for r in res.records])
        _log(
            quiet,
            f"  [{panel.key}] {curve.label:28s} seed {seed}: {res.metric_name} "
            f"{res.final.metric:.4f}, epsilon {res.final.epsilon:.4g} "
            f"({time.perf_counter() - started:.1f} s)",
        )
    assert first is not None
    return CurveResult(
        panel=panel,
        curve=curve,
        seeds=list(seeds),
        metric=np.asarray(rows["metric"], dtype=np.float64),
        loss=np.asarray(rows["loss"], dtype=np.float64),
        epsilon=np.asarray(rows["eps"], dtype=np.float64),
        seconds=np.asarray(rows["sec"], dtype=np.float64),
        metric_name=first.metric_name,
        data_source=first.data_source,
        group_size=first.group_size,
        caveats=first.caveats,
        epsilon_at=(
            None if epsilon_at is None else (epsilon_at, np.asarray(projected, dtype=np.float64))
        ),
        hyper=_hyper_of(first.config, curve.method),
        epsilon_server=np.asarray(against_server, dtype=np.float64),
    )


#: The hyper-parameters a figure reports per curve (those of ``DEFAULT_HYPER``), and their short
#: names in its tables.
HYPER_FIELDS: Final = tuple(f.name for f in fields(HyperDefaults))
_HYPER_SHORT: Final = {
    "global_lr": "eta_g",
    "local_lr": "eta_l",
    "clip": "C",
    "local_epochs": "Q",
    "batch_size": "B",
}


def _hyper_of(config: UldpConfig, method: str) -> dict[str, float | int | None]:
    """The resolved :data:`HYPER_FIELDS` of ``config`` (no ``clip`` for DEFAULT: it clips none)."""
    return {
        name: None if (name, method) == ("clip", "DEFAULT") else getattr(config, name)
        for name in HYPER_FIELDS
    }


def _hyper_text(hyper: dict[str, float | int | None]) -> str:
    """``eta_g 5, eta_l 0.05, C 0.5, Q 5, B 16`` (the ones set)."""
    return ", ".join(f"{_HYPER_SHORT[k]} {v:g}" for k, v in hyper.items() if v is not None)


#: Settings ``run_figure`` accepts (``reproduce uldp-figN --set KEY=VALUE``): where and how the
#: runs compute, never what they compute.
FIGURE_SETTINGS: Final = ("device", "max_rows", "eval_every")


def _selected_panels(spec: FigureSpec, only: Sequence[str] | None) -> tuple[Panel, ...]:
    if only is None:
        return spec.panels
    keys = [p.key for p in spec.panels]
    unknown = sorted(set(only) - set(keys))
    if unknown or not only:
        raise ParameterError(
            "only", f"unknown panels {unknown} of {spec.name}; its panels are {', '.join(keys)}"
        )
    return tuple(p for p in spec.panels if p.key in set(only))


def _checked_settings(settings: dict[str, Any] | None) -> dict[str, Any]:
    if not settings:
        return {}
    settings = {k.replace("-", "_"): v for k, v in settings.items()}
    unknown = sorted(set(settings) - set(FIGURE_SETTINGS))
    if unknown:
        raise ParameterError(
            "set",
            f"{', '.join(unknown)} cannot be changed in a figure "
            f"(only {', '.join(FIGURE_SETTINGS)})",
        )
    probe = UldpConfig.from_mapping({"method": "DEFAULT", **settings}).resolved().validate()
    resolve_device(probe.device)  # refuse a missing GPU before the first run
    return {k: getattr(probe, k) for k in settings}


def run_figure(
    spec: FigureSpec,
    out_dir: str | Path,
    options: dict[str, Any] | None = None,
) -> str:
    """Run every curve of ``spec`` and write its CSVs, PNG, Markdown and summary.

    Parameters
    ----------
    spec : FigureSpec
        The figure (e.g. ``FIGURES["uldp-fig6"]``).
    out_dir : str or pathlib.Path
        Output folder (created).
    options : dict, optional
        ``seeds`` (list of int, default ``[0]``), ``rounds`` (int: every panel's rounds,
        default the spec's), ``data_dir`` (default ``$FEDPRIVACY_DATA``), ``quiet`` (no
        progress on stderr), ``only`` (panel keys, e.g. ``["d", "e"]``: run only these
        panels), ``settings`` (a dict of :data:`FIGURE_SETTINGS` keys applied to every run,
        e.g. ``{"device": "cuda"}``); ``None`` values take the defaults.

    Raises
    ------
    ParameterError
        For an unknown panel key or setting.

    Returns
    -------
    str
        The Markdown report (also written to ``NAME.md``).
    """
    opts = options or {}
    panels = _selected_panels(spec, opts.get("only"))
    settings = _checked_settings(opts.get("settings"))
    seeds = list(opts.get("seeds") or [0])
    rounds_override = opts.get("rounds")
    data_dir = opts.get("data_dir")
    data_dir = None if data_dir is None else str(data_dir)
    quiet = bool(opts.get("quiet"))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    datasets: dict[tuple[str, int], SiloDataset] = {}
    results: list[CurveResult] = []
    started = time.perf_counter()
    for panel in panels:
        rounds = int(rounds_override) if rounds_override is not None else panel.rounds
        paper_rounds = panel.paper_rounds
        run_panel = replace(panel, rounds=rounds)
        _log(quiet, f"{spec.name} ({run_panel.key}) {run_panel.label}, {rounds} rounds")
        for curve in panel.curves:
            res = _run_curve(
                run_panel,
                curve,
                seeds,
                rounds,
                data_dir,
                datasets,
                quiet,
                settings,
                epsilon_at=paper_rounds if paper_rounds != rounds else None,
            )
            atomic_write_text(out / f"{panel.key}-{curve.slug}.csv", res.to_csv())
            results.append(res)
    elapsed = time.perf_counter() - started
    png = out / f"{spec.name}.png"
    _plot(spec, results, png)
    markdown = figure_markdown(spec, results, seeds, png, elapsed, rounds_override)
    atomic_write_text(out / f"{spec.name}.md", markdown)
    atomic_write_json(out / "summary.json", _summary(spec, results, seeds, elapsed))
    return markdown


def _summary(
    spec: FigureSpec, results: list[CurveResult], seeds: list[int], elapsed: float
) -> dict[str, Any]:
    rows = []
    for r in results:
        m, ms = r.final(r.metric)
        loss, _ = r.final(r.loss)
        eps, _ = r.final(r.epsilon)
        rows.append(
            {
                "panel": r.panel.key,
                "setting": r.panel.label,
                "rounds": r.panel.rounds,
                "method": r.curve.method,
                "sampling_rate": r.curve.sampling_rate,
                "metric_name": r.metric_name,
                "metric": _json_num(m),
                "metric_std": _json_num(ms),
                "loss": _json_num(loss),
                "epsilon": _json_num(eps),
                "epsilon_server": (
                    None if r.epsilon_server is None else _json_num(_nanmean(r.epsilon_server))
                ),
                "group_size": r.group_size,
                "data_source": r.data_source,
                "seconds_per_round": _json_num(float(np.mean(r.seconds[:, 1:]))),
                "caveats": list(r.caveats),
                "hyper": dict(r.hyper),
                **(
                    {}
                    if r.epsilon_at is None
                    else {
                        "epsilon_at": {
                            "rounds": r.epsilon_at[0],
                            "epsilon": _json_num(_nanmean(r.epsilon_at[1])),
                        }
                    }
                ),
            }
        )
    return {
        "figure": spec.name,
        "seeds": seeds,
        "sigma": SIGMA,
        "delta": DELTA,
        "seconds": round(elapsed, 1),
        "reduction": spec.reduction,
        "results": rows,
    }


def _json_num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _num(x: float, digits: int = 4) -> str:
    if math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf"
    if abs(x) >= 1e4:
        return f"{x:.3g}"
    return f"{x:.{digits}g}"


def figure_markdown(
    spec: FigureSpec,
    results: list[CurveResult],
    seeds: list[int],
    png: Path,
    elapsed: float,
    rounds_override: int | None = None,
) -> str:
    """The Markdown report: setting, reductions, one table per panel, the paper's claims."""
    lines = [f"## {spec.title}", "", f"Paper's setting: {spec.paper_setting}.", ""]
    rounds_text = (
        f"{rounds_override} rounds (override)"
        if rounds_override is not None
        else ", ".join(sorted({f"{p.rounds} rounds" for p in spec.panels}))
    )
    lines.append(
        f"Ours: sigma {SIGMA:g}, delta {DELTA:g}, seeds {','.join(map(str, seeds))}, "
        f"{rounds_text}; hyper-parameters from `DEFAULT_HYPER` (not the paper's, which are not "
        f"published in the paper; each row gives its own); {elapsed:.0f} s in all."
    )
    lines += ["", f"User-level epsilon is against {EPSILON_ADVERSARIES['epsilon']}."]
    if any(r.curve.sampling_rate is not None for r in results):
        lines.append(
            "Rows with user sub-sampling also give the epsilon against "
            f"{EPSILON_ADVERSARIES['epsilon_server']}."
        )
    if spec.reduction and rounds_override is None:
        lines += ["", f"**Reduced setting (compute):** {spec.reduction}."]
    if any(r.synthetic for r in results):
        lines += [
            "",
            "**Creditcard here is the generated stand-in `creditcard-synthetic` (SYNTHETIC "
            "data with Kaggle's schema): its numbers cannot be compared with the paper's.**",
        ]
    lines += ["", f"Figure: `{png.name}` (next to this file).", ""]
    for panel in spec.panels:
        rows = [r for r in results if r.panel.key == panel.key]
        if not rows:
            continue
        name = rows[0].metric_name.replace("_", "-")
        paper = f" (paper: {panel.paper})" if panel.paper and rounds_override is None else ""
        at = next((r.epsilon_at[0] for r in rows if r.epsilon_at is not None), None)
        at_head = "" if at is None else f" epsilon after {at} rounds |"
        sampled = any(r.curve.sampling_rate is not None for r in rows)
        at_head += " epsilon against the server |" if sampled else ""
        lines += [
            f"### ({panel.key}) {panel.label}, {rows[0].panel.rounds} rounds{paper}",
            "",
            f"| method | test {name} (final) | test loss | user-level epsilon | k | s/round |"
            + at_head
            + " hyper-parameters |",
            "|---|---|---|---|---|---|" + "---|" * (at_head.count("|") + 1),
        ]
        for r in rows:
            m, ms = r.final(r.metric)
            loss, _ = r.final(r.loss)
            eps, _ = r.final(r.epsilon)
            metric = _num(m) + (f" ± {_num(ms, 2)}" if len(r.seeds) > 1 else "")
            k = "" if r.group_size is None else str(r.group_size)
            sec = float(np.mean(r.seconds[:, 1:]))
            at_cell = ""
            if at is not None:
                values = r.epsilon_at[1] if r.epsilon_at is not None else np.array([math.nan])
                at_cell = f" {_num(_nanmean(values))} |"
            if sampled:
                server = r.epsilon_server if r.epsilon_server is not None else np.array([math.nan])
                at_cell += f" {_num(_nanmean(server))} |"
            lines.append(
                f"| {r.curve.label} | {metric} | {_num(loss)} | {_num(eps)} | {k} | {sec:.3g} |"
                + at_cell
                + f" {_hyper_text(r.hyper)} |"
            )
        lines.append("")
    caveats: dict[str, list[str]] = {}
    for r in results:
        for caveat in r.caveats:
            if r.curve.label not in caveats.setdefault(caveat, []):
                caveats[caveat].append(r.curve.label)
    for caveat, labels in caveats.items():
        lines += [f"**Caveat ({', '.join(labels)}):** {caveat}.", ""]
    lines += ["What the paper reports (its figures are curves; no numbers printed):", ""]
    lines += [f"- {c}" for c in spec.claims]
    lines.append("")
    return "\n".join(lines)


def _plot(spec: FigureSpec, results: list[CurveResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 3 if spec.show_loss else 2
    panels = [p for p in spec.panels if any(r.panel.key == p.key for r in results)]
    n = max(len(panels), 1)
    fig, axes = plt.subplots(n, cols, figsize=(4.2 * cols, 3.0 * n), squeeze=False)
    for i, panel in enumerate(panels):
        rows = [r for r in results if r.panel.key == panel.key]
        ax_m, ax_e = axes[i][0], axes[i][cols - 1]
        ax_l = axes[i][1] if spec.show_loss else None
        for r in rows:
            x = np.arange(r.metric.shape[1])
            with np.errstate(all="ignore"):
                mean = np.array([_nanmean(r.metric[:, t]) for t in x])
                loss = np.array([_nanmean(r.loss[:, t]) for t in x])
                eps = np.array([_nanmean(r.epsilon[:, t]) for t in x])
            ok = np.isfinite(mean)
            (line,) = ax_m.plot(x[ok], mean[ok], label=r.curve.label, lw=1.2)
            if len(r.seeds) > 1:
                std = np.array([_nanstd(r.metric[:, t]) for t in x])
                good = ok & np.isfinite(std)
                ax_m.fill_between(
                    x[good],
                    (mean - std)[good],
                    (mean + std)[good],
                    alpha=0.15,
                    color=line.get_color(),
                )
            if ax_l is not None:
                okl = np.isfinite(loss)
                ax_l.plot(x[okl], loss[okl], lw=1.2, color=line.get_color())
            oke = np.isfinite(eps) & (eps > 0)
            if np.any(oke):
                ax_e.plot(x[oke], eps[oke], lw=1.2, color=line.get_color())
        metric_name = rows[0].metric_name.replace("_", "-") if rows else "metric"
        ax_m.set_ylabel(f"test {metric_name}")
        ax_m.set_title(f"({panel.key}) {panel.label}", fontsize=8)
        if ax_l is not None:
            ax_l.set_ylabel("test loss")
        ax_e.set_ylabel("user-level epsilon")
        ax_e.set_yscale("log")
        for ax in axes[i]:
            ax.set_xlabel("round")
            ax.grid(alpha=0.3)
        if i == 0:
            ax_m.legend(fontsize=6)
    title = spec.title
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def runner_for(name: str) -> Callable[[Path, dict[str, Any]], str]:
    """The ``reproduce`` runner of figure ``name`` (a key of :data:`FIGURES`)."""
    spec = FIGURES[name]

    def run(out_dir: Path, options: dict[str, Any]) -> str:
        return run_figure(spec, out_dir, options)

    run.__doc__ = f"Run {name}: {spec.title}."
    return run
