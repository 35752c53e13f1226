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

import csv
import io
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedprivacy.data.regression_data import NIO_NOTE, load_regression_dataset  # noqa: E402
from fedprivacy.errors import ParameterError  # noqa: E402
from fedprivacy.files import atomic_write_bytes, atomic_write_json, atomic_write_text  # noqa: E402
from fedprivacy.regression.config import ESTIMATORS, RegressionConfig  # noqa: E402
from fedprivacy.regression.simulation import RegressionResult, run_regression_grid  # noqa: E402
from fedprivacy.regression.theory import theory_check  # noqa: E402

__all__ = [
    "REGRESSION_EXPERIMENTS",
    "experiment_names",
    "run_regression_experiment",
    "run_regression_study",
]

ProgressFactory = Callable[[str, int], Callable[[int], None]]

SIZES = (150, 300, 500, 750)
EPSILONS = (0.8, 2.0, 5.0)
PAPER_B = 100
LABELS = {
    "ols": "OLS",
    "fgd": "FGD",
    "na_fgd": "NA-FGD",
    "ana_fgd": "ANA-FGD",
    "dp_sgd": "DP-SGD (Opacus-style)",
    "nbafl": "NbAFL",
}
COLORS = {
    "ols": "black",
    "fgd": "tab:gray",
    "na_fgd": "tab:blue",
    "ana_fgd": "tab:red",
    "dp_sgd": "tab:green",
    "nbafl": "tab:purple",
}
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


def _panel_label(panel: str, value: float) -> str:
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
    """Names accepted by :func:`run_regression_experiment`."""
    return list(REGRESSION_EXPERIMENTS)


# ---------------------------------------------------------------------------------- tables


def _row(
    figure: str, panel: str, value: float | str, truth: str, n: int, res: RegressionResult
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "figure": figure,
        "panel": panel,
        "value": value,
        "truth": truth,
        "n": n,
        "iterations": res.steps,
        "total_samples": int(sum(res.sizes)),
        "epsilon": res.config.epsilon,
        "calibration": res.config.calibration,
        "mechanism": res.config.mechanism,
    }
    for name in ESTIMATORS:
        if name in res.errors:
            row[f"mse_{name}"] = res.mse[name]
            row[f"se_{name}"] = res.se[name]
    for name, eps in res.epsilon_accountant.items():
        row[f"eps_acc_{name}"] = eps
    for name, frac in res.clip_fraction.items():
        row[f"clip_{name}"] = frac
    return row


def _csv(rows: Sequence[Mapping[str, Any]]) -> str:
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: r.get(k, "") for k in keys})
    return buf.getvalue()


def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def _markdown(title: str, paper: str, rows: Sequence[Mapping[str, Any]], checks: list[str]) -> str:
    present = [e for e in ESTIMATORS if any(f"mse_{e}" in r for r in rows)]
    noisy = [e for e in ("na_fgd", "dp_sgd", "nbafl") if any(f"eps_acc_{e}" in r for r in rows)]
    head = ["setting", "truth", "n", "T", *[LABELS[e] for e in present]]
    head += [f"eps acc. {LABELS[e]}" for e in noisy]
    lines = [f"## {title}", "", f"Paper: {paper}", ""]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for r in rows:
        cells = [str(r["panel_label"]), str(r["truth"]), str(r["n"]), str(r["iterations"])]
        for e in present:
            key = f"mse_{e}"
            cells.append(f"{_num(r[key])} ± {_num(r[f'se_{e}'])}" if key in r else "")
        cells += [_num(r[f"eps_acc_{e}"]) if f"eps_acc_{e}" in r else "" for e in noisy]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "MSE = mean over replications of ||theta_hat - theta||^2, ± standard error; "
        "eps acc. = RDP accountant's epsilon (delta = 1e-5) for the noise used."
    )
    if checks:
        lines += ["", "Measured:", *[f"- {c}" for c in checks]]
    return "\n".join(lines) + "\n"


def _findings(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []

    def frac(cond: Callable[[Mapping[str, Any]], bool], need: Sequence[str]) -> str | None:
        cells = [r for r in rows if all(f"mse_{k}" in r for k in need)]
        if not cells:
            return None
        hits = sum(1 for r in cells if cond(r))
        return f"{hits}/{len(cells)}"

    f = frac(lambda r: r["mse_ana_fgd"] < r["mse_na_fgd"], ("ana_fgd", "na_fgd"))
    if f:
        out.append(f"ANA-FGD < NA-FGD in {f} settings")
    for base in ("dp_sgd", "nbafl"):

        def beats(r: Mapping[str, Any], b: str = base) -> bool:
            return bool(r["mse_ana_fgd"] < r[f"mse_{b}"])

        f = frac(beats, ("ana_fgd", base))
        if f:
            out.append(f"ANA-FGD < {LABELS[base]} in {f} settings")
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        if "mse_ana_fgd" in r and r.get("mse_ols", 0.0) > 0:
            groups.setdefault((str(r["panel_label"]), str(r["truth"])), []).append(r)
    parts = []
    for (label, truth), grp in groups.items():
        grp = sorted(grp, key=lambda r: r["n"])
        lo, hi = grp[0], grp[-1]
        parts.append(
            f"{label} ({truth}): {lo['mse_ana_fgd'] / lo['mse_ols']:.3g} at n={lo['n']} -> "
            f"{hi['mse_ana_fgd'] / hi['mse_ols']:.3g} at n={hi['n']}"
        )
    if parts:
        out.append("MSE(ANA-FGD) / MSE(OLS): " + "; ".join(parts))
    out.extend(_trends(rows))
    return out


def _trends(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """How each estimator's MSE moves along the panel variable, at fixed truth and n."""
    out: list[str] = []
    panels = {str(r["panel"]) for r in rows}
    if len(panels) != 1:
        return out
    panel = panels.pop()
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((str(r["truth"]), int(r["n"])), []).append(r)
    for e in ESTIMATORS:
        if e in ("ols", "fgd") and panel != "clients":
            continue
        down = up = total = 0
        for grp in groups.values():
            cells = sorted((r for r in grp if f"mse_{e}" in r), key=lambda r: float(r["value"]))
            if len(cells) < 2:
                continue
            m = [float(r[f"mse_{e}"]) for r in cells]
            total += 1
            down += all(b < a for a, b in zip(m, m[1:], strict=False))
            up += all(b > a for a, b in zip(m, m[1:], strict=False))
        if total:
            out.append(
                f"{LABELS[e]} MSE as {panel} increases: decreasing in {down}/{total}, "
                f"increasing in {up}/{total} (truth, n) groups"
            )
    return out


# ---------------------------------------------------------------------------------- plots


def _save(fig: Any, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


def _plot_figure(spec: FigureSpec, rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    nrow, ncol = len(spec.truths), len(spec.values)
    fig, axes = plt.subplots(
        nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False, constrained_layout=True
    )
    for i, truth in enumerate(spec.truths):
        for j, value in enumerate(spec.values):
            ax = axes[i][j]
            cell = sorted(
                (r for r in rows if r["truth"] == truth and r["value"] == value),
                key=lambda r: r["n"],
            )
            ns = np.array([r["n"] for r in cell])
            for e in spec.estimators:
                if not cell or f"mse_{e}" not in cell[0]:
                    continue
                m = np.array([r[f"mse_{e}"] for r in cell])
                s = np.array([r[f"se_{e}"] for r in cell])
                style = {"ols": ":", "fgd": "--"}.get(e, "-")
                ax.plot(ns, m, style, marker="o", ms=3, color=COLORS[e], label=LABELS[e])
                ax.fill_between(ns, np.maximum(m - s, m * 1e-3), m + s, color=COLORS[e],
                                alpha=0.2, linewidth=0)  # fmt: skip
            ax.set_yscale("log")
            ax.set_xticks(ns)
            ax.set_title(f"{_panel_label(spec.panel, value)} ({truth})", fontsize=9)
            if i == nrow - 1:
                ax.set_xlabel("local sample size n")
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel("MSE")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(spec.title, fontsize=10)
    return _save(fig, path)


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
    base = RegressionConfig(replications=replications, estimators=spec.estimators, **spec.base)
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
            row = _row(spec.name, spec.panel, value, truth, n, res)
            row["panel_label"] = _panel_label(spec.panel, value)
            row["seconds"] = round(res.seconds, 2)
            rows.append(row)
    return rows


def _finish_figure(
    spec: FigureSpec, rows: list[dict[str, Any]], out: Path, seconds: float
) -> dict[str, Any]:
    rows = [dict(r, figure=spec.name) for r in rows if r["truth"] in spec.truths]
    rows.sort(key=lambda r: (r["truth"], r["value"], r["n"]))
    png = _plot_figure(spec, rows, out / f"{spec.name}.png")
    return _write(spec.name, spec.title, spec.paper, rows, _findings(rows), out, [png], seconds)


def _run_figure(
    spec: FigureSpec,
    out: Path,
    replications: int,
    progress: ProgressFactory | None,
    sizes: Sequence[int],
    dimension: int | None,
) -> dict[str, Any]:
    started = time.perf_counter()
    rows = _figure_rows(spec, spec.truths, replications, progress, sizes, dimension, spec.name)
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


def _write(
    name: str,
    title: str,
    paper: str,
    rows: list[dict[str, Any]],
    checks: list[str],
    out: Path,
    pngs: list[Path],
    seconds: float,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    md = _markdown(title, paper, rows, checks) if rows else f"## {title}\n\nPaper: {paper}\n"
    if extra and "markdown" in extra:
        md += "\n" + str(extra["markdown"])
    atomic_write_text(out / "results.md", md)
    atomic_write_text(out / "results.csv", _csv(rows))
    summary: dict[str, Any] = {
        "name": name,
        "title": title,
        "paper": paper,
        "findings": checks,
        "rows": rows,
        "figures": [str(p) for p in pngs],
        "files": [str(p) for p in (*pngs, out / "results.md", out / "results.csv")],
        "seconds": round(seconds, 1),
    }
    if extra:
        summary.update({k: v for k, v in extra.items() if k != "markdown"})
    atomic_write_json(out / "results.json", summary)
    summary["files"].append(str(out / "results.json"))
    return summary


def _run_real(
    out: Path,
    replications: int,
    progress: ProgressFactory | None,
    data_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    bar = _bar(progress, "regression-real", 2 * replications)
    for name, clients in (("california", 5), ("diabetes", 5)):
        silos = load_regression_dataset(name, data_dir, clients=clients)
        cfg = RegressionConfig(dataset=name, clients=clients, replications=replications)
        for eps, res in zip(EPSILONS, run_regression_grid(cfg, EPSILONS, silos=silos, progress=bar),
                            strict=True):  # fmt: skip
            row = _row("regression-real", "epsilon", eps, name, int(sum(res.sizes)), res)
            row["panel_label"] = f"{name}, epsilon = {eps:g}"
            row["seconds"] = round(res.seconds, 2)
            rows.append(row)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
    for ax, name in zip(axes, ("california", "diabetes"), strict=True):
        sub = [r for r in rows if r["truth"] == name]
        est = [e for e in ESTIMATORS if e != "ols"]
        width = 0.8 / len(est)
        for i, e in enumerate(est):
            m = np.array([r[f"mse_{e}"] for r in sub])
            s = np.array([r[f"se_{e}"] for r in sub])
            ax.bar(np.arange(len(sub)) + i * width, m, width, yerr=s, color=COLORS[e],
                   label=LABELS[e])  # fmt: skip
        ax.set_xticks(np.arange(len(sub)) + 0.4 - width / 2)
        ax.set_xticklabels([f"eps={r['epsilon']:g}" for r in sub])
        ax.set_yscale("log")
        ax.set_title(f"{name}: ||theta_hat - theta_OLS||^2", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    fig.suptitle("Real data substituting NIO (not public); alpha = 0.01, c = 0.25", fontsize=10)
    png = _save(fig, out / "regression-real.png")
    paper = (
        "Appendix C (NIO data, not public): noise levels from Theorem 3 with alpha = 0.01, "
        "c = 0.25; " + NIO_NOTE
    )
    return _write(
        "regression-real", REGRESSION_EXPERIMENTS["regression-real"], paper, rows,
        _findings(rows), out, [png], time.perf_counter() - started,
    )  # fmt: skip


def _run_theory(
    out: Path,
    replications: int,
    progress: ProgressFactory | None,
    sizes: Sequence[int] | None,
    dimension: int | None,
) -> dict[str, Any]:
    started = time.perf_counter()
    b = max(50, 5 * replications)
    bar = _bar(progress, "regression-theory", 1)
    n = 300 if not sizes else int(sizes[-1])
    check = theory_check(clients=15, n=n, p=dimension or 200, replications=b, chunk=100)
    if bar is not None:
        bar(1)
    summ = check.summary()
    lam = check.closed.eigenvalues
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for ax, key, emp, title in (
        (axes[0], "na", check.na_empirical, "NA-FGD (Theorem 2)"),
        (axes[1], "ana", check.ana_empirical, "ANA-FGD (Theorem 3)"),
    ):
        ax.plot(lam, emp, "o", ms=2.5, color="tab:blue", label=f"empirical (B = {b})")
        ax.plot(lam, getattr(check.closed, f"{key}_exact"), "-", color="black",
                label="exact closed form")  # fmt: skip
        ax.plot(lam, getattr(check.closed, f"{key}_paper"), "--", color="tab:red",
                label="paper's expression")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("eigenvalue of Sigma_hat")
        ax.set_ylabel("variance along the eigenvector")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    s = summ["settings"]
    fig.suptitle(
        f"Conditional covariance given D: K={s['clients']}, n={s['n']}, p={s['p']}, "
        f"eps={s['epsilon']:g}, alpha={s['lr']:g}, T={s['iterations']}",
        fontsize=10,
    )
    png = _save(fig, out / "regression-theory.png")
    rows = []
    for est in ("na_fgd", "ana_fgd"):
        r = summ[est]
        rows.append({"estimator": est, **r})
    md = [
        "| estimator | tr(empirical) | tr(exact) | tr(paper) | MC s.e. | z (emp vs exact) | "
        "emp / paper | rel. Frobenius error vs exact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {LABELS[r['estimator']]} | {_num(r['trace_empirical'])} | {_num(r['trace_exact'])}"
            f" | {_num(r['trace_paper'])} | {_num(r['trace_se'])} | {r['z_exact']:.2f} | "
            f"{r['ratio_empirical_to_paper']:.3g} | {r['frobenius_rel_error_exact']:.3g} |"
        )
    md.append("")
    md.append(
        f"Clipped client-iterations: {check.clip_fraction:.2e}. The paper's ANA-FGD expression "
        "(Appendix A.3) drops the factor (I - Delta^2)^-1 in cov(theta_t, theta_s | D): along an "
        "eigenvector the exact covariance is (2 - alpha lambda) / (2 alpha lambda) times the "
        "paper's, so the paper's expression is not an upper bound where alpha lambda < 2/3; the "
        "exact closed form matches the simulation."
    )
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
    return _write(
        "regression-theory", REGRESSION_EXPERIMENTS["regression-theory"], paper, [], checks,
        out, [png], time.perf_counter() - started,
        {"markdown": "\n".join(md) + "\n", "theory": summ, "findings": checks},
    )  # fmt: skip


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
        ``regression-b7``, ``regression-real``, ``regression-theory``).
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
        If ``name`` is unknown.
    """
    if name not in REGRESSION_EXPERIMENTS:
        raise ParameterError(
            "name", f"unknown experiment {name!r}; known: {', '.join(experiment_names())}"
        )
    b = PAPER_B if replications is None else int(replications)
    out = Path(out_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    if name == "regression-real":
        return _run_real(out, b, progress, data_dir)
    if name == "regression-theory":
        return _run_theory(out, b, progress, sizes, dimension)
    spec = FIGURES[name]
    return _run_figure(spec, out, b, progress, tuple(sizes or SIZES), dimension)


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
                job[0], out_dir, replications=replications, progress=progress, sizes=sizes,
                dimension=dimension,
            )
        }  # fmt: skip
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
    wanted = list(names or experiment_names())
    for name in wanted:
        if name not in REGRESSION_EXPERIMENTS:
            raise ParameterError("names", f"unknown experiment {name!r}")
    jobs = _jobs(wanted)
    results: dict[str, Any] = {}
    timing: dict[str, dict[str, float]] = {}

    def record(job: tuple[str, ...], done: dict[str, Any]) -> None:
        results.update(done["results"])
        key = "+".join(job)
        timing[key] = {"wall_seconds": done["wall_seconds"], "cpu_seconds": done["cpu_seconds"]}
        if log is not None:
            log(f"{key}: {done['wall_seconds']} s wall, {done['cpu_seconds']} s CPU")

    if workers <= 1:
        for job in jobs:
            record(job, _run_job(job, out, replications, progress, sizes, dimension))
    else:
        import concurrent.futures as cf
        import multiprocessing as mp

        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {
                pool.submit(_run_job, job, out, replications, None, sizes, dimension): job
                for job in jobs
            }
            for fut in cf.as_completed(futures):
                record(futures[fut], fut.result())
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    if workers > 1:
        cpu += sum(t["cpu_seconds"] for t in timing.values())
    md = ["# NA-FGD study: measured results", ""]
    md.append(
        f"Total run time {seconds:.0f} s wall, {cpu:.0f} s CPU, {workers} worker process(es)."
    )
    md.append("")
    rows: list[dict[str, Any]] = []
    for name in wanted:
        summary = results[name]
        text = (out / name / "results.md").read_text()
        md.append(text.replace("## ", f"## {name}: ", 1))
        key = next(k for k in timing if name in k.split("+"))
        md.append(
            f"Run time ({key}) {timing[key]['wall_seconds']:.0f} s wall, "
            f"{timing[key]['cpu_seconds']:.0f} s CPU; figure: {name}/{name}.png"
        )
        md.append("")
        rows.extend(summary.get("rows", []))
    files = [out / "regression_results.md", out / "regression_results.csv"]
    atomic_write_text(files[0], "\n".join(md) + "\n")
    atomic_write_text(files[1], _csv(rows))
    index = {
        "experiments": {
            k: {kk: vv for kk, vv in results[k].items() if kk != "rows"} for k in wanted
        },
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "workers": workers,
        "timing": timing,
    }
    atomic_write_json(out / "regression_results.json", index)
    files.append(out / "regression_results.json")
    return {
        "experiments": {k: results[k] for k in wanted},
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "timing": timing,
        "files": [str(f) for f in files],
    }


def _main() -> None:  # pragma: no cover - manual entry point
    import argparse

    parser = argparse.ArgumentParser(description="Run the NA-FGD regression study.")
    parser.add_argument("out", nargs="?", default="results/regression")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--replications", type=int, default=None)
    args = parser.parse_args()
    res = run_regression_study(
        args.out, names=args.names or None, workers=args.workers,
        replications=args.replications, log=lambda s: print(s, flush=True),
    )  # fmt: skip
    print(f"done in {res['seconds']} s wall, {res['cpu_seconds']} s CPU: {', '.join(res['files'])}")


if __name__ == "__main__":  # pragma: no cover
    _main()
