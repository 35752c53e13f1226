"""How long each selection scheme lasts under the privacy guard (the demo's setting).

Random, weighted-random and Multi-RoundSecAgg selection run with
:class:`~fedprivacy.participation.guard.PrivacyGuard` for every target ``T_weak >= t`` (2: nobody
exposed) in both modes, on the demo's setting (N = 120, K = 12, heterogeneous dropout), with
``search_seconds`` of exact search a round where the bounds leave the target undecided. Per run:
the first round the guard changed (the rounds the scheme sustained untouched), how many rounds it
refused, and the mean number of users aggregated per round (what the guard leaves of training).

Examples
--------
>>> rows = run_guard_study(GuardStudyConfig(rounds=30, targets=(2,), schemes=("random",)))
>>> rows[0].scheme, rows[0].target, rows[0].mode
('random', 2, 'refuse')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedprivacy.participation.availability import BernoulliDropout
from fedprivacy.participation.guard import GUARD_MODES, PrivacyGuard
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import Selector, make_selector
from fedprivacy.pipeline.selection import run_selection

__all__ = ["GuardRow", "GuardStudyConfig", "markdown_table", "plot_guard_study", "run_guard_study"]


@dataclass(frozen=True)
class GuardStudyConfig:
    """The study's setting (defaults: the demo's N, K and dropout)."""

    users: int = 120
    per_round: int = 12
    rounds: int = 500
    seed: int = 0
    search_seconds: float = 0.25
    targets: tuple[int, ...] = (2, 3, 4, 6)
    schemes: tuple[str, ...] = (
        "random",
        "weighted-random",
        "multiround-3",
        "multiround-4",
        "multiround-6",
    )
    modes: tuple[str, ...] = GUARD_MODES


@dataclass(frozen=True)
class GuardRow:
    """One scheme under one guard.

    ``first_changed`` is None when the guard never changed a round.
    """

    scheme: str
    target: int
    mode: str
    first_changed: int | None
    refused: int
    mean_aggregated: float
    rounds: int


def _selector(name: str, cfg: GuardStudyConfig) -> Selector:
    if name.startswith("multiround-"):
        t = int(name.split("-")[1])
        return make_selector("multiround", cfg.users, cfg.per_round, target_privacy=t)
    return make_selector(name, cfg.users, cfg.per_round)


def run_one(cfg: GuardStudyConfig, scheme: str, target: int, mode: str) -> GuardRow:
    """One scheme, one target, one mode: ``cfg.rounds`` guarded rounds."""
    rng = np.random.default_rng(cfg.seed)
    availability = BernoulliDropout.heterogeneous(cfg.users, rng)
    ledger = ParticipationLedger(cfg.users)
    guard = PrivacyGuard(
        _selector(scheme, cfg), ledger, target=target, mode=mode, search_seconds=cfg.search_seconds
    )
    selection_rng = np.random.default_rng([cfg.seed, 1])
    run_selection(guard, availability, cfg.rounds, selection_rng, ledger=ledger)
    changed = [d.round_index for d in guard.decisions]
    return GuardRow(
        scheme,
        target,
        mode,
        changed[0] if changed else None,
        sum(d.aggregated == 0 for d in guard.decisions),
        float(ledger.cardinalities.mean()),
        cfg.rounds,
    )


def run_guard_study(
    cfg: GuardStudyConfig, progress: Callable[[GuardRow], None] | None = None
) -> list[GuardRow]:
    """Every scheme x target x mode of ``cfg``."""
    rows = []
    for scheme in cfg.schemes:
        for target in cfg.targets:
            for mode in cfg.modes:
                rows.append(run_one(cfg, scheme, target, mode))
                if progress is not None:
                    progress(rows[-1])
    return rows


def markdown_table(rows: list[GuardRow]) -> str:
    """The study as a Markdown table, a row per scheme and target, both modes side by side.

    Examples
    --------
    >>> row = GuardRow("random", 2, "refuse", 7, 3, 11.5, 30)
    >>> print(markdown_table([row]).splitlines()[2])
    | random | 2 | 7 | 3 of 30 | 11.5 | - | - |
    """
    by_key = {(r.scheme, r.target, r.mode): r for r in rows}
    lines = [
        "| scheme | target T_weak >= | refuse: first refused round | refuse: rounds refused "
        "| refuse: users a round | shrink: first shrunk round | shrink: users a round |",
        "|---|---|---|---|---|---|---|",
    ]
    for scheme, target in dict.fromkeys((r.scheme, r.target) for r in rows):
        refuse, shrink = (
            by_key.get((scheme, target, "refuse")),
            by_key.get((scheme, target, "shrink")),
        )
        cells = [scheme, str(target)]
        cells += _cells(refuse, ("first", "refused", "mean")) + _cells(shrink, ("first", "mean"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cells(row: GuardRow | None, fields: tuple[str, ...]) -> list[str]:
    if row is None:
        return ["-"] * len(fields)
    values = {
        "first": "never" if row.first_changed is None else str(row.first_changed),
        "refused": f"{row.refused} of {row.rounds}",
        "mean": f"{row.mean_aggregated:.1f}",
    }
    return [values[f] for f in fields]


def plot_guard_study(rows: list[GuardRow], path: Path) -> Path:
    """Against the target: the refusing guard's first refusal, the shrinking guard's users.

    A scheme the guard never refused is drawn at the run's length.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for scheme in dict.fromkeys(r.scheme for r in rows):
        refuse = [r for r in rows if r.scheme == scheme and r.mode == "refuse"]
        shrink = [r for r in rows if r.scheme == scheme and r.mode == "shrink"]
        first = [r.rounds if r.first_changed is None else r.first_changed for r in refuse]
        left.plot([r.target for r in refuse], first, marker="o", label=scheme)
        right.plot(
            [r.target for r in shrink],
            [r.mean_aggregated for r in shrink],
            marker="o",
            label=scheme,
        )
    left.set(
        xlabel="guarded target T_weak >=",
        ylabel=f"rounds before the first refusal (of {rows[0].rounds})",
        title="refuse",
    )
    right.set(xlabel="guarded target T_weak >=", ylabel="users aggregated a round", title="shrink")
    for axis in (left, right):
        axis.set_xticks(sorted({r.target for r in rows}))
    fig.legend(*left.get_legend_handles_labels(), loc="lower center", ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
