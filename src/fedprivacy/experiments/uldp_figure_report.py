"""Results and reports of the ULDP-FL figures: per-curve CSV, summary, Markdown and PNG.

:class:`CurveResult` holds one curve of a figure over its seeds (and writes its per-round
CSV); :func:`figure_markdown` is the report of a figure run by
:func:`fedprivacy.experiments.uldp_figures.run_figure`, which also writes the ``summary.json``
and the PNG made here.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fedprivacy.experiments.uldp_figure_specs import DELTA, SIGMA, Curve, FigureSpec, Panel
from fedprivacy.files import save_figure
from fedprivacy.uldp.results import EPSILON_ADVERSARIES

__all__ = ["CurveResult", "figure_markdown"]


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
        seed after ``R`` rounds (:meth:`fedprivacy.uldp.accounting.UldpAccounting.after`).
    epsilon_server : numpy.ndarray or None
        Each seed's final epsilon against the aggregation server, which knows the user sample
        (:meth:`fedprivacy.uldp.accounting.UldpAccounting.epsilons`); ``None`` when unknown.
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


#: Short names in a figure's tables of the hyper-parameters it reports per curve
#: (:data:`fedprivacy.experiments.uldp_figures.HYPER_FIELDS`).
_HYPER_SHORT: Final = {
    "global_lr": "eta_g",
    "local_lr": "eta_l",
    "clip": "C",
    "local_epochs": "Q",
    "batch_size": "B",
}


def _hyper_text(hyper: dict[str, float | int | None]) -> str:
    """``eta_g 5, eta_l 0.05, C 0.5, Q 5, B 16`` (the ones set)."""
    return ", ".join(f"{_HYPER_SHORT[k]} {v:g}" for k, v in hyper.items() if v is not None)


def figure_summary(
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
        "noise_multiplier": SIGMA,
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


def _panel_table(panel: Panel, rows: list[CurveResult], rounds_override: int | None) -> list[str]:
    """One panel's table: a row a method (final metric, loss, epsilons, seconds, settings)."""
    name = rows[0].metric_name.replace("_", "-")
    paper = f" (paper: {panel.paper})" if panel.paper and rounds_override is None else ""
    at = next((r.epsilon_at[0] for r in rows if r.epsilon_at is not None), None)
    at_head = "" if at is None else f" epsilon after {at} rounds |"
    sampled = any(r.curve.sampling_rate is not None for r in rows)
    at_head += " epsilon against the server |" if sampled else ""
    lines = [
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
    return [*lines, ""]


def figure_markdown(
    spec: FigureSpec,
    results: list[CurveResult],
    seeds: list[int],
    png: Path,
    elapsed: float,
    rounds_override: int | None = None,
    reused: int = 0,
) -> str:
    """The Markdown report: setting, reductions, one table per panel, the paper's claims.

    ``reused`` curves of ``results`` were loaded from earlier runs (``elapsed`` counts their
    recorded seconds).
    """
    lines = [f"## {spec.title}", "", f"Paper's setting: {spec.paper_setting}.", ""]
    rounds_text = (
        f"{rounds_override} rounds (override)"
        if rounds_override is not None
        else ", ".join(sorted({f"{p.rounds} rounds" for p in spec.panels}))
    )
    lines.append(
        f"Ours: sigma {SIGMA:g}, delta {DELTA:g}, seeds {','.join(map(str, seeds))}, "
        f"{rounds_text}; hyper-parameters from `DEFAULT_HYPER` (not the paper's, which are not "
        f"published in the paper; each row gives its own); {elapsed:.0f} s in all"
        + (
            f" ({reused} of {len(results)} curves reused from earlier runs into this folder)."
            if reused
            else "."
        )
    )
    lines += ["", f"User-level epsilon is against {EPSILON_ADVERSARIES['epsilon_released']}."]
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
        if rows:
            lines += _panel_table(panel, rows, rounds_override)
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


def plot_curves(spec: FigureSpec, results: list[CurveResult], path: Path) -> None:
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
        ax_e.set_ylabel(f"user-level epsilon (delta {DELTA:g})")
        ax_e.set_yscale("log")
        for ax in axes[i]:
            ax.set_xlabel("round")
            ax.grid(alpha=0.3)
        if i == 0:
            ax_m.legend(fontsize=6)
    title = f"{spec.title}\nnoise multiplier {SIGMA:g}; epsilon at delta {DELTA:g}, released models"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
