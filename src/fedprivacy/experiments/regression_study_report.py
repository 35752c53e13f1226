"""Reports of the NA-FGD study: result rows, CSV, Markdown, measured findings and plots.

Used by :mod:`fedprivacy.experiments.regression_study`, which runs the experiments: each one's
``results.csv``, ``results.md`` and ``results.json`` are written by :func:`write_figure`, its PNG by
the ``_plot_*`` functions.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedprivacy.experiments.regression_study_specs import FigureSpec, label_of_panel  # noqa: E402
from fedprivacy.files import atomic_write_json, atomic_write_text, save_figure  # noqa: E402
from fedprivacy.regression.config import (
    ESTIMATORS,  # noqa: E402
    RegressionConfig,
)
from fedprivacy.regression.simulation import RegressionResult  # noqa: E402
from fedprivacy.regression.theory import TheoryCheck  # noqa: E402

__all__ = ["COLORS", "LABELS"]

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


# ---------------------------------------------------------------------------------- tables


def result_row(
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


def study_findings(rows: Sequence[Mapping[str, Any]]) -> list[str]:
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


def theory_markdown(rows: Sequence[Mapping[str, Any]], clip_fraction: float) -> str:
    """``regression-theory``'s table of traces (``rows``: one per estimator) and its caveat."""
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
        f"Clipped client-iterations: {clip_fraction:.2e}. The paper's ANA-FGD expression "
        "(Appendix A.3) drops the factor (I - Delta^2)^-1 in cov(theta_t, theta_s | D): along an "
        "eigenvector the exact covariance is (2 - alpha lambda) / (2 alpha lambda) times the "
        "paper's, so the paper's expression is not an upper bound where alpha lambda < 2/3; the "
        "exact closed form matches the simulation."
    )
    return "\n".join(md) + "\n"


def plot_figure(spec: FigureSpec, rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
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
                lower = np.maximum(m - s, m * 1e-3)
                ax.fill_between(ns, lower, m + s, color=COLORS[e], alpha=0.2, linewidth=0)
            ax.set_yscale("log")
            ax.set_xticks(ns)
            ax.set_title(f"{label_of_panel(spec.panel, value)} ({truth})", fontsize=9)
            if i == nrow - 1:
                ax.set_xlabel("local sample size n")
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel("MSE")
    axes[0][0].legend(fontsize=7)
    delta = RegressionConfig().delta  # the study's delta: the configuration's default
    fig.suptitle(
        f"{spec.title}\ndelta {delta:g}; the paper's noise calibration (its epsilon per "
        "estimator in the table)",
        fontsize=10,
    )
    return save_figure(fig, path, tight=True)


def plot_real(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Bars of ``regression-real``: each estimator's error per data set and epsilon."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
    for ax, name in zip(axes, ("california", "diabetes"), strict=True):
        sub = [r for r in rows if r["truth"] == name]
        est = [e for e in ESTIMATORS if e != "ols"]
        width = 0.8 / len(est)
        for i, e in enumerate(est):
            m = np.array([r[f"mse_{e}"] for r in sub])
            s = np.array([r[f"se_{e}"] for r in sub])
            positions = np.arange(len(sub)) + i * width
            ax.bar(positions, m, width, yerr=s, color=COLORS[e], label=LABELS[e])
        ax.set_xticks(np.arange(len(sub)) + 0.4 - width / 2)
        ax.set_xticklabels([f"eps={r['epsilon']:g}" for r in sub])
        ax.set_yscale("log")
        ax.set_title(f"{name}: ||theta_hat - theta_OLS||^2", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    fig.suptitle("Real data substituting NIO (not public); alpha = 0.01, c = 0.25", fontsize=10)
    return save_figure(fig, path, tight=True)


def plot_theory(check: TheoryCheck, b: int, s: Mapping[str, Any], path: Path) -> Path:
    """``regression-theory``: variance along each eigenvector, empirical against closed forms.

    ``b`` is the number of replications and ``s`` the ``settings`` of ``check.summary()``.
    """
    lam = check.closed.eigenvalues
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for ax, key, emp, title in (
        (axes[0], "na", check.na_empirical, "NA-FGD (Theorem 2)"),
        (axes[1], "ana", check.ana_empirical, "ANA-FGD (Theorem 3)"),
    ):
        ax.plot(lam, emp, "o", ms=2.5, color="tab:blue", label=f"empirical (B = {b})")
        exact = getattr(check.closed, f"{key}_exact")
        paper = getattr(check.closed, f"{key}_paper")
        ax.plot(lam, exact, "-", color="black", label="exact closed form")
        ax.plot(lam, paper, "--", color="tab:red", label="paper's expression")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("eigenvalue of Sigma_hat")
        ax.set_ylabel("variance along the eigenvector")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"Conditional covariance given D: K={s['clients']}, n={s['n']}, p={s['p']}, "
        f"eps={s['epsilon']:g}, alpha={s['lr']:g}, T={s['iterations']}",
        fontsize=10,
    )
    return save_figure(fig, path, tight=True)


# ---------------------------------------------------------------------------------- files


def write_figure(
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


def write_study_results(
    out: Path,
    names: Sequence[str],
    results: Mapping[str, Any],
    timing: Mapping[str, Mapping[str, float]],
    seconds: float,
    cpu: float,
    workers: int,
) -> list[Path]:
    """``regression_results.md`` (every experiment's table), ``.csv`` and ``.json`` in ``out``."""
    md = ["# NA-FGD study: measured results", ""]
    md.append(
        f"Total run time {seconds:.0f} s wall, {cpu:.0f} s CPU, {workers} worker process(es)."
    )
    md.append("")
    rows: list[dict[str, Any]] = []
    for name in names:
        text = (out / name / "results.md").read_text()
        md.append(text.replace("## ", f"## {name}: ", 1))
        key = next(k for k in timing if name in k.split("+"))
        md.append(
            f"Run time ({key}) {timing[key]['wall_seconds']:.0f} s wall, "
            f"{timing[key]['cpu_seconds']:.0f} s CPU; figure: {name}/{name}.png"
        )
        md.append("")
        rows.extend(results[name].get("rows", []))
    files = [out / "regression_results.md", out / "regression_results.csv"]
    atomic_write_text(files[0], "\n".join(md) + "\n")
    atomic_write_text(files[1], _csv(rows))
    index = {
        "experiments": {
            k: {kk: vv for kk, vv in results[k].items() if kk != "rows"} for k in names
        },
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "workers": workers,
        "timing": timing,
    }
    atomic_write_json(out / "regression_results.json", index)
    return [*files, out / "regression_results.json"]
