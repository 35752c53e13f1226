"""The ``simulate`` subcommand: one participant-selection scheme, its privacy and fairness."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprivacy.cli.flags import DEFAULT_FAIRNESS_RULE, positive_seconds, run_directory
from fedprivacy.cli.memory import check_memory

if TYPE_CHECKING:
    from fedprivacy.experiments.selection_run import SelectionConfig


def _dropout(value: str) -> str | float:
    """``--dropout``: a probability, or ``'heterogeneous'``."""
    if value == "heterogeneous":
        return value
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a probability in [0, 1) or 'heterogeneous', got {value!r}"
        ) from None


def _open_reason(config: Any) -> str:
    """Why the T_weak interval is open: the bounds mode, or the search ran out of time."""
    if config.metrics == "bounds":
        return "--metrics bounds: certified bounds, no exact search"
    return "time limit reached; raise --time-limit to narrow it"


def _simulate_config(args: argparse.Namespace) -> SelectionConfig:
    """The validated configuration of the ``simulate`` options, refused if it cannot fit memory."""
    from fedprivacy.experiments.selection_run import SelectionConfig

    config = SelectionConfig(
        scheme=args.scheme,
        users=args.users,
        per_round=args.per_round,
        rounds=args.rounds,
        seed=args.seed,
        target_privacy=args.target_privacy,
        dropout=args.dropout,
        fairness=args.fairness is not None,
        fairness_rule=DEFAULT_FAIRNESS_RULE if args.fairness is None else args.fairness,
        metrics=args.metrics,
        metrics_time_limit=args.metrics_time_limit,
        point_time_limit=min(args.metrics_time_limit, 2.0),
        secagg=args.secagg,
        dimension=args.dimension,
        protocol_dropout=args.protocol_dropout,
        batch_policy=args.batch_policy,
        secagg_degree=args.secagg_degree,
    )
    config.validate()
    check_memory("simulate", config)
    return config


def _print_privacy(config: SelectionConfig, summary: dict[str, object]) -> None:
    """The T_weak, T_strong and exposed-users lines of the report (when metrics were computed)."""
    tw = summary["t_weak"]
    if not isinstance(tw, dict):
        return
    lo, hi = tw["lower"], tw["upper"]
    span = (
        "infinite (nothing aggregated)"
        if lo is None
        else (f"{lo}" if lo == hi else f"in [{lo}, {hi}] ({_open_reason(config)})")
    )
    print(f"  T_weak                    {span}")
    print(f"  paper-code RREF bound     {tw.get('official_rref_upper')}")
    print(f"  T_strong                  {summary['t_strong']}")
    exposed = summary["exposed_users"]
    assert isinstance(exposed, list)
    print(f"  exposed users             {len(exposed)}")


def _print_secagg(summary: dict[str, object]) -> None:
    """The secure-aggregation line of the report (with ``--secagg``)."""
    secure = summary.get("secagg")
    if isinstance(secure, dict):
        print(
            f"  secure aggregation        {secure['rounds_aggregated']} rounds aggregated, "
            f"{secure['rounds_aborted']} aborted ("
            f"{secure['rounds_aborted_for_connectivity']} for connectivity, "
            f"{secure['rounds_shrunk_for_connectivity']} more shrunk to stay connected), "
            f"max |error| {secure['max_abs_error']:.3g}, "
            f"mean {secure['mean_client_seconds'] * 1e3:.2f} ms/client, "
            f"{secure['mean_server_seconds'] * 1e3:.2f} ms/server per round"
        )


def _print_report(config: SelectionConfig, summary: dict[str, object], out: Path | None) -> None:
    """The human-readable report of one ``simulate`` run."""
    print(
        f"{config.label}: N={config.users}, K={config.per_round}, {config.rounds} rounds, "
        f"dropout={config.dropout}"
    )
    print(f"  skipped rounds            {summary['skipped_rounds']}")
    print(f"  average cardinality C     {summary['average_cardinality']:.4f}")
    print(f"  fairness gap F            {summary['fairness_gap']:.4f}")
    _print_privacy(config, summary)
    _print_secagg(summary)
    seconds = summary["seconds"]
    assert isinstance(seconds, dict)
    print(
        "  seconds                   "
        + ", ".join(f"{name} {value:.2f}" for name, value in seconds.items())
    )
    if out:
        print(f"  results in                {out}")


def cmd_simulate(
    args: argparse.Namespace,
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> int:
    """Run one selection scheme and report its metrics.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``simulate`` options.
    progress_factory : callable
        Given whether progress is wanted, a factory of progress callbacks, or None.

    Returns
    -------
    int
        The exit status, 0.
    """
    from fedprivacy.experiments.selection_run import run_selection_experiment, write_outputs

    config = _simulate_config(args)
    factory = progress_factory(not args.json and not args.quiet)
    result = run_selection_experiment(
        config,
        progress=factory("selection", config.rounds) if factory else None,
        metric_progress=factory("T_weak", config.users) if factory else None,
    )
    summary = result.summary()
    if args.out:
        written = write_outputs(result, args.out)
        summary["files"] = [str(p) for p in written]
    if args.json:
        print(json.dumps(summary))
        return 0
    _print_report(config, summary, args.out)
    return 0


def _add_selection_options(sim: argparse.ArgumentParser) -> None:
    """``simulate``: the scheme, the population, dropout, fairness, rounds and seed."""
    sim.add_argument(
        "--scheme",
        required=True,
        choices=["random", "weighted-random", "partition", "multiround"],
        help="participant-selection scheme",
    )
    sim.add_argument("--users", "-N", type=int, required=True, help="number of users N")
    sim.add_argument(
        "--per-round", "-K", type=int, required=True, help="users selected per round K"
    )
    sim.add_argument(
        "--target-privacy",
        "-T",
        type=int,
        default=None,
        help="batch size T of Multi-RoundSecAgg (required for multiround)",
    )
    sim.add_argument(
        "--dropout",
        type=_dropout,
        default=0.0,
        help="per-round dropout probability, or 'heterogeneous' (p_i uniform in "
        "{0.1,...,0.5}); default 0",
    )
    sim.add_argument(
        "--fairness",
        nargs="?",
        const=DEFAULT_FAIRNESS_RULE,
        default=None,
        metavar="RULE",
        help="fairness-aware selection (lambda = 1) for multiround, by RULE: 'paper' (default: "
        "Algorithm 2, a row with the least-served user) or 'authors' (the authors' code: the "
        "row of least total participation)",
    )
    sim.add_argument("--rounds", "-R", type=int, required=True, help="number of rounds R")
    sim.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def _add_metric_options(sim: argparse.ArgumentParser) -> None:
    """``simulate``: how the privacy metric is computed."""
    sim.add_argument(
        "--metrics",
        choices=["exact", "bounds", "none"],
        default="exact",
        help="privacy metric: exact search, fast certified bounds, or none (for very large runs)",
    )
    sim.add_argument(
        "--time-limit",
        dest="metrics_time_limit",
        metavar="TIME_LIMIT",
        type=positive_seconds,
        default=60.0,
        help="seconds for the T_weak curve (default 60)",
    )


def _add_secagg_options(sim: argparse.ArgumentParser) -> None:
    """``simulate``: the real secure aggregation protocol on synthetic updates."""
    sim.add_argument(
        "--secagg",
        action="store_true",
        help="run the real secure aggregation protocol every round on synthetic updates",
    )
    sim.add_argument(
        "--dimension", type=int, default=1000, help="update length with --secagg (default 1000)"
    )
    sim.add_argument(
        "--protocol-dropout",
        type=float,
        default=0.0,
        help="with --secagg: probability that a selected user drops during the protocol, at a "
        "random stage (default 0)",
    )
    sim.add_argument(
        "--batch-policy",
        choices=["atomic", "round", "partial"],
        default=None,
        help="with --secagg: aggregate only whole batches (atomic, default for multiround), the "
        "whole selection or nothing (round), or whoever submitted (partial, default otherwise)",
    )
    sim.add_argument(
        "--secagg-degree",
        type=int,
        default=None,
        help="with --secagg: SecAgg+ neighbours per user (default: complete graph, SecAgg)",
    )


def add_simulate_parser(
    sub: Any,
    progress_factory: Callable[[bool], Callable[[str, int], Callable[[int], None]] | None],
) -> None:
    """Add ``simulate`` to the subcommand parser ``sub``.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The subcommand parser of the ``fedprivacy`` command.
    progress_factory : callable
        Given whether progress is wanted, a factory of progress callbacks, or None.
    """
    sim = sub.add_parser(
        "simulate",
        help="run a participant-selection scheme and measure T, F and C",
        description="Simulate participant selection over many rounds and report the multi-round "
        "privacy T_weak (exact, certified), T_strong, the fairness gap F and the "
        "average cardinality C.",
    )
    _add_selection_options(sim)
    _add_metric_options(sim)
    _add_secagg_options(sim)
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.add_argument(
        "--out",
        type=run_directory,
        default=None,
        help="folder for metrics.csv, summary.json, participation.csv, metrics.png",
    )
    sim.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    sim.set_defaults(func=lambda a: cmd_simulate(a, progress_factory))
