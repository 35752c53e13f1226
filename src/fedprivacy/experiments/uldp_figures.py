"""Figs. 4-9 of the ULDP-FL paper (Kato et al.): privacy-utility curves, weighting, sampling.

Each figure is a :class:`~fedprivacy.experiments.uldp_figure_specs.FigureSpec` (module
:mod:`fedprivacy.experiments.uldp_figure_specs`): panels (a dataset, a number of users, a record
distribution, rounds) and the curves of each panel (a method, for the ``-s`` variants a
user-level sampling rate). :func:`run_figure` runs every curve of every panel with
:func:`fedprivacy.uldp.run.run_uldp` for each seed, and writes into the output folder (the
reports are made in :mod:`fedprivacy.experiments.uldp_figure_report`)

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
  Fig. 5 to fewer panels' users) than the paper;
  :data:`~fedprivacy.experiments.uldp_figure_specs.FIGURES` records each reduction and
  ``options["rounds"]`` overrides the rounds of every panel.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Final

import numpy as np

from fedprivacy.data.tabular import SiloDataset, load_silo_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.uldp_figure_report import (
    CurveResult,
    _plot,
    _summary,
    figure_markdown,
)
from fedprivacy.experiments.uldp_figure_specs import FIGURES, Curve, FigureSpec, Panel
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.fl.engine import resolve_device
from fedprivacy.uldp.config import HyperDefaults, UldpConfig
from fedprivacy.uldp.results import UldpResult
from fedprivacy.uldp.run import run_uldp

__all__ = ["run_figure", "runner_for"]


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


#: The hyper-parameters a figure reports per curve (those of ``DEFAULT_HYPER``).
HYPER_FIELDS: Final = tuple(f.name for f in fields(HyperDefaults))


def _hyper_of(config: UldpConfig, method: str) -> dict[str, float | int | None]:
    """The resolved :data:`HYPER_FIELDS` of ``config`` (no ``clip`` for DEFAULT: it clips none)."""
    return {
        name: None if (name, method) == ("clip", "DEFAULT") else getattr(config, name)
        for name in HYPER_FIELDS
    }


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


def runner_for(name: str) -> Callable[[Path, dict[str, Any]], str]:
    """The ``reproduce`` runner of figure ``name`` (a key of ``uldp_figure_specs.FIGURES``)."""
    spec = FIGURES[name]

    def run(out_dir: Path, options: dict[str, Any]) -> str:
        return run_figure(spec, out_dir, options)

    run.__doc__ = f"Run {name}: {spec.title}."
    return run
