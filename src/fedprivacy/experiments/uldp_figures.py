"""Figs. 4-9 of the ULDP-FL paper (Kato et al.): privacy-utility curves, weighting, sampling.

Each figure is a :class:`~fedprivacy.experiments.uldp_figure_specs.FigureSpec` (module
:mod:`fedprivacy.experiments.uldp_figure_specs`): panels (a dataset, a number of users, a record
distribution, rounds) and the curves of each panel (a method, for the ``-s`` variants a
user-level sampling rate). :func:`run_figure` runs every curve of every panel with
:func:`fedprivacy.uldp.run.run_uldp` for each seed, and writes into the output folder (the
reports are made in :mod:`fedprivacy.experiments.uldp_figure_report`)

* ``PANEL-SLUG.csv`` per curve (the slug of :attr:`Curve.label
  <fedprivacy.experiments.uldp_figure_specs.Curve.slug>`): per round (0 = the initial model) the
  mean and standard deviation over the seeds of the test metric and loss, the mean user-level
  epsilon and the mean seconds of the round;
* ``PANEL-SLUG.json`` per curve: the whole result and what defined it
  (:mod:`fedprivacy.experiments.uldp_figure_store`); a later run computing the curve the same
  way loads it instead of training (``options["only"]`` selects single curves as
  ``PANEL:CURVE``, so the curves of a figure can run as parallel processes into one folder and
  be assembled by a last run over all of them);
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

* Hyper-parameters are :data:`fedprivacy.uldp.hyper_defaults.DEFAULT_HYPER` (the paper tunes
  them per method and does not list them; the authors' scripts use e.g. 50 local epochs at
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
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

import numpy as np

from fedprivacy.data.silo_dataset import SiloDataset
from fedprivacy.data.tabular import load_silo_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.uldp_figure_report import (
    CurveResult,
    figure_markdown,
    figure_summary,
    plot_curves,
)
from fedprivacy.experiments.uldp_figure_specs import FIGURES, Curve, FigureSpec, Panel
from fedprivacy.experiments.uldp_figure_store import (
    StoredCurve,
    computed_key,
    reusable_curve,
    write_curve,
)
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.fl.clients import resolve_device
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.hyper_defaults import HyperDefaults
from fedprivacy.uldp.results import UldpResult
from fedprivacy.uldp.run import run_uldp

__all__ = ["run_figure", "runner_for"]


def _log(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def _run_curve(
    panel: Panel,
    curve: Curve,
    configs: Sequence[UldpConfig],
    datasets: dict[tuple[str, int], SiloDataset],
    quiet: bool,
    epsilon_at: int | None = None,
) -> CurveResult:
    rows: dict[str, list[list[float]]] = {k: [] for k in ("metric", "loss", "eps", "sec")}
    first: UldpResult | None = None
    projected: list[float] = []
    against_server: list[float] = []
    for config in configs:
        key = (panel.dataset, config.seed)
        if key not in datasets:
            datasets[key] = load_silo_dataset(panel.dataset, config.data_dir, seed=config.seed)
        started = time.perf_counter()
        res = run_uldp(config, dataset=datasets[key], epsilon_at=epsilon_at)
        if res.epsilon_at is not None:
            projected.append(res.epsilon_at[1])
        against_server.append(res.final.get("epsilon_server"))
        first = first or res
        rows["metric"].append(
            [res.initial.get("metric", math.nan)] + [r.get("metric") for r in res.records]
        )
        rows["loss"].append(
            [res.initial.get("loss", math.nan)] + [r.get("loss") for r in res.records]
        )
        rows["eps"].append([0.0] + [r.get("epsilon") for r in res.records])
        rows["sec"].append([0.0] + [r.seconds for r in res.records])
        _log(
            quiet,
            f"  [{panel.key}] {curve.label:28s} seed {config.seed}: {res.metric_name} "
            f"{res.final.get('metric'):.4f}, epsilon {res.final.get('epsilon'):.4g} "
            f"({time.perf_counter() - started:.1f} s)",
        )
    assert first is not None
    return CurveResult(
        panel=panel,
        curve=curve,
        seeds=[c.seed for c in configs],
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
#: runs compute, never what they compute. ``device``, ``max_rows`` and ``gradient`` do not keep
#: a finished curve from being reused; ``eval_every`` does (it decides which rounds have a test
#: metric).
FIGURE_SETTINGS: Final = ("device", "max_rows", "gradient", "eval_every")

#: The selected curves of each selected panel, in the spec's order.
Selection = tuple[tuple[Panel, tuple[Curve, ...]], ...]


def _named_curve(spec: FigureSpec, panel: Panel, name: str) -> Curve:
    """The curve of ``panel`` whose label or slug is ``name`` (case-insensitive)."""
    for curve in panel.curves:
        if name.casefold() in (curve.label.casefold(), curve.slug.casefold()):
            return curve
    names = [c.label if c.slug == c.label else f"{c.label} [{c.slug}]" for c in panel.curves]
    raise ParameterError(
        "only",
        f"panel {panel.key} of {spec.name} has no curve {name!r}; its curves are "
        f"{', '.join(names)}",
    )


def _selected(spec: FigureSpec, only: Sequence[str] | None) -> Selection:
    """The panels and curves ``only`` names: ``PANEL`` (every curve) or ``PANEL:CURVE``.

    ``CURVE`` is a curve's label or slug (``ULDP-AVG``, ``ULDP-AVG-ws (q=0.1)`` or
    ``ULDP-AVG-ws_q_0.1``), case-insensitive; ``None`` selects everything.

    Raises
    ------
    ParameterError
        For an unknown panel or curve (the message lists those that exist), or no item.
    """
    if only is None:
        return tuple((p, p.curves) for p in spec.panels)
    by_key = {p.key: p for p in spec.panels}
    keys = ", ".join(by_key)
    items = [item.strip() for item in only if item.strip()]
    if not items:
        raise ParameterError("only", f"names no panel of {spec.name}; its panels are {keys}")
    chosen: dict[str, set[Curve]] = {}
    for item in items:
        key, sep, name = (part.strip() for part in item.partition(":"))
        if key not in by_key:
            raise ParameterError(
                "only", f"unknown panel {key!r} of {spec.name}; its panels are {keys}"
            )
        curves = {_named_curve(spec, by_key[key], name)} if sep else set(by_key[key].curves)
        chosen.setdefault(key, set()).update(curves)
    return tuple(
        (p, tuple(c for c in p.curves if c in chosen[p.key]))
        for p in spec.panels
        if p.key in chosen
    )


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


@dataclass
class _Run:
    """What the curves of one :func:`run_figure` call share."""

    figure: str
    out: Path
    seeds: list[int]
    data_dir: str | None
    settings: dict[str, Any]
    quiet: bool
    datasets: dict[tuple[str, int], SiloDataset] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)
    reused_seconds: float = 0.0


def _curve(run: _Run, panel: Panel, curve: Curve, epsilon_at: int | None) -> CurveResult:
    """Load the curve from ``PANEL-SLUG.json`` if computed the same way, else train it.

    A record computed differently (other seeds, rounds, ``eval_every``, hyper-parameters ...)
    or unreadable is not used: the curve is trained again and the record overwritten.
    """
    stem = f"{panel.key}-{curve.slug}"
    configs = [
        panel.config(curve, seed, panel.rounds, run.data_dir).with_overrides(**run.settings)
        for seed in run.seeds
    ]
    computed = computed_key(configs, epsilon_at)
    stored, why = reusable_curve(run.out / f"{stem}.json", computed)
    if stored is not None:
        _log(run.quiet, f"  [{panel.key}] {curve.label:28s} reused ({stem}.json)")
        run.reused.append(stem)
        run.reused_seconds += stored.wall_seconds
        res = replace(stored.result, panel=panel, curve=curve)
    else:
        if why:
            _log(run.quiet, f"  [{panel.key}] {curve.label:28s} {stem}.json {why}: training again")
        started = time.perf_counter()
        res = _run_curve(panel, curve, configs, run.datasets, run.quiet, epsilon_at)
        fresh = StoredCurve(res, computed, time.perf_counter() - started)
        write_curve(run.out / f"{stem}.json", fresh, run.settings, run.figure)
    atomic_write_text(run.out / f"{stem}.csv", res.to_csv())
    return res


def run_figure(
    spec: FigureSpec,
    out_dir: str | Path,
    options: dict[str, Any] | None = None,
) -> str:
    """Run (or reuse) every selected curve of ``spec``; write its CSVs, PNG, Markdown, summary.

    A curve whose ``PANEL-SLUG.json`` in ``out_dir`` was computed the same way (seeds, rounds,
    resolved configuration and hyper-parameters, ``eval_every``; not ``device`` or
    ``max_rows``: :mod:`fedprivacy.experiments.uldp_figure_store`) is loaded instead of
    trained, so curves run as separate processes (``only=["e:ULDP-AVG"]``, ...) into one
    folder are then assembled by one run over all of them. Any other record is overwritten by
    a new training.

    Parameters
    ----------
    spec : FigureSpec
        The figure (e.g. ``FIGURES["uldp-fig6"]``).
    out_dir : str or pathlib.Path
        Output folder (created).
    options : dict, optional
        ``seeds`` (list of int, default ``[0]``), ``rounds`` (int: every panel's rounds,
        default the spec's), ``data_dir`` (default ``$FEDPRIVACY_DATA``), ``quiet`` (no
        progress on stderr), ``only`` (panel keys, e.g. ``["d", "e"]``, or single curves as
        ``PANEL:CURVE`` with a curve's label or slug, e.g. ``["e:ULDP-AVG",
        "a:ULDP-AVG-ws_q_0.1"]``: run only these), ``settings`` (a dict of
        :data:`FIGURE_SETTINGS` keys applied to every run, e.g. ``{"device": "cuda"}``);
        ``None`` values take the defaults.

    Raises
    ------
    ParameterError
        For an unknown panel, curve or setting.

    Returns
    -------
    str
        The Markdown report (also written to ``NAME.md``).
    """
    opts = options or {}
    selection = _selected(spec, opts.get("only"))
    data_dir = opts.get("data_dir")
    run = _Run(
        figure=spec.name,
        out=Path(out_dir),
        seeds=list(opts.get("seeds") or [0]),
        data_dir=None if data_dir is None else str(data_dir),
        settings=_checked_settings(opts.get("settings")),
        quiet=bool(opts.get("quiet")),
    )
    rounds_override = opts.get("rounds")
    run.out.mkdir(parents=True, exist_ok=True)
    results: list[CurveResult] = []
    started = time.perf_counter()
    for panel, curves in selection:
        rounds = int(rounds_override) if rounds_override is not None else panel.rounds
        paper_rounds = panel.paper_rounds
        run_panel = replace(panel, rounds=rounds)
        _log(run.quiet, f"{spec.name} ({panel.key}) {panel.label}, {rounds} rounds")
        for curve in curves:
            at = paper_rounds if paper_rounds != rounds else None
            results.append(_curve(run, run_panel, curve, at))
    elapsed = time.perf_counter() - started + run.reused_seconds
    png = run.out / f"{spec.name}.png"
    plot_curves(spec, results, png)
    markdown = figure_markdown(
        spec, results, run.seeds, png, elapsed, rounds_override, reused=len(run.reused)
    )
    atomic_write_text(run.out / f"{spec.name}.md", markdown)
    summary = figure_summary(spec, results, run.seeds, elapsed)
    atomic_write_json(run.out / "summary.json", {**summary, "reused": run.reused})
    return markdown


def runner_for(name: str) -> Callable[[Path, dict[str, Any]], str]:
    """The ``reproduce`` runner of figure ``name`` (a key of ``uldp_figure_specs.FIGURES``)."""
    spec = FIGURES[name]

    def run(out_dir: Path, options: dict[str, Any]) -> str:
        return run_figure(spec, out_dir, options)

    run.__doc__ = f"Run {name}: {spec.title}."
    return run
