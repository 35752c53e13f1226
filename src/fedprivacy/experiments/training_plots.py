"""Plots of training runs: accuracy against rounds, and the participation metrics."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from fedprivacy.experiments.training_result import TrainingResult  # noqa: E402
from fedprivacy.pipeline.record import RoundRecord  # noqa: E402


def accuracy_points(records: Sequence[RoundRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Rounds (1-based: after that many rounds) and test accuracy of the evaluated rounds."""
    pts = [(r.round_index + 1, a) for r in records if not np.isnan(a := r.get("test_accuracy"))]
    if not pts:
        return np.zeros(0), np.zeros(0)
    x, y = zip(*pts, strict=True)
    return np.asarray(x), np.asarray(y)


def dp_title(result: TrainingResult) -> str:
    """What a DP run's plots state: epsilon at delta, mechanism, noise ('' without DP)."""
    report = result.report
    if report.epsilon is None:
        return ""
    return (
        f"; epsilon {report.epsilon:.3g} at delta {report.delta:g} (largest per user), "
        f"{report.mechanism} DP, noise multiplier {report.noise_multiplier:g}"
    )


def _integer_axes(*axes: Axes, y: bool = False) -> None:
    """Rounds (and, with ``y``, an integer quantity such as T_weak) get integer ticks."""
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if y:  # from 0, so that even a constant curve has integer ticks around it
            ax.set_ylim(0, max(ax.get_ylim()[1], 1.0) + 0.5)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def plot_training_run(result: TrainingResult, out: Path) -> list[Path]:
    """``accuracy.png``, ``participation.png`` (C, F, T_weak) and, under DP, ``privacy.png``."""
    tr = result.training
    x, acc = accuracy_points(tr.records)
    loss = np.asarray(
        [r.get("test_loss") for r in tr.records if not np.isnan(r.get("test_accuracy"))]
    )
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes[0].plot(x, 100 * acc)
    axes[0].set(xlabel="round", ylabel="test accuracy (%)", title=result.config.label)
    axes[1].plot(x, loss, color="tab:red")
    axes[1].set(xlabel="round", ylabel="test loss")
    for ax in axes:
        ax.grid(alpha=0.3)
    _integer_axes(*axes)
    fig.suptitle(f"{result.config.model_name} on {tr.dataset.source}{dp_title(result)}", fontsize=9)
    fig.tight_layout()
    paths = [out / "accuracy.png"]
    fig.savefig(paths[0], dpi=120)
    plt.close(fig)

    users = tr.users_ledger  # the canaries are no user's
    rounds = np.arange(1, users.rounds + 1)
    card = np.cumsum(users.cardinalities) / np.maximum(rounds, 1)
    counts = np.cumsum(users.matrix(), axis=0) if users.rounds else np.zeros((0, 1))
    gap = (counts.max(axis=1) - counts.min(axis=1)) / np.maximum(rounds, 1)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    axes[0].plot(rounds, card)
    axes[0].set(xlabel="round", ylabel="average cardinality C")
    axes[1].plot(rounds, gap)
    axes[1].set(xlabel="round", ylabel="fairness gap F")
    if result.curve is not None:
        axes[2].plot(rounds, result.curve.upper, label="upper (attained)")
        axes[2].plot(rounds, result.curve.lower, "--", label="lower (proved)")
        axes[2].legend(fontsize=8)
    axes[2].set(xlabel="round", ylabel="T_weak")
    for ax in axes:
        ax.grid(alpha=0.3)
    _integer_axes(axes[0], axes[1])
    _integer_axes(axes[2], y=True)
    fig.suptitle(
        f"{result.config.label}: who took part (C, F) and what the server can compute (T_weak)",
        fontsize=9,
    )
    fig.tight_layout()
    paths.append(out / "participation.png")
    fig.savefig(paths[1], dpi=120)
    plt.close(fig)
    if result.report.epsilon is not None:
        paths.append(_plot_privacy(result, x, acc, out / "privacy.png"))
    return paths


def _plot_privacy(result: TrainingResult, x: np.ndarray, acc: np.ndarray, path: Path) -> Path:
    """A DP run's ``privacy.png``: accuracy, the per-user epsilons and T_weak per round."""
    from fedprivacy.dp.per_user import per_user_epsilons_by_round

    tr = result.training
    noise = np.array([r.noise_multiplier for r in tr.records], dtype=np.float64)
    delta = result.config.target_delta
    eps = per_user_epsilons_by_round(
        tr.users_ledger.matrix().astype(bool), noise, delta, tr.mechanism.accountant
    )
    t_weak = (
        np.full(tr.ledger.rounds, np.nan)
        if result.curve is None
        else np.asarray(result.curve.upper, dtype=np.float64)
    )
    label = result.config.label
    return plot_privacy_comparison(
        {label: (x, acc)},
        {label: (eps, t_weak)},
        path,
        f"{label}{dp_title(result)}",
        delta=delta,
    )


def plot_accuracy_comparison(
    curves: dict[str, tuple[np.ndarray, np.ndarray]], path: Path, title: str
) -> Path:
    """Accuracy against rounds for several runs in one figure (like the paper's Figs. 6-7)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, (x, y) in curves.items():
        ax.plot(x, 100 * y, label=label)
    ax.set(xlabel="round", ylabel="test accuracy (%)", title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_privacy_comparison(
    curves: dict[str, tuple[np.ndarray, np.ndarray]],
    privacy: dict[str, tuple[np.ndarray, np.ndarray]],
    path: Path,
    title: str,
    *,
    delta: float,
) -> Path:
    """Accuracy, per-user epsilon at ``delta`` and T_weak of several DP runs, side by side.

    ``privacy`` maps each label to (per-user epsilons, T_weak upper bound per round).
    """
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.0))
    for label, (x, y) in curves.items():
        axes[0].plot(x, 100 * y, label=label)
    for label, (eps, t_weak) in privacy.items():
        ordered = np.sort(eps)
        share = np.arange(1, ordered.size + 1) / ordered.size
        axes[1].step(ordered, share, where="post", label=label)
        known = np.isfinite(t_weak)  # rounds the T_weak curve evaluated
        rounds = np.arange(1, t_weak.size + 1)[known]
        axes[2].plot(rounds, t_weak[known], ".-", drawstyle="steps-post", label=label)
    axes[0].set(xlabel="round", ylabel="test accuracy (%)", title="released model")
    axes[1].set(
        xlabel=f"per-user epsilon at delta {delta:g}",
        ylabel="fraction of users",
        title="per-user epsilon",
    )
    axes[2].set(
        xlabel="round", ylabel="T_weak (attained upper bound)", title="server's multi-round view"
    )
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _integer_axes(axes[0])
    _integer_axes(axes[2], y=True)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
