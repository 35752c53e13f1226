"""Figures: the metrics of a selection run and the paper's Fig. 3 and Fig. 4."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from fedprivacy.experiments.selection_run import SelectionResult  # noqa: E402
from fedprivacy.files import save_figure  # noqa: E402

#: One style per curve, so that curves which coincide stay visible: later curves are drawn
#: thinner, dashed and on top of the earlier ones, with sparse markers.
STYLES: tuple[dict[str, object], ...] = (
    {"linestyle": "-", "marker": "o", "linewidth": 3.2},
    {"linestyle": "--", "marker": "s", "linewidth": 2.6},
    {"linestyle": "-.", "marker": "^", "linewidth": 2.2},
    {"linestyle": ":", "marker": "D", "linewidth": 2.0},
    {"linestyle": "-", "marker": "v", "linewidth": 1.6},
    {"linestyle": "--", "marker": "P", "linewidth": 1.2},
)


def style(index: int) -> dict[str, object]:
    """The line style of the ``index``-th curve of a figure (cycled; later ones on top).

    Examples
    --------
    >>> style(0)["linestyle"], style(1)["linestyle"], style(6)["marker"]
    ('-', '--', 'o')
    """
    return {**STYLES[index % len(STYLES)], "zorder": 2 + index, "alpha": 0.9}


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` values (fewer at the start), same length as ``values``.

    Examples
    --------
    >>> rolling_mean(np.array([1.0, 3.0, 5.0, 7.0]), 2).tolist()
    [1.0, 2.0, 4.0, 6.0]
    """
    x = np.asarray(values, dtype=np.float64)
    csum = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(1, x.size + 1)
    start = np.maximum(0, idx - max(1, int(window)))
    return np.asarray((csum[idx] - csum[start]) / (idx - start), dtype=np.float64)


def _log_scale_if_positive(ax: Axes, axis: str) -> None:
    """Log scale only when the axis has positive data (else matplotlib warns and draws nothing)."""
    data = [ln.get_ydata() if axis == "y" else ln.get_xdata() for ln in ax.get_lines()]
    if any(np.any(np.asarray(d, dtype=np.float64) > 0) for d in data):
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")


#: Legends with more entries than this go to the right of the axes, clear of the curves.
MAX_INNER_LEGEND = 7


def _legend(ax: Axes) -> None:
    """The legend: inside the axes, or to their right when it has many entries."""
    entries = len(ax.get_legend_handles_labels()[1])
    if entries > MAX_INNER_LEGEND:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    else:
        ax.legend(fontsize=8)


def _t_weak_axes(ax: Axes, results: Sequence[SelectionResult]) -> None:
    for i, res in enumerate(results):
        if res.t_weak is None:
            continue
        rounds = np.arange(1, res.ledger.rounds + 1)
        (line,) = ax.step(
            rounds,
            res.t_weak.upper,
            where="post",
            label=res.config.label,
            markevery=_marks(rounds.size, i),
            **style(i),  # type: ignore[arg-type]
        )
        gap = res.t_weak.lower < res.t_weak.upper
        if np.any(gap):
            ax.fill_between(
                rounds,
                res.t_weak.lower,
                res.t_weak.upper,
                step="post",
                color=line.get_color(),
                alpha=0.15,
                linewidth=0,
            )
    if max((res.ledger.rounds for res in results), default=0) > 1:
        ax.set_xscale("log")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round")
    ax.set_ylabel(r"$T_{weak}$ (line: attained; band: certified interval)")
    ax.set_title("(a) multi-round privacy guarantee")
    ax.grid(alpha=0.3)


def _marks(n: int, index: int = 0) -> tuple[int, int]:
    """Sparse markers, staggered per curve so coinciding curves show each marker."""
    step = max(1, n // 8)
    return (index * step // len(STYLES)) % step, step


def _curve_axes(
    ax: Axes,
    results: Sequence[SelectionResult],
    attr: str,
    title: str,
    ylabel: str,
    smooth: bool = False,
) -> None:
    """One line per result; ``smooth``: the raw line faint and its rolling mean on top."""
    for i, res in enumerate(results):
        rounds = np.arange(1, res.ledger.rounds + 1)
        values = np.asarray(getattr(res, attr), dtype=np.float64)
        if smooth:
            (raw,) = ax.plot(rounds, values, linewidth=0.6, alpha=0.25, zorder=1)
            window = max(1, rounds.size // 20)
            ax.plot(
                rounds,
                rolling_mean(values, window),
                color=raw.get_color(),
                label=f"{res.config.label} (mean of {window} rounds)" if window > 1 else None,
                markevery=_marks(rounds.size, i),
                **style(i),  # type: ignore[arg-type]
            )
            if window == 1:
                ax.lines[-1].set_label(res.config.label)
        else:
            ax.plot(
                rounds,
                values,
                label=res.config.label,
                markevery=_marks(rounds.size, i),
                **style(i),  # type: ignore[arg-type]
            )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)


def plot_run(result: SelectionResult, out: Path) -> list[Path]:
    """Three panels (T_weak, F, C) for one run, as ``metrics.png``."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    _t_weak_axes(axes[0], [result])
    _curve_axes(axes[1], [result], "fairness_gap", "(b) aggregation fairness gap", "$F^{(t)}$")
    _curve_axes(
        axes[2], [result], "cardinality", "(c) average aggregation cardinality", "$C^{(t)}$"
    )
    _log_scale_if_positive(axes[1], "y")
    fig.suptitle(result.config.label)
    return [save_figure(fig, out / "metrics.png", dpi=130, tight=True)]


def plot_fig3(results: Sequence[SelectionResult], out: Path) -> list[Path]:
    """The paper's Fig. 3 (a, b, c) as three PNG files."""
    paths = []
    for name in ("fig3a_t_weak.png", "fig3b_fairness_gap.png", "fig3c_cardinality.png"):
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        if name.startswith("fig3a"):
            _t_weak_axes(ax, results)
        elif name.startswith("fig3b"):
            _curve_axes(
                ax,
                results,
                "fairness_gap",
                "(b) aggregation fairness gap",
                "$F^{(t)}$",
                smooth=True,
            )
            _log_scale_if_positive(ax, "y")
        else:
            _curve_axes(
                ax, results, "cardinality", "(c) average aggregation cardinality", "$C^{(t)}$"
            )
        _legend(ax)
        paths.append(save_figure(fig, out / name, dpi=130, tight=True))
    return paths


def plot_fig4(
    points: Sequence[tuple[str, float, float, float]],
    theory: Sequence[tuple[int, float]],
    out: Path,
) -> Path:
    """Fig. 4: final T_weak (interval) against average cardinality, with the exact C(T) curve.

    Parameters
    ----------
    points : sequence of (label, t_lower, t_upper, cardinality)
        One point per simulated scheme.
    theory : sequence of (T, C)
        Exact average cardinality of batch partitioning for each T under the same dropout.
    """
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ts, cs = zip(*theory, strict=True) if theory else ((), ())
    ax.plot(ts, cs, "k--", marker="o", mfc="none", label="batch partitioning, exact C(T)")
    markers = ("s", "o", "^", "D", "v", "P", "X", "*")
    for i, (label, lo, hi, c) in enumerate(points):
        # points that coincide stay visible: hollow, distinct markers nested inside each other
        # (later ones smaller and on top), so every ring shows
        ax.errorbar(
            [hi],
            [c],
            xerr=np.array([[hi - lo], [0.0]]),
            fmt=markers[i % len(markers)],
            markersize=max(5.0, 15.0 - 1.1 * i),
            mfc="none",
            mew=2.0,
            capsize=3,
            zorder=3 + i,
            label=label,
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(r"multi-round privacy $T_{weak}$ after the last round")
    ax.set_ylabel("average aggregation cardinality $C$")
    ax.set_title("Trade-off between multi-round privacy and cardinality")
    ax.grid(alpha=0.3)
    _legend(ax)
    return save_figure(fig, out / "fig4_tradeoff.png", dpi=130, tight=True)
