"""The NA-FGD study: Appendix B's Figures B.1-B.7, the main comparison, real data and theory.

Every experiment has a name (for ``fedprivacy reproduce regression-NAME``) and writes
``OUT/NAME/NAME.png`` (MSE against the local sample size ``n`` with standard-error bands),
``results.csv``, ``results.json`` and ``results.md`` (the table next to the paper's finding).
:func:`run_regression_study` runs them all and writes ``OUT/regression_results.{md,csv,json}``.

Settings (Appendix B; Section 3.1 itself is not in the supplement, see
:class:`~fedprivacy.regression.config.RegressionConfig` for our reconstruction): ``p = 200``,
``n`` in {150, 300, 500, 750}, ``delta = 1e-5``, ``B = 100``, ``K = 15`` unless varied,
``epsilon = 0.8`` unless varied, paper calibration.

=====================  =====================================================================
``regression-main``    Gaussian noise, ``epsilon`` in {0.8, 2, 5}, sparse and dense: all six
                       estimators (the comparison behind the paper's Figures 1-2 and its
                       claims about Opacus and NbAFL)
``regression-b1/b2``   ``K`` in {5, 15, 30}, sparse / dense: FGD, NA-FGD, ANA-FGD (and OLS)
``regression-b3/b4``   Laplace noise, ``epsilon`` in {0.8, 2, 5}, sparse / dense
``regression-b5/b6``   ``alpha_t = t^-gamma``, ``gamma`` in {0.2, 0.5, 0.8}, sparse / dense
``regression-b7``      ``n_k ~ N(n, Delta^2)``, ``Delta`` in {sqrt(n), 3 sqrt(n), 5 sqrt(n)},
                       sparse: FGD, NA-FGD, ANA-FGD, DP-SGD, NbAFL
``regression-real``    California Housing and Diabetes (substitutes for the non-public NIO
                       data), ``epsilon`` in {0.8, 2, 5}, Appendix C.2's ``alpha = 0.01``,
                       ``c = 0.25``
``regression-theory``  conditional covariance of Theorems 2-3 against the empirical one
=====================  =====================================================================
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fedprivacy._registry import Registry
from fedprivacy.data.regression_data import NIO_NOTE, load_regression_dataset
from fedprivacy.experiments.regression_study_report import (
    LABELS,
    plot_figure,
    plot_real,
    plot_theory,
    result_row,
    study_findings,
    theory_markdown,
    write_figure,
    write_study_results,
)
from fedprivacy.experiments.regression_study_specs import (
    EPSILONS,
    FIGURES,
    PAPER_B,
    REGRESSION_EXPERIMENTS,
    SIZES,
    FigureSpec,
    label_of_panel,
)
from fedprivacy.regression.config import RegressionConfig
from fedprivacy.regression.simulation import RegressionResult, run_regression_grid
from fedprivacy.regression.theory import theory_check

__all__ = ["RUNNERS", "run_regression_experiment", "run_regression_study"]

ProgressFactory = Callable[[str, int], Callable[[int], None]]
_DataDir = str | os.PathLike[str] | None

#: Runs one experiment: ``(out, replications, progress, sizes, dimension, data_dir) -> summary``.
ExperimentRunner = Callable[
    [Path, int, ProgressFactory | None, Sequence[int] | None, int | None, _DataDir], dict[str, Any]
]


# ---------------------------------------------------------------------------------- runners


def _bar(progress: ProgressFactory | None, name: str, total: int) -> Callable[[int], None] | None:
    return None if progress is None else progress(name, total)


def _figure_rows(
    spec: FigureSpec,
    truths: Sequence[str],
    replications: int,
    progress: ProgressFactory | None,
    sizes: Sequence[int],
    dimension: int | None,
    label: str,
) -> list[dict[str, Any]]:
    """Rows of ``spec`` for ``truths``, all truths on the same data (one grid per n, value)."""
    rows: list[dict[str, Any]] = []
    per = 1 if spec.panel == "epsilon" else len(spec.values)
    bar = _bar(progress, label, len(sizes) * per * replications)
    base = RegressionConfig(
        replications=replications, estimators=spec.estimators, calibration="paper", **spec.base
    )
    if dimension is not None:
        base = base.with_overrides(p=dimension)
    for n in sizes:
        triples: list[tuple[float, str, RegressionResult]] = []
        if spec.panel == "epsilon":
            cfg = base.with_overrides(n=n)
            results = run_regression_grid(cfg, spec.values, truths=truths, progress=bar)
            grid = [(v, t) for t in truths for v in spec.values]
            triples = [(v, t, r) for (v, t), r in zip(grid, results, strict=True)]
        else:
            for value in spec.values:
                cfg = base.with_overrides(n=n, **{spec.panel: value})
                results = run_regression_grid(cfg, (cfg.epsilon,), truths=truths, progress=bar)
                triples += [(value, t, r) for t, r in zip(truths, results, strict=True)]
        for value, truth, res in triples:
            row = result_row(spec.name, spec.panel, value, truth, n, res)
            row["panel_label"] = label_of_panel(spec.panel, value)
            row["seconds"] = round(res.seconds, 2)
            rows.append(row)
    return rows


def _finish_figure(
    spec: FigureSpec, rows: list[dict[str, Any]], out: Path, seconds: float
) -> dict[str, Any]:
    rows = [dict(r, figure=spec.name) for r in rows if r["truth"] in spec.truths]
    rows.sort(key=lambda r: (r["truth"], r["value"], r["n"]))
    png = plot_figure(spec, rows, out / f"{spec.name}.png")
    return write_figure(
        spec.name, spec.title, spec.paper, rows, study_findings(rows), out, [png], seconds
    )


def _run_figure(
    spec: FigureSpec,
    out: Path,
    replications: int,
    progress: ProgressFactory | None,
    sizes: Sequence[int] | None,
    dimension: int | None,
    data_dir: _DataDir = None,  # the simulations use no data
) -> dict[str, Any]:
    started = time.perf_counter()
    n = tuple(sizes or SIZES)
    rows = _figure_rows(spec, spec.truths, replications, progress, n, dimension, spec.name)
    return _finish_figure(spec, rows, out, time.perf_counter() - started)


#: Figures that differ only in the true parameter: computed together on shared data when both
#: are requested (the Gram matrices are read once for both truths).
PAIRS: tuple[tuple[str, str], ...] = (
    ("regression-b1", "regression-b2"),
    ("regression-b3", "regression-b4"),
    ("regression-b5", "regression-b6"),
)


def _run_pair(
    names: tuple[str, str],
    out_dir: Path,
    replications: int,
    progress: ProgressFactory | None,
    sizes: Sequence[int],
    dimension: int | None,
) -> dict[str, dict[str, Any]]:
    started = time.perf_counter()
    first, second = FIGURES[names[0]], FIGURES[names[1]]
    truths = (*first.truths, *second.truths)
    label = f"{names[0]}+{names[1][-2:]}"
    rows = _figure_rows(first, truths, replications, progress, sizes, dimension, label)
    seconds = time.perf_counter() - started
    out: dict[str, dict[str, Any]] = {}
    for spec in (first, second):
        folder = out_dir / spec.name
        folder.mkdir(parents=True, exist_ok=True)
        out[spec.name] = _finish_figure(spec, rows, folder, seconds)
        out[spec.name]["shared_with"] = [n for n in names if n != spec.name][0]
    return out


def _run_real(
    out: Path,
    replications: int,
    progress: ProgressFactory | None,
    sizes: Sequence[int] | None,  # not used: the data sets have their own n and p
    dimension: int | None,
    data_dir: _DataDir = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    bar = _bar(progress, "regression-real", 2 * replications)
    for name, clients in (("california", 5), ("diabetes", 5)):
        silos = load_regression_dataset(name, data_dir, clients=clients)
        cfg = RegressionConfig(
            dataset=name, clients=clients, replications=replications, calibration="paper"
        )
        results = run_regression_grid(cfg, EPSILONS, silos=silos, progress=bar)
        for eps, res in zip(EPSILONS, results, strict=True):
            row = result_row("regression-real", "epsilon", eps, name, int(sum(res.sizes)), res)
            row["panel_label"] = f"{name}, epsilon = {eps:g}"
            row["seconds"] = round(res.seconds, 2)
            rows.append(row)
    png = plot_real(rows, out / "regression-real.png")
    paper = (
        "Appendix C (NIO data, not public): noise levels from Theorem 3 with alpha = 0.01, "
        "c = 0.25; " + NIO_NOTE
    )
    title = REGRESSION_EXPERIMENTS["regression-real"]
    seconds = time.perf_counter() - started
    return write_figure(
        "regression-real", title, paper, rows, study_findings(rows), out, [png], seconds
    )


def _run_theory(
    out: Path,
    replications: int,
    progress: ProgressFactory | None,
    sizes: Sequence[int] | None,
    dimension: int | None,
    data_dir: _DataDir = None,  # simulated data only
) -> dict[str, Any]:
    started = time.perf_counter()
    b = max(50, 5 * replications)
    bar = _bar(progress, "regression-theory", 1)
    n = 300 if not sizes else int(sizes[-1])
    check = theory_check(clients=15, n=n, p=dimension or 200, replications=b, chunk=100)
    if bar is not None:
        bar(1)
    summ = check.summary()
    png = plot_theory(check, b, summ["settings"], out / "regression-theory.png")
    rows = []
    for est in ("na_fgd", "ana_fgd"):
        r = summ[est]
        rows.append({"estimator": est, **r})
    paper = (
        "Theorem 2: cov(theta_T | D) <= alpha c^2 C^2 K T log(1/delta) / (eps^2 N^2) "
        "Sigma^-1 (2I - alpha Sigma)^-1; Theorem 3: cov(theta_bar_T | D) <= 2 alpha c^2 C^2 K "
        "log(1/delta) / (eps^2 N^2) Sigma^-1 (2I - alpha Sigma)^-1"
    )
    checks = [
        f"{LABELS[r['estimator']]}: tr(empirical)/tr(exact) = "
        f"{r['trace_empirical'] / r['trace_exact']:.3f} (z = {r['z_exact']:.2f}); "
        f"tr(empirical)/tr(paper) = {r['ratio_empirical_to_paper']:.3f}"
        for r in rows
    ]
    title = REGRESSION_EXPERIMENTS["regression-theory"]
    seconds = time.perf_counter() - started
    markdown = theory_markdown(rows, check.clip_fraction)
    extra = {"markdown": markdown, "theory": summ, "findings": checks}
    return write_figure("regression-theory", title, paper, [], checks, out, [png], seconds, extra)


#: The runner of every experiment name (:func:`experiment_names`, in that order);
#: ``RUNNERS.register(name, runner)`` makes ``name`` an experiment of
#: :func:`run_regression_experiment`.
RUNNERS: Registry[ExperimentRunner] = Registry(
    "name", "unknown experiment {name!r}; known: {names}"
)
for _spec in FIGURES.values():
    RUNNERS.register(_spec.name, functools.partial(_run_figure, _spec))
RUNNERS.register("regression-real", _run_real)
RUNNERS.register("regression-theory", _run_theory)


def run_regression_experiment(
    name: str,
    out_dir: str | Path,
    *,
    replications: int | None = None,
    progress: ProgressFactory | None = None,
    sizes: Sequence[int] | None = None,
    dimension: int | None = None,
    data_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run one named experiment and write its files under ``out_dir/NAME``.

    Parameters
    ----------
    name : str
        One of :func:`experiment_names` (``regression-main``, ``regression-b1`` ...
        ``regression-b7``, ``regression-real``, ``regression-theory``), or a name added by
        ``RUNNERS.register``.
    out_dir : str or Path
        Output folder (``NAME/`` is created inside).
    replications : int, optional
        ``B`` (the paper's 100 by default; the theory check uses ``5 B`` replications of one
        data set with ``K = 15``, ``n = 300``, ``p = 200``).
    progress : callable, optional
        ``progress(description, total)`` returning ``update(count)`` (the CLI's tqdm
        factory); counts are replications.
    sizes : sequence of int, optional
        Local sample sizes ``n`` (default 150, 300, 500, 750; smaller for quick checks; the
        theory check uses the last). Not used by ``regression-real``.
    dimension : int, optional
        ``p`` (default 200; smaller for quick checks). Not used by ``regression-real``.
    data_dir : str or os.PathLike, optional
        Data folder of ``regression-real`` (default ``$FEDPRIVACY_DATA``); the simulations
        use no data.

    Returns
    -------
    dict
        Summary: rows, findings, files written, seconds.

    Raises
    ------
    ParameterError
        If ``name`` is not a name of :data:`RUNNERS` (the message lists them).
    """
    run = RUNNERS.lookup(name)
    b = PAPER_B if replications is None else int(replications)
    out = Path(out_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    return run(out, b, progress, sizes, dimension, data_dir)


def _run_job(
    job: tuple[str, ...],
    out_dir: Path,
    replications: int | None,
    progress: ProgressFactory | None,
    sizes: Sequence[int] | None,
    dimension: int | None,
) -> dict[str, Any]:
    """Run one experiment or one pair; return ``{name: summary}`` and the job's timing."""
    t0, c0 = time.perf_counter(), time.process_time()
    if len(job) == 2:
        b = PAPER_B if replications is None else int(replications)
        result = _run_pair((job[0], job[1]), out_dir, b, progress, tuple(sizes or SIZES), dimension)
    else:
        result = {
            job[0]: run_regression_experiment(
                job[0],
                out_dir,
                replications=replications,
                progress=progress,
                sizes=sizes,
                dimension=dimension,
            )
        }
    return {
        "results": result,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
    }


def _jobs(names: Sequence[str]) -> list[tuple[str, ...]]:
    jobs: list[tuple[str, ...]] = []
    done: set[str] = set()
    for name in names:
        if name in done:
            continue
        pair = next((p for p in PAIRS if name in p and all(n in names for n in p)), None)
        job = pair if pair is not None else (name,)
        jobs.append(job)
        done.update(job)
    return jobs


def run_regression_study(
    out_dir: str | Path,
    *,
    replications: int | None = None,
    progress: ProgressFactory | None = None,
    names: Sequence[str] | None = None,
    sizes: Sequence[int] | None = None,
    dimension: int | None = None,
    log: Callable[[str], None] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Run every experiment (or ``names``) and write the combined results table.

    The sparse/dense pairs of Figs. B.1-B.6 are computed together on shared data. With
    ``workers > 1`` the jobs run in that many processes (use one BLAS thread per process,
    e.g. ``OPENBLAS_NUM_THREADS=1``; progress bars are off then). Writes
    ``out_dir/regression_results.md``, ``.csv`` and ``.json`` next to each experiment's folder.

    Returns
    -------
    dict
        ``experiments`` (name -> summary), ``seconds`` / ``cpu_seconds`` (wall time and CPU time
        of this process and its workers), ``timing`` per job, ``files``.
    """
    started = time.perf_counter()
    cpu0 = time.process_time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    wanted = list(names or RUNNERS)
    for name in wanted:
        RUNNERS.lookup(name, parameter="names")
    jobs = _jobs(wanted)
    results: dict[str, Any] = {}
    timing: dict[str, dict[str, float]] = {}

    def record(job: tuple[str, ...], done: dict[str, Any]) -> None:
        results.update(done["results"])
        key = "+".join(job)
        timing[key] = {"wall_seconds": done["wall_seconds"], "cpu_seconds": done["cpu_seconds"]}
        if log is not None:
            log(f"{key}: {done['wall_seconds']} s wall, {done['cpu_seconds']} s CPU")

    run = functools.partial(
        _run_job, out_dir=out, replications=replications, sizes=sizes, dimension=dimension
    )
    if workers <= 1:
        for job in jobs:
            record(job, run(job, progress=progress))
    else:
        _run_in_processes(jobs, workers, functools.partial(run, progress=None), record)
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    if workers > 1:
        cpu += sum(t["cpu_seconds"] for t in timing.values())
    files = write_study_results(out, wanted, results, timing, seconds, cpu, workers)
    return {
        "experiments": {k: results[k] for k in wanted},
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "timing": timing,
        "files": [str(f) for f in files],
    }


def _run_in_processes(
    jobs: list[tuple[str, ...]],
    workers: int,
    run: Callable[[tuple[str, ...]], dict[str, Any]],
    record: Callable[[tuple[str, ...], dict[str, Any]], None],
) -> None:
    """``run`` each job in one of ``workers`` forked processes; ``record`` each result."""
    import concurrent.futures as cf
    import multiprocessing as mp

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(run, job): job for job in jobs}
        for fut in cf.as_completed(futures):
            record(futures[fut], fut.result())
