"""Plots of training runs: accuracy against rounds, and the participation metrics."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedprivacy.fl.engine import RoundRecord  # noqa: E402

if TYPE_CHECKING:
    from fedprivacy.experiments.training_run import TrainingResult


def accuracy_points(records: Sequence[RoundRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Rounds (1-based: after that many rounds) and test accuracy of the evaluated rounds."""
    pts = [(r.round_index + 1, r.test_accuracy) for r in records if not np.isnan(r.test_accuracy)]
    if not pts:
        return np.zeros(0), np.zeros(0)
    x, y = zip(*pts, strict=True)
    return np.asarray(x), np.asarray(y)


def plot_training_run(result: TrainingResult, out: Path) -> list[Path]:
    """``accuracy.png`` (test accuracy and loss) and ``participation.png`` (C, F, T_weak)."""
    tr = result.training
    x, acc = accuracy_points(tr.records)
    loss = np.asarray([r.test_loss for r in tr.records if not np.isnan(r.test_accuracy)])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes[0].plot(x, 100 * acc)
    axes[0].set(xlabel="round", ylabel="test accuracy (%)", title=result.config.label)
    axes[1].plot(x, loss, color="tab:red")
    axes[1].set(xlabel="round", ylabel="test loss")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(f"{result.config.model_name} on {tr.dataset.source}", fontsize=9)
    fig.tight_layout()
    paths = [out / "accuracy.png"]
    fig.savefig(paths[0], dpi=120)
    plt.close(fig)

    rounds = np.arange(1, tr.ledger.rounds + 1)
    card = np.cumsum(tr.ledger.cardinalities) / np.maximum(rounds, 1)
    counts = np.cumsum(tr.ledger.matrix(), axis=0) if tr.ledger.rounds else np.zeros((0, 1))
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
    fig.tight_layout()
    paths.append(out / "participation.png")
    fig.savefig(paths[1], dpi=120)
    plt.close(fig)
    return paths


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
) -> Path:
    """Accuracy, per-user epsilon and T_weak of several DP runs, side by side.

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
    axes[1].set(xlabel="per-user epsilon", ylabel="fraction of users", title="per-user epsilon")
    axes[2].set(
        xlabel="round", ylabel="T_weak (attained upper bound)", title="server's multi-round view"
    )
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
