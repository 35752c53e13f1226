"""The least-squares attack on real training (Multi-RoundSecAgg, Appendix G.2, Fig. 8).

Train for ``t0`` rounds; at round ``t0`` compute every user's true weighted update
``w_i delta_i^(t0)`` from the global model ``x^(t0)``; then let the server record the aggregates
``sum_{i in S_t} w_i delta_i^(t)`` of rounds ``t0 .. t1 - 1`` (what secure aggregation reveals) and
estimate the individual updates by least squares (eq. 34). The error of user ``i`` is eq. (35),
``||w_i delta_i - hat||^2 / ||w_i delta_i||^2``: near 0 when the server can reconstruct the update,
near or above ``1 - 1/T`` when it only learns sums of ``T`` users.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.attacks.least_squares import least_squares_reconstruction
from fedprivacy.data.images import ImageDataset, load_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.reproduce import Experiment, checked_overrides
from fedprivacy.experiments.training_run import CHECKPOINT, run_training
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.training_config import TrainConfig, build_training


@dataclass(frozen=True)
class AttackOutcome:
    """Reconstruction errors of one scheme."""

    label: str
    errors: NDArray[np.float64]  # one per user (NaN: no update)
    identifiable: int
    rank: int
    rounds_observed: int
    test_accuracy: float
    drift: float = float(
        "nan"
    )  # median ||delta_u^(t) - delta_u^(t0)|| / ||delta_u^(t0)|| in the window
    condition: float = float("nan")  # condition number of P (inf when rank deficient)

    @property
    def mean_error(self) -> float:
        """Average eq. (35) error over the users."""
        finite = self.errors[~np.isnan(self.errors)]
        return float(finite.mean()) if finite.size else float("nan")


def run_training_attack(
    config: TrainConfig,
    t0: int,
    window: int,
    dataset: ImageDataset,
    progress: Callable[[int], None] | None = None,
    *,
    run_dir: Path | None = None,
) -> AttackOutcome:
    """Train ``config`` to round ``t0 + window`` and attack the aggregates of the window.

    With ``run_dir`` the run is resumable: the training to ``t0`` (the long part: 1,460 rounds
    in the paper) is a run directory ``run_dir/train`` checkpointed every
    ``config.checkpoint_every`` rounds and resumed from there, and the finished attack is kept in
    ``run_dir/outcome.json`` and reused when the configuration, ``t0`` and ``window`` are the
    same. The outcome does not depend on where the run was interrupted.
    """
    key = {"config": config.to_dict(), "t0": t0, "window": window}
    if run_dir is not None:
        stored = _stored_outcome(run_dir / OUTCOME, config, t0, window)
        if stored is not None:
            return stored
    train_dir = None if run_dir is None else run_dir / "train"
    resume = train_dir is not None and (train_dir / CHECKPOINT).is_file()
    head = run_training(
        config.with_overrides(rounds=t0, metrics="none"),
        train_dir,
        resume=resume,
        dataset=dataset,
        progress=progress,
    )
    observed: dict[int, tuple[tuple[int, ...], NDArray[np.float64] | None]] = {}
    sent: dict[int, dict[int, NDArray[np.float32]]] = {}

    def record(r: int, outcome: AggregateOutcome, deltas: dict[int, NDArray[np.float32]]) -> None:
        if r >= t0:
            observed[r] = (outcome.aggregated, outcome.weighted_sum)
            sent[r] = {u: deltas[u] for u in outcome.aggregated if u in deltas}

    training = build_training(
        config.with_overrides(rounds=t0 + window), dataset, on_aggregate=record
    )
    training.load_state_dict(head.training.state_dict())
    users = np.arange(config.users)
    updates = training.local_updates(users, t0, seed=config.seed + 1)
    truth = updates.astype(np.float64) * training.weights[:, None]
    training.run(t0 + window, progress=progress)
    p = np.zeros((window, config.users), dtype=np.uint8)
    agg = np.zeros((window, truth.shape[1]))
    for i, r in enumerate(range(t0, t0 + window)):
        members, total = observed.get(r, ((), None))
        if members and total is not None:
            p[i, list(members)] = 1
            agg[i] = total
    result = least_squares_reconstruction(p, agg, truth)
    drifts = [
        float(np.linalg.norm(d - updates[u]) / np.linalg.norm(updates[u]))
        for deltas in sent.values()
        for u, d in deltas.items()
        if np.linalg.norm(updates[u]) > 0
    ]
    outcome = AttackOutcome(
        config.label,
        result.errors,
        int(result.identifiable.sum()),
        int(np.linalg.matrix_rank(p)),
        int(np.count_nonzero(p.any(axis=1))),
        float(training.evaluate()[0]),
        float(np.median(drifts)) if drifts else float("nan"),
        float(np.linalg.cond(p.astype(np.float64))),
    )
    if run_dir is not None:
        atomic_write_json(run_dir / OUTCOME, {**key, **_outcome_dict(outcome)})
    return outcome


OUTCOME = "outcome.json"


def _outcome_dict(o: AttackOutcome) -> dict[str, Any]:
    return {
        "scheme": o.label,
        "mean_error": o.mean_error,
        "errors": [None if np.isnan(e) else float(e) for e in o.errors],
        "identifiable_users": o.identifiable,
        "rank": o.rank,
        "rounds_observed": o.rounds_observed,
        "test_accuracy": o.test_accuracy,
        "drift": o.drift,
        "condition": o.condition,
    }


def _stored_outcome(path: Path, config: TrainConfig, t0: int, window: int) -> AttackOutcome | None:
    """The outcome kept in ``path`` if it was computed for ``config``, ``t0`` and ``window``."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    stored = TrainConfig.from_stored(data.get("config", {}))
    same_window = (data.get("t0"), data.get("window")) == (t0, window)
    if not same_window or config.differences(stored, ignore=("data_dir",)):
        return None
    errors = np.array([np.nan if e is None else e for e in data["errors"]], dtype=np.float64)
    return AttackOutcome(
        str(data["scheme"]),
        errors,
        int(data["identifiable_users"]),
        int(data["rank"]),
        int(data["rounds_observed"]),
        float(data["test_accuracy"]),
        float(data.get("drift", float("nan"))),
        float(data.get("condition", float("nan"))),
    )


def write_attack_outputs(outcomes: list[AttackOutcome], out: Path, meta: dict[str, Any]) -> None:
    """``attack.json``, ``attack.md`` and the histogram ``fig8_histogram.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    data = {
        **meta,
        "schemes": [_outcome_dict(o) for o in outcomes],
    }
    atomic_write_json(out / "attack.json", data)
    lines = [
        "# Least-squares reconstruction on real training (Appendix G.2)",
        "",
        f"{meta.get('setting', '')}",
        "",
        "| scheme | mean error e_i (eq. 35) | paper | users identifiable | rank of P | cond(P) "
        "| update drift in the window (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    paper = meta.get("paper", {})
    for o in outcomes:
        lines.append(
            f"| {o.label} | {o.mean_error:.4g} | {paper.get(o.label, '-')} | "
            f"{o.identifiable} / {len(o.errors)} | {o.rank} | {o.condition:.3g} | {o.drift:.3g} |"
        )
    atomic_write_text(out / "attack.md", "\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(6.4, 4))
    bins = [float(b) for b in np.logspace(-5, 1, 40)]
    for o in outcomes:
        e = o.errors[~np.isnan(o.errors)]
        ax.hist(
            np.clip(e, 1e-5, 10), bins=bins, alpha=0.6, label=f"{o.label} (mean {o.mean_error:.3g})"
        )
    ax.set(
        xscale="log",
        xlabel="reconstruction error e_i",
        ylabel="users",
        title="Fig. 8: least-squares reconstruction of local updates",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig8_histogram.png", dpi=120)
    plt.close(fig)


def run_attack_experiment(
    experiment: Experiment,
    out: Path,
    *,
    seed: int = 0,
    t0: int | None = None,
    window: int | None = None,
    data_dir: str | None = None,
    only: Sequence[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress_factory: Callable[[str, int], Callable[[int], None]] | None = None,
) -> list[Any]:
    """Run the Appendix G.2 attack for every run of an ``attack`` experiment.

    Each run keeps its training in ``out/NAME/RUN-seedS/train`` (checkpointed, resumed on the
    next call) and its outcome in ``outcome.json`` next to it (reused), so the paper's window
    (1,500 rounds of training) can run in pieces; ``overrides`` are ``reproduce --set`` keys
    (``device=cuda``, say).
    """
    changes = checked_overrides(overrides)
    start = experiment.t0 if t0 is None else t0
    length = experiment.window if window is None else window
    if start < 1:
        raise ParameterError("t0", f"the attack needs t0 >= 1, got {start}")
    if length < 1:
        raise ParameterError("window", f"the attack needs window >= 1, got {length}")
    selected = [r for r in experiment.runs if only is None or r.name in only]
    unknown = set(only or ()) - {r.name for r in experiment.runs}
    if unknown:
        raise ParameterError("only", f"unknown runs {sorted(unknown)} in {experiment.name}")
    outcomes = []
    dataset: ImageDataset | None = None
    configs = [
        run.config.with_overrides(**changes).with_overrides(seed=seed, data_dir=data_dir)
        for run in selected
    ]
    for run, config in zip(selected, configs, strict=True):
        config.validate()
        if dataset is None:
            dataset = load_dataset(config.dataset, data_dir)
        bar = None if progress_factory is None else progress_factory(run.name, start + length)
        run_dir = out / experiment.name / f"{run.name}-seed{seed}"
        outcomes.append(
            run_training_attack(config, start, length, dataset, progress=bar, run_dir=run_dir)
        )
    assert dataset is not None
    base = configs[0]
    meta = {
        "setting": f"{base.model_name} on {dataset.source}, {base.partition}, N = {base.users}, "
        f"K = {base.per_round}, dropout {base.dropout}, lr {base.local_lr} "
        f"(x{base.local_lr_decay} at {list(base.local_lr_milestones)}), seed {seed}; aggregates "
        f"of rounds {start} .. {start + length - 1} (t0 = {start}, t1 = {start + length})",
        "paper": {r.config.label: r.paper_value for r in selected},
        "t0": start,
        "window": length,
    }
    write_attack_outputs(outcomes, out / experiment.name, meta)
    return outcomes
