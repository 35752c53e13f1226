"""The ``train`` and ``reproduce`` subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprivacy.cli.flags import DEFAULT_FAIRNESS_RULE, run_directory
from fedprivacy.errors import ParameterError

if TYPE_CHECKING:
    from fedprivacy.experiments.catalogue import ProgramExperiment
    from fedprivacy.experiments.reproduce import Experiment

# TrainConfig field -> its option (the flag is ``--FIELD`` unless "flag" names it), for the
# options that map one to one
_OPTIONS: dict[str, dict[str, Any]] = {
    "dataset": {"help": "digits (bundled, default), mnist, cifar10, cifar100"},
    "model": {"help": "mlp, mnist-cnn, lenet, vgg11 (default: the dataset's)"},
    "partition": {"help": "iid, shards, dirichlet, data-sharing"},
    "scheme": {"help": "random, weighted-random, partition, multiround"},
    "target_privacy": {"type": int, "flags": ("-T",), "help": "T for multiround"},
    "users": {"type": int, "flags": ("-N",), "help": "number of users N"},
    "per_round": {"type": int, "flags": ("-K",), "help": "users selected per round K"},
    "rounds": {"type": int, "flags": ("-R",), "help": "number of rounds"},
    "seed": {"type": int, "help": "random seed"},
    "dropout": {"help": "'heterogeneous' (paper) or a probability in [0, 1)"},
    "local_epochs": {"flag": "--epochs", "type": int, "flags": ("-E",), "help": "local epochs E"},
    "batch_size": {"type": int, "help": "local mini-batch size"},
    "local_lr": {"flag": "--lr", "type": float, "help": "learning rate of local SGD"},
    "local_lr_decay": {
        "flag": "--lr-decay",
        "type": float,
        "help": "factor applied at each milestone",
    },
    "momentum": {"type": float, "help": "momentum of local SGD"},
    "beta": {"type": float, "help": "Dirichlet concentration (partition dirichlet)"},
    "shared": {"type": int, "help": "globally shared samples (partition data-sharing)"},
    "update_clip": {"type": float, "help": "entry-wise clip of weighted updates (fixed point)"},
    "bits": {"type": int, "help": "fixed-point modulus 2^bits of the aggregation"},
    "dp": {
        "help": "differential privacy: none (default), central (server-added Gaussian) or "
        "distributed (each party's discrete Gaussian inside --secagg)"
    },
    "noise_multiplier": {
        "type": float,
        "help": "with --dp: noise std >= Z * clip on the sum of the clipped updates",
    },
    "clip": {"type": float, "help": "with --dp: L2 bound of each update (default 1)"},
    "delta": {"type": float, "help": "with --dp: the per-user delta (default 1e-5)"},
    "secagg_degree": {"type": int, "help": "SecAgg+ neighbours (default: complete graph)"},
    "protocol_dropout": {"type": float, "help": "with --secagg: dropout during the protocol"},
    "batch_policy": {"help": "with --secagg: atomic, round or partial"},
    "eval_every": {"type": int, "help": "evaluate every this many rounds"},
    "checkpoint_every": {"type": int, "help": "checkpoint every this many rounds"},
    "trainer": {"help": "auto (default: loop for CNNs on CPU), vectorised or loop"},
    "chunk_size": {"type": int, "help": "most clients per vectorised call"},
    "metrics": {"help": "T_weak: exact, bounds or none"},
    "metrics_time_limit": {"type": float, "help": "seconds for the T_weak curve"},
    "encoding": {"help": "fixed-point (default; what SecAgg sums) or float (plaintext only)"},
    "device": {"help": "cpu (default), cuda or cuda:N"},
    # a string here; cmd_train reads the rounds
    "local_lr_milestones": {"flag": "--lr-milestones", "help": "comma-separated decay rounds"},
}


def _flag(name: str) -> str:
    """The ``train`` flag of the ``TrainConfig`` field ``name`` (``local_lr``: ``--lr``)."""
    flag: str = _OPTIONS.get(name, {}).get("flag", f"--{name.replace('_', '-')}")
    return flag


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


def cmd_train(
    args: argparse.Namespace,
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> int:
    """Train one configuration (flags override the config file)."""
    from fedprivacy.experiments.training_config import TrainConfig
    from fedprivacy.experiments.training_run import resume_config, run_training

    overrides = {name: getattr(args, name) for name in _OPTIONS}
    overrides["local_lr_milestones"] = (
        None
        if args.local_lr_milestones is None
        else tuple(int_list("--lr-milestones", args.local_lr_milestones))
    )
    for flag in ("fairness", "secagg"):
        if getattr(args, flag):
            overrides[flag] = True
    if args.fairness is not None:  # --fairness [RULE]: a bare flag is the paper's rule
        overrides["fairness_rule"] = args.fairness
    if isinstance(overrides["dropout"], str) and overrides["dropout"] != "heterogeneous":
        try:
            overrides["dropout"] = float(overrides["dropout"])
        except ValueError:
            raise ParameterError("dropout", "must be 'heterogeneous' or a number") from None
    out = args.out
    if args.resume is not None:
        if args.config is not None:
            raise ParameterError("resume", "takes the configuration from the run directory")
        changed = [_flag(k) for k, v in overrides.items() if v is not None and k != "rounds"]
        if changed:
            raise ParameterError(
                "resume", f"only --rounds may change on resume, not {', '.join(changed)}"
            )
        config = resume_config(args.resume, overrides["rounds"])
        out = args.resume
    else:
        base = TrainConfig() if args.config is None else TrainConfig.from_toml(args.config)
        config = base.with_overrides(**overrides)
    config = config.with_overrides(data_dir=args.data_dir).validate()
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
    from fedprivacy.experiments.reproduce import run_attack_experiment

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
    if experiment.kind == "attack":
        return _reproduce_attack(args, experiment, seeds, progress_factory)
    return _reproduce_table(args, experiment, seeds, progress_factory)


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
    train.add_argument("--config", type=Path, default=None, help="a TOML file of TrainConfig keys")
    for name, spec in _OPTIONS.items():
        flag = _flag(name)
        train.add_argument(
            flag,
            *spec.get("flags", ()),
            dest=name,
            metavar=flag[2:].replace("-", "_").upper(),
            type=spec.get("type", str),
            default=None,
            help=spec.get("help"),
        )
    train.add_argument(
        "--fairness",
        nargs="?",
        const=DEFAULT_FAIRNESS_RULE,
        default=None,
        metavar="RULE",
        help="fairness-aware multiround, by RULE: paper (default) or authors",
    )
    train.add_argument(
        "--secagg", action="store_true", help="aggregate with the real SecAgg protocol"
    )
    train.add_argument("--data-dir", default=None, help="data folder (else $FEDPRIVACY_DATA)")
    train.add_argument("--out", type=run_directory, default=None, help="run directory")
    train.add_argument(
        "--resume", type=Path, default=None, help="continue the run in this directory"
    )
    train.add_argument(
        "--stop-after", type=int, default=None, help="stop after this many rounds (checkpointed)"
    )
    train.add_argument("--json", action="store_true", help="print one JSON object")
    train.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    train.set_defaults(func=lambda a: cmd_train(a, progress_factory))

    rep = sub.add_parser(
        "reproduce",
        help="reproduce a table of the papers ('reproduce list' names them)",
        description="Run every scheme of a bundled experiment (or an experiment TOML file) and "
        "write the comparison with the paper's numbers. Finished runs are reused and "
        "checkpointed runs resumed.",
    )
    rep.add_argument("name", help="experiment name, 'list', or a path to an experiment .toml")
    rep.add_argument(
        "--out", type=run_directory, default=Path("results/reproduce"), help="output folder"
    )
    rep.add_argument("--seeds", default=None, help="comma-separated seeds (default 0)")
    rep.add_argument(
        "--rounds", type=int, default=None, help="override the rounds (fewer than the paper)"
    )
    rep.add_argument(
        "--only",
        default=None,
        help="comma-separated run names (ULDP figures: panel letters, or PANEL:METHOD for one "
        "curve, e.g. e:ULDP-AVG; finished curves in --out are reused)",
    )
    rep.add_argument("--t0", type=int, default=None, help="attack experiments: first round")
    rep.add_argument("--window", type=int, default=None, help="attack experiments: rounds")
    rep.add_argument("--data-dir", default=None, help="data folder (else $FEDPRIVACY_DATA)")
    rep.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a configuration key of every run (repeatable), e.g. --set local_lr=0.03 "
        "--set device=cuda; ULDP figures accept device, max_rows and eval_every",
    )
    rep.add_argument("--print-config", action="store_true", help="print the runs' TOML and exit")
    rep.add_argument("--json", action="store_true", help="print one JSON list")
    rep.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    rep.set_defaults(func=lambda a: cmd_reproduce(a, progress_factory))
