"""The ``train`` and ``reproduce`` subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprivacy.cli.flag_table import FLAGS
from fedprivacy.cli.options import Use, add_options, concept_names, config_from_args
from fedprivacy.errors import ParameterError

if TYPE_CHECKING:
    from fedprivacy.experiments.catalogue import ProgramExperiment
    from fedprivacy.experiments.reproduce import Experiment

#: ``train``'s options, in the order ``--help`` lists them
_TRAIN_OPTIONS = (
    Use("config", help="a TOML file of TrainConfig keys"),
    Use("dataset", help="digits (bundled, default), mnist, cifar10, cifar100"),
    "model",
    "partition",
    "scheme",
    "target_privacy",
    "users",
    "per_round",
    "rounds",
    "seed",
    Use("dropout", help=FLAGS["dropout"].help + " (default 0)"),
    "local_epochs",
    "batch_size",
    "local_lr",
    "local_lr_decay",
    "momentum",
    "beta",
    "shared",
    "update_clip",
    "bits",
    Use(
        "dp",
        help="differential privacy: none (default), central (server-added Gaussian) or "
        "distributed (each party's discrete Gaussian inside --secagg)",
    ),
    Use("noise_multiplier", help="with --dp: noise std >= z * clip on the sum of the updates"),
    Use("clip", help="with --dp: L2 bound of each update (default 1)"),
    Use("delta", help="with --dp: the per-user delta (default 1e-5)"),
    "noise_mode",
    "epsilon_budget",
    "canaries",
    "secagg_degree",
    "protocol_dropout",
    "batch_policy",
    "eval_every",
    "checkpoint_every",
    "trainer",
    "chunk_size",
    "metrics",
    "metrics_time_limit",
    "encoding",
    "device",
    "local_lr_milestones",
    "fairness",
    "guard",
    "guard_target",
    "secagg",
    "data_dir",
    "out",
    "resume",
    "stop_after",
    "json",
    "quiet",
)

#: the TrainConfig fields that ``train`` sets to the option's value as given (the rest are
#: read apart: the milestones are parsed, the switches set only when given, the files)
_FIELDS = concept_names(
    _TRAIN_OPTIONS,
    without=(
        *("config", "local_lr_milestones", "fairness", "secagg", "data_dir"),
        *("out", "resume", "stop_after", "json", "quiet"),
    ),
)


def parse_settings(items: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (values read as TOML, else as strings) for config overrides."""
    import tomllib

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ParameterError("set", f"expected KEY=VALUE, got {item!r}")
        try:
            value: Any = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        out[key.strip()] = value
    return out


def seed_list(text: str | None) -> list[int] | None:
    """``--seeds``: at least one integer (``None``: not given).

    Examples
    --------
    >>> seed_list("0,1"), seed_list(None)
    ([0, 1], None)
    >>> seed_list(" , ")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: --seeds: expected at least one seed, got ' , '
    """
    if text is None:
        return None
    seeds = int_list("--seeds", text)
    if not seeds:
        raise ParameterError("--seeds", f"expected at least one seed, got {text!r}")
    return seeds


def int_list(flag: str, text: str) -> list[int]:
    """The integers of a comma-separated option value.

    Examples
    --------
    >>> int_list("--seeds", "0,1,")
    [0, 1]
    >>> int_list("--seeds", "0,x")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: --seeds: expected comma-separated integers, got '0,x'
    """
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ParameterError(flag, f"expected comma-separated integers, got {text!r}") from None


def _print_err(message: str) -> None:
    print(message, file=sys.stderr)


#: Options that shape one partition only, and that partition.
_PARTITION_OPTIONS = {"beta": "dirichlet", "shared": "data-sharing"}


def _check_given(args: argparse.Namespace, config: Any) -> None:
    """Refuse options given on the command line that this run would not use."""
    for name, partition in _PARTITION_OPTIONS.items():
        if getattr(args, name, None) is not None and config.partition != partition:
            raise ParameterError(
                name, f"applies to --partition {partition}, not {config.partition}"
            )


def cmd_train(
    args: argparse.Namespace,
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> int:
    """Train one configuration (flags override the config file)."""
    from fedprivacy.experiments.training_run import resume_config, run_training
    from fedprivacy.fl.training_config import TrainConfig

    overrides = {name: getattr(args, name) for name in _FIELDS}
    overrides["local_lr_milestones"] = (
        None
        if args.local_lr_milestones is None
        else tuple(int_list("--local-lr-milestones", args.local_lr_milestones))
    )
    for flag in ("fairness", "secagg"):
        if getattr(args, flag):
            overrides[flag] = True
    if args.fairness is not None:  # --fairness [RULE]: a bare flag is the paper's rule
        overrides["fairness_rule"] = args.fairness
    out = args.out
    if args.resume is not None:
        if args.config is not None:
            raise ParameterError("resume", "takes the configuration from the run directory")
        changed = [
            FLAGS["fairness" if k == "fairness_rule" else k].long
            for k, v in overrides.items()
            if v is not None and k != "rounds"
        ]
        if changed:
            raise ParameterError(
                "resume", f"only --rounds may change on resume, not {', '.join(changed)}"
            )
        config = resume_config(args.resume, overrides["rounds"])
        out = args.resume
    else:
        config = config_from_args(TrainConfig, args, (), **overrides)
    config = config.with_overrides(data_dir=args.data_dir).validate()
    _check_given(args, config)
    factory = progress_factory(not args.json and not args.quiet)
    result = run_training(
        config,
        out,
        resume=args.resume is not None,
        progress=factory("training", config.rounds) if factory else None,
        metric_progress=factory("T_weak", config.users) if factory else None,
        stop_after_rounds=args.stop_after,
    )
    summary = result.summary()
    if out is not None:
        summary["run_dir"] = str(out)
    if args.json:
        print(json.dumps(summary))
        return 0
    from fedprivacy.experiments.training_run import summary_markdown

    print(summary_markdown(result))
    if out is not None:
        print(f"Run directory: {out}")
    return 0


def _print_experiment_list(programs: Mapping[str, ProgramExperiment], as_json: bool) -> int:
    """``reproduce list``: every bundled experiment and program with its title (or JSON)."""
    from fedprivacy.experiments.reproduce import experiment_names, load_experiment

    titles = {name: load_experiment(name).title for name in experiment_names()}
    titles.update({name: entry.title for name, entry in sorted(programs.items())})
    if as_json:
        print(json.dumps([{"name": n, "title": t} for n, t in titles.items()]))
        return 0
    for name, title in titles.items():
        print(f"{name:28s} {title}")
    return 0


def _reproduce_program(
    args: argparse.Namespace,
    program: ProgramExperiment,
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> int:
    """Run a program experiment (e.g. a ULDP figure) and print its markdown report."""
    settings = parse_settings(args.set)
    options = {
        "seeds": seed_list(args.seeds),
        "rounds": args.rounds,
        "data_dir": args.data_dir,
        "quiet": args.quiet or args.json,
        "only": None if args.only is None else [s for s in args.only.split(",") if s],
        "settings": settings or None,
        "t0": args.t0,
        "window": args.window,
        "print_config": args.print_config or None,
        "progress": progress_factory(not (args.quiet or args.json)),
    }
    program.check_options(options)
    out = args.out / args.name
    markdown = program.run(out, options)
    if args.json:
        print(json.dumps({"experiment": args.name, "out": str(out)}))
    else:
        print(markdown)
        print(f"Results in {out}")
    return 0


def _check_experiment_name(name: str, programs: Mapping[str, ProgramExperiment]) -> None:
    """Refuse a name that is neither a known experiment nor an experiment TOML file."""
    from fedprivacy.experiments.reproduce import experiment_names

    known = [*experiment_names(), *sorted(programs)]
    if name.endswith(".toml") and not Path(name).is_file():
        raise ParameterError("experiment", f"{name}: no such experiment file")
    if name not in known and not name.endswith(".toml"):
        raise ParameterError(
            "experiment",
            f"unknown experiment {name!r}; the {len(known)} known are {', '.join(known)} "
            "('fedprivacy reproduce list' describes them), or give a path to an experiment .toml",
        )


def _reproduce_attack(
    args: argparse.Namespace,
    experiment: Experiment,
    seeds: list[int],
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> int:
    """Run an attack experiment and print its report (or its JSON list)."""
    from fedprivacy.experiments.training_attack import run_attack_experiment

    outcomes = run_attack_experiment(
        experiment,
        args.out,
        seed=seeds[0],
        t0=args.t0,
        window=args.window,
        data_dir=args.data_dir,
        only=None if args.only is None else [s for s in args.only.split(",") if s],
        overrides=parse_settings(args.set) or None,
        progress_factory=progress_factory(not args.json and not args.quiet),
    )
    report = [{"scheme": o.label, "mean_error": o.mean_error} for o in outcomes]
    if args.json:
        print(json.dumps(report))
    else:
        print((args.out / experiment.name / "attack.md").read_text())
    return 0


def _reproduce_table(
    args: argparse.Namespace,
    experiment: Experiment,
    seeds: list[int],
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> int:
    """Run a training experiment and print its comparison with the paper (or a JSON list)."""
    from fedprivacy.experiments.reproduce import run_experiment

    only = None if args.only is None else [s for s in args.only.split(",") if s]
    factory = progress_factory(not args.json and not args.quiet)
    rows = run_experiment(
        experiment,
        args.out,
        seeds=seeds,
        rounds=args.rounds,
        only=only,
        data_dir=args.data_dir,
        overrides=parse_settings(args.set),
        progress_factory=factory,
        log=None if args.json else _print_err,
    )
    if args.json:
        print(
            json.dumps(
                [
                    {"run": r.run, "scheme": r.label, "accuracy": r.mean, "paper": r.paper_value}
                    for r in rows
                ]
            )
        )
        return 0
    print((args.out / experiment.name / "comparison.md").read_text(), end="")
    print(f"Results in {args.out / experiment.name}")
    return 0


def cmd_reproduce(
    args: argparse.Namespace,
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> int:
    """Run a bundled experiment and print the comparison with the paper."""
    from fedprivacy.experiments.catalogue import program_experiments
    from fedprivacy.experiments.reproduce import load_experiment

    programs = program_experiments()
    if args.name == "list":
        return _print_experiment_list(programs, args.json)
    if args.name in programs:
        return _reproduce_program(args, programs[args.name], progress_factory)
    _check_experiment_name(args.name, programs)
    experiment = load_experiment(args.name)
    if args.print_config:
        for run in experiment.runs:
            print(f"# run {run.name}")
            print(run.config.to_toml())
        return 0
    seeds = seed_list(args.seeds) or [0]
    _refuse_options_of_the_other_kind(args, experiment.kind, seeds)
    if experiment.kind == "attack":
        return _reproduce_attack(args, experiment, seeds, progress_factory)
    return _reproduce_table(args, experiment, seeds, progress_factory)


def _refuse_options_of_the_other_kind(
    args: argparse.Namespace, kind: str, seeds: list[int]
) -> None:
    """An attack experiment runs one seed over its window; a table experiment has no window."""
    if kind == "attack":
        if args.rounds is not None:
            raise ParameterError("--rounds", "an attack experiment's rounds are --t0 and --window")
        if len(seeds) > 1:
            raise ParameterError("--seeds", f"an attack experiment runs one seed, got {seeds}")
        return
    for flag, value in (("--t0", args.t0), ("--window", args.window)):
        if value is not None:
            raise ParameterError(flag, f"applies to attack experiments, not {args.name!r}")


#: ``reproduce``'s options, in the order ``--help`` lists them
_REPRODUCE_OPTIONS = (
    Use("out", default=Path("results/reproduce"), help="output folder (results/reproduce)"),
    "seeds",
    Use("rounds", help="override the rounds (fewer than the paper)"),
    Use(
        "only",
        help="comma-separated run names (ULDP figures: panel letters, or PANEL:METHOD for one "
        "curve, e.g. e:ULDP-AVG; finished curves in --out are reused)",
    ),
    "t0",
    "window",
    "data_dir",
    Use(
        "set",
        help="override a configuration key of every run (repeatable), e.g. --set local_lr=0.03 "
        "--set device=cuda; ULDP figures accept device, max_rows, gradient and eval_every",
    ),
    "print_config",
    Use("json", help="print one JSON list"),
    "quiet",
)


def add_train_parsers(
    sub: Any,
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> None:
    """Add ``train`` and ``reproduce`` to the subcommand parser ``sub``."""
    train = sub.add_parser(
        "train",
        help="federated training with a participant-selection scheme (FedAvg, eq. 2)",
        description="Train a model with FedAvg under partial participation: availability -> "
        "selection -> vectorised local training -> plaintext or secure aggregation -> ledger. "
        "Options override the --config file; the defaults train a small MLP on scikit-learn's "
        "bundled digits (no download).",
    )
    add_options(train, "train", _TRAIN_OPTIONS)
    train.set_defaults(func=lambda a: cmd_train(a, progress_factory))

    rep = sub.add_parser(
        "reproduce",
        help="reproduce a table of the papers ('reproduce list' names them)",
        description="Run every scheme of a bundled experiment (or an experiment TOML file) and "
        "write the comparison with the paper's numbers. Finished runs are reused and "
        "checkpointed runs resumed.",
    )
    rep.add_argument("name", help="experiment name, 'list', or a path to an experiment .toml")
    add_options(rep, "reproduce", _REPRODUCE_OPTIONS)
    rep.set_defaults(func=lambda a: cmd_reproduce(a, progress_factory))
