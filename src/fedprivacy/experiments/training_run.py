"""Run a training configuration into a run directory, with checkpoints and ``--resume``.

A run directory holds::

    config.toml         the resolved configuration
    checkpoint.pt       the state after the last checkpoint (every ``checkpoint_every`` rounds)
    metrics.csv         one row per round: accuracy, loss, aggregated set size, T, F, C, seconds,
                        the noise multiplier of the released aggregate
    participation.csv   the ledger (who was aggregated in each round)
    summary.json / summary.md / accuracy.png / participation.png
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from fedprivacy._validation import require_int
from fedprivacy.data.images import ImageDataset
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.training_csv import metrics_csv
from fedprivacy.experiments.training_result import TrainingResult
from fedprivacy.files import atomic_write_bytes, atomic_write_text
from fedprivacy.fl.engine import FederatedTraining
from fedprivacy.fl.training_config import TrainConfig, build_training
from fedprivacy.participation.curve import t_weak_curve
from fedprivacy.participation.metrics import exposed_users
from fedprivacy.participation.privacy_filter import budget_markdown
from fedprivacy.pipeline.algorithm import RoundResult
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.run_directory import write_run_directory

CHECKPOINT = "checkpoint.pt"
#: Keys a resumed run may change: where the data is and which device computes (a run
#: checkpointed on a GPU goes on on a CPU, up to floating-point rounding).
RESUMABLE_ACROSS = frozenset({"data_dir", "device"})
CONFIG = "config.toml"
_FORMAT = 1


def _save_checkpoint(path: Path, config: TrainConfig, training: FederatedTraining) -> None:
    buf = io.BytesIO()
    torch.save({"format": _FORMAT, "config": config.to_dict(), **training.state_dict()}, buf)
    atomic_write_bytes(path, buf.getvalue())


def _load_checkpoint(path: Path) -> dict[str, Any]:
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # torch raises many kinds here
        raise ParameterError("resume", f"cannot read the checkpoint {path}: {exc}") from None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise ParameterError("resume", f"{path} is not a fedprivacy checkpoint of this version")
    return state


def resume_config(run_dir: str | Path, rounds: int | None = None) -> TrainConfig:
    """The configuration stored in a run directory (``rounds`` may be raised to extend it)."""
    path = Path(run_dir) / CONFIG
    if not path.is_file():
        raise ParameterError("resume", f"{run_dir} has no {CONFIG}; is it a run directory?")
    config = TrainConfig.from_stored_toml(path)
    if rounds is not None:
        config = config.with_overrides(rounds=rounds)
    return config


def run_training(
    config: TrainConfig,
    out_dir: str | Path | None,
    *,
    resume: bool = False,
    dataset: ImageDataset | None = None,
    progress: Callable[[int], None] | None = None,
    metric_progress: Callable[[int], None] | None = None,
    stop_after_rounds: int | None = None,
) -> TrainingResult:
    """Train ``config`` and write the run directory.

    Parameters
    ----------
    config : TrainConfig
        The run.
    out_dir : str or Path or None
        The run directory (``None``: nothing is written, no checkpoints).
    resume : bool
        Continue from ``out_dir/checkpoint.pt``; the stored configuration must equal ``config``
        except for ``rounds``, which may grow, and ``data_dir`` and ``device``.
    dataset : ImageDataset, optional
        Already loaded data.
    progress, metric_progress : callable, optional
        Called with 1 per round / per ``T_weak`` evaluation.
    stop_after_rounds : int, optional
        Stop (after a checkpoint) once this many rounds exist, without the final metrics; for
        running a long job in pieces.
    """
    started = time.perf_counter()
    config.validate()
    if stop_after_rounds is not None:
        require_int("stop_after", stop_after_rounds, minimum=1, maximum=config.rounds)
    out = None if out_dir is None else Path(out_dir)
    training = build_training(config, dataset)
    if resume:
        if out is None or not (out / CHECKPOINT).is_file():
            raise ParameterError("resume", f"no {CHECKPOINT} in {out}")
        state = _load_checkpoint(out / CHECKPOINT)
        stored = TrainConfig.from_stored(state["config"]).with_overrides(rounds=config.rounds)
        diff = config.differences(stored, ignore=RESUMABLE_ACROSS)
        if diff:
            raise ParameterError(
                "resume", f"the configuration differs from the checkpoint's in {diff}"
            )
        training.load_state_dict(state)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / CONFIG, config.to_toml())

    def checkpoint(result: RoundResult[RoundRecord]) -> None:
        r = training.round
        if out is not None and (r % config.checkpoint_every == 0 or r == config.rounds):
            _save_checkpoint(out / CHECKPOINT, config, training)
            atomic_write_text(out / "metrics.csv", metrics_csv(training, None))

    training.loop.callbacks = (*training.loop.callbacks, checkpoint)
    target = config.rounds if stop_after_rounds is None else min(config.rounds, stop_after_rounds)
    training.run(target, progress=progress)
    result = finished(config, training, started, metric_progress)
    if out is not None:
        write_outputs(result, out)
    return result


def finished(
    config: TrainConfig,
    training: FederatedTraining,
    started: float,
    metric_progress: Callable[[int], None] | None = None,
) -> TrainingResult:
    """The result of ``training`` after its rounds, in process or deployed.

    The server's view (the ``T_weak`` curve and the exposed users) is computed from the ledger
    once the run has all ``config.rounds`` rounds (unless ``config.metrics`` is ``none``), over
    the ``config.users`` users: canaries' updates are known to whoever inserted them, so their
    columns leave the view; ``started`` is the run's ``time.perf_counter()`` at its start.
    """
    curve = None
    exposed: list[int] = []
    if training.round == config.rounds and config.metrics != "none":
        p = training.users_ledger.matrix()
        curve = t_weak_curve(
            p,
            time_limit=config.metrics_time_limit,
            point_time_limit=min(5.0, config.metrics_time_limit),
            search_exact=config.metrics == "exact",
            progress=metric_progress,
        )
        exposed = [int(u) for u in exposed_users(p)]
    return TrainingResult(config, training, curve, time.perf_counter() - started, exposed)


def summary_markdown(result: TrainingResult) -> str:
    """A short human-readable report of the run."""
    s = result.summary()
    c = result.config
    acc = s["test_accuracy"]
    t = s["t_weak"]
    t_text = "-" if t is None else (str(t) if s["t_weak_exact"] else f"{s['t_weak_lower']}..{t}")
    lines = [
        f"# {c.label}: {c.model_name} on {c.dataset} ({c.partition})",
        "",
        *_privacy_sentences(result),
        "",
        f"- data: {s['data_source']}",
        f"- N = {c.users}, K = {c.per_round}, rounds = {s['rounds']}, seed = {c.seed}, "
        f"dropout = {c.dropout}, E = {c.local_epochs}, batch = {c.batch_size}, lr = {c.local_lr}",
        f"- aggregation: {s['aggregation']} ("
        + (f"fixed point, {c.bits} bits" if c.encoding == "fixed-point" else "float64, no encoding")
        + f", clip {c.update_clip}); device: {s['device']}",
        f"- model parameters: {s['parameters']:,}",
        "",
        "| metric | value |",
        "|---|---|",
        f"| test accuracy | {'-' if acc is None else f'{100 * acc:.2f} %'} |",
        f"| test loss | {s['test_loss'] if s['test_loss'] is None else round(s['test_loss'], 4)} |",
        f"| multi-round privacy T_weak | {t_text} |",
        f"| users exposed (individually reconstructible) | {s['exposed_users']} |",
        f"| per-user epsilon (max, at delta) | {_epsilon_text(s['privacy'])} |",
        *_epsilon_hat_row(s["epsilon_hat"]),
        f"| fairness gap F | {s['fairness_gap']:.4f} |",
        f"| average cardinality C | {s['average_cardinality']:.3f} |",
        f"| skipped / aborted rounds | {s['skipped_rounds']} / {s['aborted_rounds']} |",
        f"| seconds per round (training / aggregation) | {s['mean_train_seconds']:.3f} / "
        f"{s['mean_aggregate_seconds']:.3f} |",
        f"| total seconds | {s['seconds']:.1f} |",
        "",
        "F: the fairness gap, (most - fewest rounds a user was aggregated in) / rounds. "
        "C: the average cardinality, users aggregated a round.",
        "",
    ]
    return "\n".join(lines)


def _privacy_sentences(result: TrainingResult) -> list[str]:
    """What the server could learn and what the released model reveals, in sentences."""
    from fedprivacy.report_sentences import epsilon_sentence, server_view_sentences

    report = result.report
    released = (
        ["No differential privacy: the released model carries no formal guarantee."]
        if report.epsilon is None or report.delta is None
        else [epsilon_sentence(report.epsilon, report.delta, str(report.epsilon_adversary))]
    )
    return [
        "What the server could learn: "
        + " ".join(server_view_sentences(report.t_weak, report.t_strong, report.exposed_users)),
        "",
        "What the released model reveals: " + " ".join(released) + " (privacy.md has the details.)",
    ]


def _epsilon_text(privacy: dict[str, Any]) -> str:
    if privacy["epsilon"] is None:
        return "no DP (no guarantee)"
    text = f"{privacy['epsilon']:.3g} at {privacy['delta']:g} ({privacy['mechanism']} DP)"
    released = privacy["epsilon_released"]
    if released is not None and released != privacy["epsilon"]:
        text += f"; {released:.3g} against whoever sees only the models"
    return text


def _epsilon_hat_row(estimate: dict[str, float] | None) -> list[str]:
    """The canaries' ``epsilon_hat`` with its interval (no row without canaries)."""
    if estimate is None:
        return []
    return [
        f"| epsilon_hat ({estimate['canaries']:.0f} canaries; 95 % interval) | "
        f"{estimate['epsilon']:.3g} ({estimate['low']:.3g} to {estimate['high']:.3g}) |"
    ]


def write_outputs(
    result: TrainingResult, out: Path, extra: Mapping[str, Any] | None = None
) -> list[Path]:
    """Write metrics, summaries, the privacy report, the ledger and plots into ``out``.

    ``extra`` adds (or replaces) summary keys: a deployment's own
    (:mod:`fedprivacy.flower.deploy.run`).
    """
    from fedprivacy.experiments.training_plots import plot_training_run

    files = {
        "metrics.csv": metrics_csv(result.training, result.curve),
        "summary.json": {**result.summary(), **(extra or {})},
        "summary.md": summary_markdown(result),
        "privacy.md": result.report.to_markdown() + budget_markdown(result.privacy_filter),
    }

    def ledger_and_plots(folder: Path) -> list[Path]:
        result.training.ledger.to_csv(folder / "participation.csv")
        return [folder / "participation.csv", *plot_training_run(result, folder)]

    return write_run_directory(out, files, ledger_and_plots)
