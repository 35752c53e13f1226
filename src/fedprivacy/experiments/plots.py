"""Figures: the metrics of a selection run and the paper's Fig. 3 and Fig. 4."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from fedprivacy.files import atomic_write_bytes  # noqa: E402

if TYPE_CHECKING:
    from fedprivacy.experiments.selection_run import SelectionResult


def _save(fig: Figure, path: Path) -> Path:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


def _t_weak_axes(ax: Axes, results: Sequence[SelectionResult]) -> None:
    for res in results:
        if res.t_weak is None:
            continue
        rounds = np.arange(1, res.ledger.rounds + 1)
        (line,) = ax.step(rounds, res.t_weak.upper, where="post", label=res.config.label)
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
    ax.set_xscale("log")
    ax.set_xlabel("round")
    ax.set_ylabel(r"$T_{weak}$ (line: attained; band: certified interval)")
    ax.set_title("(a) multi-round privacy guarantee")
    ax.grid(alpha=0.3)


def _curve_axes(
    ax: Axes, results: Sequence[SelectionResult], attr: str, title: str, ylabel: str
) -> None:
    for res in results:
        rounds = np.arange(1, res.ledger.rounds + 1)
        ax.plot(rounds, getattr(res, attr), label=res.config.label)
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
    axes[1].set_yscale("log")
    fig.suptitle(result.config.label)
    return [_save(fig, out / "metrics.png")]


def plot_fig3(results: Sequence[SelectionResult], out: Path) -> list[Path]:
    """The paper's Fig. 3 (a, b, c) as three PNG files."""
    paths = []
    for name in ("fig3a_t_weak.png", "fig3b_fairness_gap.png", "fig3c_cardinality.png"):
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        if name.startswith("fig3a"):
            _t_weak_axes(ax, results)
        elif name.startswith("fig3b"):
            _curve_axes(ax, results, "fairness_gap", "(b) aggregation fairness gap", "$F^{(t)}$")
            ax.set_yscale("log")
        else:
            _curve_axes(
                ax, results, "cardinality", "(c) average aggregation cardinality", "$C^{(t)}$"
            )
        ax.legend(fontsize=8)
        paths.append(_save(fig, out / name))
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
    for label, lo, hi, c in points:
        ax.errorbar([hi], [c], xerr=np.array([[hi - lo], [0.0]]), fmt="s", capsize=3, label=label)
    ax.set_xlabel(r"multi-round privacy $T_{weak}$ after the last round")
    ax.set_ylabel("average aggregation cardinality $C$")
    ax.set_title("Trade-off between multi-round privacy and cardinality")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out / "fig4_tradeoff.png")
