"""The ``simulate`` subcommand: one participant-selection scheme, its privacy and fairness."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprivacy.cli.flag_table import FLAGS
from fedprivacy.cli.flags import DEFAULT_FAIRNESS_RULE
from fedprivacy.cli.memory import check_memory
from fedprivacy.cli.options import Use, add_options

if TYPE_CHECKING:
    from fedprivacy.experiments.selection_run import SelectionConfig


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
        guard=args.guard,
        guard_target=args.guard_target,
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


def _print_guard(summary: dict[str, object]) -> None:
    """The guard's line of the report (with ``--guard``)."""
    guard = summary.get("guard")
    if isinstance(guard, dict):
        first = guard["first_round_changed"]
        print(
            f"  guard ({guard['mode']}, T_weak >= {guard['target']})  "
            f"{guard['rounds_changed']} rounds changed, {guard['rounds_refused']} refused"
            + ("" if first is None else f", the first at round {first}")
        )


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
    _print_guard(summary)
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
    from fedprivacy.experiments.selection_outputs import write_outputs
    from fedprivacy.experiments.selection_run import run_selection_experiment

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


#: ``simulate``'s options, in the order ``--help`` lists them
_OPTIONS = (
    Use("scheme", required=True),
    Use("users", required=True),
    Use("per_round", required=True),
    "target_privacy",
    Use("dropout", default=0.0, help=FLAGS["dropout"].help + "; default 0"),
    "fairness",
    Use("rounds", required=True),
    "guard",
    "guard_target",
    Use("seed", default=0),
    Use("metrics", default="exact"),
    Use("metrics_time_limit", default=60.0, help="seconds for the T_weak curve (default 60)"),
    Use(
        "secagg",
        help="run the real secure aggregation protocol every round on synthetic updates",
    ),
    Use("dimension", default=1000),
    Use("protocol_dropout", default=0.0),
    "batch_policy",
    "secagg_degree",
    "json",
    Use("out", help="folder for metrics.csv, summary.json, participation.csv, metrics.png"),
    "quiet",
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
    add_options(sim, "simulate", _OPTIONS)
    sim.set_defaults(func=lambda a: cmd_simulate(a, progress_factory))
