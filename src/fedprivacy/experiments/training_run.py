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

import functools
import io
import math
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedprivacy._validation import require_int
from fedprivacy.data.images import ImageDataset, load_dataset
from fedprivacy.data.partition import make_partition
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.training_config import TrainConfig
from fedprivacy.experiments.training_csv import metrics_csv
from fedprivacy.files import atomic_write_bytes, atomic_write_text
from fedprivacy.fl.aggregators import section_aggregator
from fedprivacy.fl.engine import (
    FederatedTraining,
    LearningRateSchedule,
    RoundRecord,
    summarise_records,
)
from fedprivacy.fl.local_training import LocalTrainingSpec
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.models.registry import build_model, count_parameters
from fedprivacy.participation.availability import AvailabilityModel, make_availability
from fedprivacy.participation.curve import TWeakCurve, t_weak_curve
from fedprivacy.participation.guard import PrivacyGuard, guard_summary
from fedprivacy.participation.metrics import exposed_users, t_strong
from fedprivacy.participation.privacy_filter import PrivacyFilter, budget_markdown, filter_summary
from fedprivacy.participation.selectors import make_selector
from fedprivacy.pipeline.algorithm import RoundResult
from fedprivacy.report import LedgerEpsilons, PrivacyReport, privacy_report
from fedprivacy.report_sentences import aggregation_of
from fedprivacy.run_directory import write_run_directory

CHECKPOINT = "checkpoint.pt"
#: Keys a resumed run may change: where the data is and which device computes (a run
#: checkpointed on a GPU goes on on a CPU, up to floating-point rounding).
RESUMABLE_ACROSS = frozenset({"data_dir", "device"})
CONFIG = "config.toml"
_FORMAT = 1


def build_training(
    config: TrainConfig,
    dataset: ImageDataset | None = None,
    *,
    training_class: type[FederatedTraining] = FederatedTraining,
    availability: AvailabilityModel | None = None,
    **hooks: Any,
) -> FederatedTraining:
    """Assemble data, partition, model, selector, availability and aggregator of ``config``.

    Parameters
    ----------
    config : TrainConfig
        The run (validated here).
    dataset : ImageDataset, optional
        Already loaded data (else loaded from ``config.data_dir`` / ``$FEDPRIVACY_DATA``).
    training_class : type, optional
        :class:`~fedprivacy.fl.engine.FederatedTraining` or a subclass (a deployment's
        :class:`~fedprivacy.flower.training.DeployedTraining`).
    availability : AvailabilityModel, optional
        Replaces the availability of ``config.dropout`` (a deployment's live nodes).
    **hooks
        Passed to ``training_class`` (``on_aggregate``, a deployment's transport).
    """
    config.validate()
    data = dataset if dataset is not None else load_dataset(config.dataset, config.data_dir)
    partition = make_partition(
        config.partition,
        data.train_y,
        config.users,
        np.random.default_rng([config.seed, 11]),
        beta=config.beta,
        shared=config.shared,
        shards_per_user=config.shards_per_user,
    )
    model = build_model(config.model_name, data.input_shape, data.num_classes, seed=config.seed)
    selector = make_selector(
        config.scheme,
        config.users,
        config.per_round,
        target_privacy=config.target_privacy,
        fairness=config.fairness,
        fairness_rule=config.fairness_rule,
    )
    if availability is None:
        availability = make_availability(
            config.users, config.dropout, np.random.default_rng([config.seed, 12])
        )
    mechanism = config.mechanism()
    aggregator = section_aggregator(
        config,
        per_round=config.per_round,
        seed=config.seed,
        party_noise=mechanism.party_noise,
        encoding=config.encoding,
    )
    if isinstance(aggregator, SecureAggregator):
        aggregator.check_dimension(count_parameters(model))
    training = training_class(
        model=model,
        spec=LocalTrainingSpec(
            epochs=config.local_epochs,
            batch_size=config.batch_size,
            lr=config.local_lr,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
        ),
        dataset=data,
        partition=partition,
        selector=selector,
        availability=availability,
        aggregator=aggregator,
        schedule=LearningRateSchedule(
            config.local_lr, config.local_lr_decay, tuple(config.local_lr_milestones)
        ),
        seed=config.seed,
        eval_every=config.eval_every,
        trainer=config.trainer,
        chunk_size=config.chunk_size,
        device=config.device,
        mechanism=mechanism,
        **hooks,
    )
    if config.epsilon_budget is not None:
        training.budget_selection(config.epsilon_budget, config.target_delta)
    if config.guard is not None:
        training.guard_selection(config.guard, config.guard_target or 2)
    return training


@dataclass
class TrainingResult:
    """A finished (or resumed and finished) run."""

    config: TrainConfig
    training: FederatedTraining
    curve: TWeakCurve | None
    seconds: float
    exposed: list[int] = field(default_factory=list)

    @property
    def records(self) -> list[RoundRecord]:
        """Per-round records."""
        return self.training.records

    @functools.cached_property
    def report(self) -> PrivacyReport:
        """The run's privacy report (server's view and released models), computed once."""
        tr = self.training
        curve = self.curve
        return privacy_report(
            tr.mechanism,
            self.config.target_delta,
            LedgerEpsilons(
                tr.ledger.matrix().astype(bool),
                round_noise=np.array([r.noise_multiplier for r in tr.records], dtype=np.float64),
                wrap_log_probability=np.array(
                    [r.wrap_log_probability for r in tr.records], dtype=np.float64
                ),
            ),
            aggregation=aggregation_of(self.config.secagg, tr.authenticated),
            server_view=None
            if curve is None
            else {
                "t_weak": curve.final,
                "t_strong": t_strong(tr.ledger.matrix()),
                "exposed_users": len(self.exposed),
            },
        )

    def summary(self) -> dict[str, Any]:
        """The ``--json`` output and ``summary.json``."""
        tr = self.training
        base = summarise_records(tr.records)
        card = tr.ledger.cardinalities
        freq = tr.ledger.frequency
        rounds = tr.ledger.rounds
        final = None if self.curve is None else self.curve.final
        out: dict[str, Any] = {
            "dataset": self.config.dataset,
            "data_source": tr.dataset.source,
            "model": self.config.model_name,
            "parameters": count_parameters(tr.model),
            "partition": self.config.partition,
            "scheme": self.config.label,
            "users": self.config.users,
            "per_round": self.config.per_round,
            "rounds": rounds,
            "seed": self.config.seed,
            "aggregation": "secagg" if self.config.secagg else "plaintext",
            "encoding": self.config.encoding,
            "device": tr.device_name,
            "test_accuracy": base["test_accuracy"],
            "test_loss": base["test_loss"],
            "privacy": self.report.to_dict(),
            "t_weak": None if final is None else final.upper,
            "t_weak_lower": None if final is None else final.lower,
            "t_weak_exact": None if final is None else final.exact,
            "exposed_users": len(self.exposed) if self.curve is not None else None,
            "fairness_gap": float((freq.max() - freq.min()) / rounds) if rounds else 0.0,
            "average_cardinality": float(card.mean()) if rounds else 0.0,
            "skipped_rounds": int(np.count_nonzero(card == 0)),
            "aborted_rounds": sum(1 for r in tr.records if r.aborted),
            "clipped_entries": sum(r.clipped_entries for r in tr.records),
            "mean_train_seconds": base["mean_train_seconds"],
            "mean_aggregate_seconds": base["mean_aggregate_seconds"],
            "seconds": self.seconds,
            **self._guard(),
            "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}

    def _guard(self) -> dict[str, Any]:
        """``{"guard": ...}`` and ``{"privacy_filter": ...}`` of a run with them.

        The guard's decisions are those since this process started.
        """
        out: dict[str, Any] = {}
        selector: object = self.training.selector
        while selector is not None:
            if isinstance(selector, PrivacyGuard):
                out["guard"] = guard_summary(selector)
            if isinstance(selector, PrivacyFilter):
                out["privacy_filter"] = filter_summary(selector)
            selector = getattr(selector, "selector", None)
        return out

    @property
    def privacy_filter(self) -> PrivacyFilter | None:
        """The run's privacy filter (``epsilon_budget``), if any."""
        selector: object = self.training.selector
        while selector is not None and not isinstance(selector, PrivacyFilter):
            selector = getattr(selector, "selector", None)
        return selector if isinstance(selector, PrivacyFilter) else None


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
        require_int("stop_after", stop_after_rounds, minimum=1)
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
    once the run has all ``config.rounds`` rounds (unless ``config.metrics`` is ``none``);
    ``started`` is the run's ``time.perf_counter()`` at its start.
    """
    curve = None
    exposed: list[int] = []
    if training.round == config.rounds and config.metrics != "none":
        p = training.ledger.matrix()
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
        f"| fairness gap F | {s['fairness_gap']:.4f} |",
        f"| average cardinality C | {s['average_cardinality']:.3f} |",
        f"| skipped / aborted rounds | {s['skipped_rounds']} / {s['aborted_rounds']} |",
        f"| seconds per round (training / aggregation) | {s['mean_train_seconds']:.3f} / "
        f"{s['mean_aggregate_seconds']:.3f} |",
        f"| total seconds | {s['seconds']:.1f} |",
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
    return f"{privacy['epsilon']:.3g} at {privacy['delta']:g} ({privacy['mechanism']} DP)"


def write_outputs(
    result: TrainingResult, out: Path, extra: Mapping[str, Any] | None = None
) -> list[Path]:
    """Write metrics, summaries, the privacy report, the ledger and plots into ``out``.

    ``extra`` adds (or replaces) summary keys: a deployment's own (:mod:`fedprivacy.flower.run`).
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
