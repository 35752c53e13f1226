"""``fedprivacy reproduce NAME``: the paper's tables as sets of training runs.

Each experiment is a TOML file in ``fedprivacy/experiments/configs/``: a ``[base]`` training
configuration (flat, or grouped in sections such as ``[base.training]``), one ``[[runs]]`` entry
per scheme (with the paper's value when it reports one) whose keys override the base's, a title
and the paper's source. Runs are written to ``OUT/NAME/RUN-seedS``; a run that finished is
reused and one with a checkpoint is resumed, so a long reproduction can be done in pieces.
"""

from __future__ import annotations

import csv
import io
import json
import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from fedprivacy.data.images import ImageDataset, load_dataset
from fedprivacy.dp.accountants import AccountantKind
from fedprivacy.dp.per_user import per_user_epsilons_by_round
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.training_plots import (
    plot_accuracy_comparison,
    plot_privacy_comparison,
)
from fedprivacy.experiments.training_run import CHECKPOINT, CONFIG, run_training
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.fl.training_config import TrainConfig


@dataclass(frozen=True)
class ExperimentRun:
    """One scheme of an experiment."""

    name: str
    config: TrainConfig
    paper_value: float | None


@dataclass(frozen=True)
class Experiment:
    """A named reproduction: several runs that differ in the scheme."""

    name: str
    title: str
    paper: str
    note: str
    runs: tuple[ExperimentRun, ...]
    kind: str = "table"  # "table": compare accuracies; "attack": Appendix G.2 reconstruction
    t0: int = 0
    window: int = 0


def experiment_names() -> list[str]:
    """Names of the bundled experiments."""
    folder = resources.files("fedprivacy.experiments") / "configs"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def parse_experiment(name: str, text: str) -> Experiment:
    """Parse an experiment file (see the module docstring)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError("experiment", f"{name} is not valid TOML: {exc}") from None
    base = dict(data.get("base", {}))
    runs = []
    for entry in data.get("runs", []):
        entry = dict(entry)
        run_name = str(entry.pop("name"))
        paper_value = entry.pop("paper_value", None)
        config = TrainConfig.from_mapping(base).with_settings(entry).validate()
        runs.append(ExperimentRun(run_name, config, None if paper_value is None else paper_value))
    if not runs:
        raise ParameterError("experiment", f"{name} has no [[runs]]")
    kind = str(data.get("kind", "table"))
    if kind not in ("table", "attack"):
        raise ParameterError("experiment", f"{name}: kind must be 'table' or 'attack'")
    return Experiment(
        name,
        str(data.get("title", name)),
        str(data.get("paper", "")),
        str(data.get("note", "")),
        tuple(runs),
        kind,
        int(data.get("t0", 0)),
        int(data.get("window", 0)),
    )


def load_experiment(name: str) -> Experiment:
    """A bundled experiment by name, or a path to an experiment TOML file."""
    path = Path(name)
    if path.suffix == ".toml" and path.is_file():
        try:
            return parse_experiment(path.stem, path.read_text())
        except ParameterError as exc:  # the message names the file, not only its stem
            raise ParameterError(exc.name, f"{path}: {str(exc)[len(exc.name) + 2 :]}") from None
    if name not in experiment_names():
        raise ParameterError(
            "experiment", f"unknown experiment {name!r}; known: {', '.join(experiment_names())}"
        )
    folder = resources.files("fedprivacy.experiments") / "configs"
    return parse_experiment(name, (folder / f"{name}.toml").read_text())


@dataclass
class ReproductionRow:
    """One run of a reproduction, as reported."""

    run: str
    label: str
    seeds: list[int]
    accuracies: list[float]
    paper_value: float | None
    rounds: int
    t_weak: list[int | None] = field(default_factory=list)
    average_cardinality: list[float] = field(default_factory=list)
    fairness_gap: list[float] = field(default_factory=list)
    exposed_users: list[int | None] = field(default_factory=list)
    privacy: list[dict[str, Any]] = field(default_factory=list)  # the runs' privacy objects
    epsilon_hat: list[dict[str, Any] | None] = field(default_factory=list)  # with canaries

    @property
    def has_dp(self) -> bool:
        """Whether the runs state an epsilon."""
        return any(p.get("epsilon") is not None for p in self.privacy)

    @property
    def mean(self) -> float:
        """Mean accuracy in percent over the seeds."""
        return 100 * float(np.mean(self.accuracies)) if self.accuracies else math.nan

    @property
    def std(self) -> float:
        """Sample standard deviation in percent (0 for one seed)."""
        return 100 * float(np.std(self.accuracies, ddof=1)) if len(self.accuracies) > 1 else 0.0

    def add(self, seed: int, summary: Mapping[str, Any]) -> None:
        """Add one seed's run, from its ``summary.json``."""
        self.seeds.append(seed)
        self.accuracies.append(float(summary["test_accuracy"]))
        self.t_weak.append(summary.get("t_weak"))
        self.average_cardinality.append(float(summary["average_cardinality"]))
        self.fairness_gap.append(float(summary["fairness_gap"]))
        self.exposed_users.append(summary.get("exposed_users"))
        self.privacy.append(dict(summary.get("privacy") or {}))
        self.epsilon_hat.append(summary.get("epsilon_hat"))

    def to_dict(self) -> dict[str, Any]:
        """The row in ``comparison.json``."""
        return {
            "run": self.run,
            "scheme": self.label,
            "accuracy_mean": self.mean,
            "accuracy_std": self.std,
            "seeds": self.seeds,
            "rounds": self.rounds,
            "paper": self.paper_value,
            "t_weak": self.t_weak,
            "average_cardinality": self.average_cardinality,
            "fairness_gap": self.fairness_gap,
            "exposed_users": self.exposed_users,
            "privacy": self.privacy,
            "epsilon_hat": self.epsilon_hat,
        }


def checked_overrides(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate ``--set`` keys and coerce their values as a config file would."""
    if not overrides:
        return {}
    probe = TrainConfig.from_mapping(dict(overrides))  # unknown keys and types are errors here
    return {k.replace("-", "_"): getattr(probe, k.replace("-", "_")) for k in overrides}


def _finished(run_dir: Path, config: TrainConfig) -> dict[str, Any] | None:
    summary = run_dir / "summary.json"
    if not summary.is_file():
        return None
    stored = run_dir / CONFIG
    if stored.is_file():
        diff = config.differences(
            TrainConfig.from_stored_toml(stored), ignore=("data_dir", "rounds")
        )
        if diff:
            raise ParameterError(
                "out",
                f"{run_dir} holds a run with a different configuration ({', '.join(diff)}); "
                "use another --out for these settings",
            )
    data: dict[str, Any] = json.loads(summary.read_text())
    return data if data.get("rounds") == config.rounds else None


def run_experiment(
    experiment: Experiment,
    out: Path,
    *,
    seeds: Sequence[int] = (0,),
    rounds: int | None = None,
    only: Sequence[str] | None = None,
    data_dir: str | None = None,
    progress_factory: Callable[[str, int], Callable[[int], None]] | None = None,
    log: Callable[[str], None] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> list[ReproductionRow]:
    """Run (or reuse, or resume) every run of ``experiment`` and write the comparison.

    ``overrides`` replaces configuration keys of every run (``reproduce --set KEY=VALUE``).
    """
    changes = checked_overrides(overrides)
    selected = [r for r in experiment.runs if only is None or r.name in only]
    if only is not None:
        unknown = set(only) - {r.name for r in experiment.runs}
        if unknown:
            raise ParameterError("only", f"unknown runs {sorted(unknown)} in {experiment.name}")
    runner = _SeedRuns(experiment.name, out, data_dir, progress_factory, log)
    rows: list[ReproductionRow] = []
    for run in selected:
        row: ReproductionRow | None = None
        for seed in seeds:
            config = run.config.with_overrides(**changes).with_overrides(
                seed=seed, rounds=rounds, data_dir=data_dir
            )
            summary = runner.summary(run.name, config, curves=seed == seeds[0])
            if row is None:
                row = ReproductionRow(
                    run.name, config.label, [], [], run.paper_value, config.rounds
                )
            row.add(seed, summary)
        assert row is not None
        rows.append(row)
    _write_comparison(out / experiment.name, experiment, rows, runner)
    return rows


@dataclass
class _SeedRuns:
    """Each seed's run of a reproduction: reused when finished, else run or resumed."""

    experiment: str
    out: Path
    data_dir: str | None
    progress_factory: Callable[[str, int], Callable[[int], None]] | None
    log: Callable[[str], None] | None
    dataset: ImageDataset | None = None
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    privacy_curves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def summary(self, name: str, config: TrainConfig, *, curves: bool) -> dict[str, Any]:
        """The run's ``summary.json`` (running it first if needed); its curves if asked."""
        config.validate()
        run_dir = self.out / self.experiment / f"{name}-seed{config.seed}"
        summary = _finished(run_dir, config)
        if summary is None:
            if self.dataset is None:
                self.dataset = load_dataset(config.dataset, self.data_dir)
            resume = (run_dir / CHECKPOINT).is_file()
            if self.log is not None:
                state = "resuming" if resume else "running"
                self.log(f"{self.experiment}/{name} seed {config.seed}: {state}")
            factory = self.progress_factory
            bar = None if factory is None else factory(name, config.rounds)
            result = run_training(
                config, run_dir, resume=resume, dataset=self.dataset, progress=bar
            )
            summary = result.summary()
        if curves:
            self.curves[config.label] = _curve(run_dir / "metrics.csv")
            if config.dp != "none":
                self.privacy_curves[config.label] = _privacy_curves(
                    run_dir, config.target_delta, config.mechanism().accountant
                )
        return summary


def _write_comparison(
    folder: Path, experiment: Experiment, rows: list[ReproductionRow], runs: _SeedRuns
) -> None:
    """``comparison.md/csv/json``, ``accuracy.png`` and, with DP, ``privacy.png``."""
    folder.mkdir(parents=True, exist_ok=True)
    source = "" if runs.dataset is None else runs.dataset.source
    atomic_write_text(folder / "comparison.md", comparison_markdown(experiment, rows, source))
    atomic_write_text(folder / "comparison.csv", comparison_csv(rows))
    atomic_write_json(folder / "comparison.json", [r.to_dict() for r in rows])
    plot_accuracy_comparison(runs.curves, folder / "accuracy.png", experiment.title)
    if runs.privacy_curves:
        delta = experiment.runs[0].config.target_delta
        plot_privacy_comparison(
            runs.curves, runs.privacy_curves, folder / "privacy.png", experiment.title, delta=delta
        )


def _curve(metrics: Path) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    with metrics.open() as fh:
        for rec in csv.DictReader(fh):
            if rec["test_accuracy"]:
                xs.append(int(rec["round"]) + 1)
                ys.append(float(rec["test_accuracy"]))
    return np.asarray(xs), np.asarray(ys)


def _privacy_curves(
    run_dir: Path, delta: float, accountant: AccountantKind
) -> tuple[np.ndarray, np.ndarray]:
    """Per-user epsilons and T_weak per round.

    The epsilons are redone from the ledger and each round's noise by the accountant of the
    run's mechanism, as its report does.
    """
    participation = np.loadtxt(
        run_dir / "participation.csv", delimiter=",", skiprows=1, ndmin=2
    ).astype(bool)
    noise, t_weak = [], []
    with (run_dir / "metrics.csv").open() as fh:
        for rec in csv.DictReader(fh):
            noise.append(float(rec["noise_multiplier"] or "nan"))
            t_weak.append(float(rec["t_weak_upper"] or "nan"))
    eps = per_user_epsilons_by_round(participation, np.asarray(noise), delta, accountant)
    return eps, np.asarray(t_weak)


def comparison_markdown(
    experiment: Experiment, rows: Sequence[ReproductionRow], source: str
) -> str:
    """The reproduced numbers next to the paper's."""
    lines = [
        f"# {experiment.title}",
        "",
        f"Paper: {experiment.paper}. {experiment.note}.",
        f"Data: {source or 'see the run directories'}.",
        "",
        "| scheme | rounds | seeds | test accuracy (ours) | paper | T_weak | C | F |",
        "|---|---|---|---|---|---|---|---|",
    ]
    dp = any(r.has_dp for r in rows)
    canaries = any(e is not None for r in rows for e in r.epsilon_hat)
    if dp:
        lines[-2] += (
            " exposed users | per-user epsilon: max (median) | epsilon, models' observers |"
            " noise multiplier |"
        )
        lines[-1] += "---|---|---|---|"
    if canaries:
        lines[-2] += " epsilon_hat (interval) |"
        lines[-1] += "---|"
    for r in rows:
        paper = "-" if r.paper_value is None else f"{r.paper_value:.2f} %"
        ours = f"{r.mean:.2f} %" + (f" ± {r.std:.2f}" if len(r.seeds) > 1 else "")
        t = ", ".join("-" if v is None else str(v) for v in r.t_weak)
        line = (
            f"| {r.label} | {r.rounds} | {','.join(map(str, r.seeds))} | {ours} | {paper} | {t} | "
            f"{np.mean(r.average_cardinality):.2f} | {np.mean(r.fairness_gap):.3f} |"
        )
        if dp:
            line += f" {', '.join('-' if v is None else str(v) for v in r.exposed_users)} |"
            eps = _per_seed(r.privacy, "per_user_epsilon", "{max:.3g} ({median:.3g})")
            released = _per_seed(r.privacy, "epsilon_released", "{:.3g}")
            noise = _per_seed(r.privacy, "accounted_noise_multiplier", "{min:.3g} to {max:.3g}")
            line += f" {eps} | {released} | {noise} |"
        if canaries:
            hats = [{"e": e} for e in r.epsilon_hat]  # None where a run had no canaries
            line += " " + _per_seed(hats, "e", "{epsilon:.3g} ({low:.3g}-{high:.3g})") + " |"
        lines.append(line)
    if dp:
        delta = next(p["delta"] for r in rows for p in r.privacy if p.get("delta") is not None)
        lines += [
            "",
            f"Epsilon at delta = {delta:g} per user, each composing only the rounds it was "
            "aggregated in (against the server); against the models' observers, who do not know "
            "which users are in a batch: random allocation over the batch schedule (the "
            "server's where there are no batches); noise multiplier: of the released aggregates "
            "(distributed DP holds "
            "the noise of the parties really aggregated, at least the target). T_weak: the "
            "fewest users in any sum the server can compute from all its aggregates."
            + (
                " epsilon_hat: the canaries' empirical epsilon of the final model (one-shot "
                "estimation, a 95 % bootstrap interval), set against the models' observers' bound."
                if canaries
                else ""
            ),
        ]
    return "\n".join(lines) + "\n"


def _per_seed(privacy: Sequence[dict[str, Any]], key: str, template: str) -> str:
    """``template`` filled from each seed's ``privacy[key]`` (``-`` where absent), comma-joined.

    A mapping fills the template's names, anything else its one placeholder.
    """
    values = [p.get(key) for p in privacy]
    return ", ".join(
        "-" if v is None else template.format(**v) if isinstance(v, Mapping) else template.format(v)
        for v in values
    )


def comparison_csv(rows: Sequence[ReproductionRow]) -> str:
    """One line per run: accuracy (ours, paper) and the participation metrics."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run", "scheme", "rounds", "seeds", "accuracy_mean", "accuracy_std", "paper"])
    for r in rows:
        w.writerow(
            [
                r.run,
                r.label,
                r.rounds,
                " ".join(map(str, r.seeds)),
                f"{r.mean:.3f}",
                f"{r.std:.3f}",
                "" if r.paper_value is None else r.paper_value,
            ]
        )
    return buf.getvalue()
