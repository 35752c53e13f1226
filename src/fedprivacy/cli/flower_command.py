"""``flower``: ``deploy`` (FedAvg on user nodes), ``cross-silo`` (ULDP-FL on silos), ``app``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fedprivacy.cli.flags import run_directory
from fedprivacy.cli.options import Use, add_options, config_from_args
from fedprivacy.errors import ParameterError


def _progress(event: dict[str, Any]) -> None:
    kind = event.get("event")
    r = event.get("round")
    if kind == "stage":
        took = f"{event['seconds']:.1f} s"
        if event.get("joint") and r is not None:
            took = f"with round {int(r) - 1}'s unmask"
        print(
            f"round {r}: {event['stage']:<9} {event['answered']}/{event['asked']} replied ({took})",
            file=sys.stderr,
        )
    elif kind == "round":
        status = f"aborted: {event['aborted']}" if event["aborted"] else "aggregated"
        sel, agg = (_users(event[k]) for k in ("selected", "aggregated"))
        print(
            f"round {r}: selected {sel} -> {agg} ({status})",
            file=sys.stderr,
        )
    elif kind == "server_view":
        from fedprivacy.participation.incremental import describe_view

        fields = ("t_weak_lower", "t_weak_upper", "t_strong", "exposed_users")
        view = describe_view(*(event[f] for f in fields))
        print(f"round {r}: the server's view: {view}", file=sys.stderr)
    elif kind in ("no_reply", "rejected", "node_refused", "paused", "killed", "bad_share"):
        extra = f" {event['error']}: {event['detail']}" if "error" in event else ""
        who = f" user {event['user']}" if "user" in event else ""
        print(f"round {r}: {event.get('stage')}{who} {kind}{extra}", file=sys.stderr)


def _users(users: list[int]) -> str:
    return str(users) if len(users) <= 12 else f"{len(users)} users"


def _replays(items: list[str] | None, option: str = "--replay") -> dict[int | None, int]:
    """``["U@R", ...]`` -> ``{U: R}`` (``*``: None); :class:`ParameterError` naming ``option``."""
    out: dict[int | None, int] = {}
    for item in items or []:
        user, sep, r = item.partition("@")
        try:
            out[None if user == "*" else int(user)] = int(r)
        except ValueError:
            raise ParameterError(option, f"must be USER@ROUND, got {item!r}") from None
        if not sep:
            raise ParameterError(option, f"must be USER@ROUND, got {item!r}")
    return out


def _deploy(
    args: argparse.Namespace, config: Any, supernodes: int, data_dir: str | None, rounds: range
) -> dict[str, Any]:
    """:func:`~fedprivacy.flower.deploy.deploy.deploy` with the options both actions share.

    ``rounds`` are the run's round numbers as its exchanges count them (for the faults' check).
    """
    from fedprivacy.flower.deploy.deploy import FaultPlan, deploy, terminate_as_interrupt

    faults = FaultPlan(
        kill=None if args.kill is None else FaultPlan.parse_kill(args.kill),
        replay=_replays(args.replay),
        badshare=_replays(getattr(args, "bad_share", None), "--bad-share"),
        forge=args.forge,
        rerun=getattr(args, "rerun", False),
    )
    faults.check(supernodes, rounds)
    with terminate_as_interrupt():
        return deploy(
            config,
            supernodes,
            args.out,
            data_dir=data_dir,
            tls=args.tls,
            stage_timeout=args.stage_timeout,
            faults=faults,
            simulation=args.simulation,
            node_auth=args.node_auth,
            overlap_rounds=getattr(args, "overlap_rounds", False),
            key_rounds=getattr(args, "key_rounds", 1),
            on_event=None if args.json or args.quiet else _progress,
        )


def cmd_deploy(args: argparse.Namespace) -> int:
    """Run a configuration on a local SuperLink and SuperNodes; print the summary."""
    from fedprivacy.fl.training_config import TrainConfig

    n = args.users
    if n < 3:
        raise ParameterError("--users", f"must be at least 3, got {n}")
    names = ("rounds", "scheme", "per_round", "target_privacy", "dp", "noise_multiplier", "clip")
    config = config_from_args(
        TrainConfig,
        args,
        (*names, "noise_mode", "seed"),
        users=n,
        secagg=True if args.secagg else None,
        dropout=0.0,
        trainer="loop",
    )
    per_round = config.per_round if args.per_round is not None else min(config.per_round, n)
    eval_every = min(config.eval_every, config.rounds)
    config = config.with_overrides(per_round=per_round, eval_every=eval_every).validate()
    summary = _deploy(args, config, n, None, range(config.rounds))
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    err = summary["max_abs_error_vs_simulation"]
    print(
        f"{summary['rounds_aggregated']} of {summary['rounds']} rounds aggregated, "
        f"{summary['rounds_aborted']} aborted, {summary['supernodes']} SuperNodes, "
        f"{summary['engine']}, TLS {'on' if summary['tls'] else 'off'}, node authentication "
        f"{'on' if summary['node_auth'] else 'off'}; "
        f"{summary['seconds_per_round']:.1f} s a round"
    )
    print(
        "max |aggregate - in-process pipeline| = "
        + ("n/a (nothing aggregated)" if err is None else f"{err:.3g}")
    )
    if "rerun" in summary:
        again = summary["rerun"]
        print(
            f"Rerun on the same SuperNodes: {again['rounds_aggregated']} rounds aggregated, "
            f"{again['rounds_aborted']} aborted ({Path(args.out) / 'rerun'})"
        )
    print((Path(args.out) / "privacy.md").read_text())
    print(f"Run directory: {args.out} (participation log: {summary['participation']})")
    return 0


def cmd_cross_silo(args: argparse.Namespace) -> int:
    """Run a ``-w`` ULDP-FL method on a local deployment of one SuperNode per silo."""
    from fedprivacy.flower.deploy.deploy_tasks import UldpTask
    from fedprivacy.uldp.config import UldpConfig

    names = ("dataset", "method", "users", "rounds", "noise_multiplier", "seed", "secure_key_bits")
    config = config_from_args(
        UldpConfig, args, names, insecure_test_keys=True if args.insecure_test_keys else None
    )
    if args.config is None and args.method is None:
        config = config.with_overrides(method="ULDP-AVG-w")
    data_dir = None if args.data_dir is None else str(args.data_dir)
    task = UldpTask(config, data_dir)
    # Protocol 1's setup is exchange round 0, its rounds 1..R
    rounds = range(task.config.rounds + 1)
    summary = _deploy(args, task.config, task.supernodes, data_dir, rounds)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    err = summary["max_abs_error_vs_simulation"]
    print(
        f"{summary['method']} on {summary['silos']} silos ({summary['dataset']}, "
        f"{summary['users']} users): {summary['rounds_aggregated']} of {summary['rounds']} "
        f"rounds aggregated, {summary['rounds_aborted']} aborted, {summary['engine']}, TLS "
        f"{'on' if summary['tls'] else 'off'}; {summary['seconds_per_round']:.1f} s a round"
    )
    print(
        "aggregate - in-process plaintext sum: "
        + (
            "n/a (nothing aggregated)"
            if err is None
            else f"max {err:.3g}, std {summary['deviation_std']:.3g} (the silos' noise: "
            f"std {summary['noise_std_expected']:.3g} expected)"
        )
    )
    print((Path(args.out) / "privacy.md").read_text())
    print(f"Run directory: {args.out} (participation log: {summary['participation']})")
    return 0


def _add_cross_silo_parser(fsub: Any) -> None:
    cs = fsub.add_parser(
        "cross-silo",
        help="ULDP-FL with the private weighting protocol: one SuperNode per silo",
        description="Start a SuperLink and one SuperNode per silo on 127.0.0.1 (TLS by "
        "default), run a -w ULDP-FL method (ULDP-AVG-w by default) with Protocol 1's setup and "
        "rounds as Flower messages, compare every round's aggregate with the same sum computed "
        "in process, and stop every process started. Data: --data-dir or $FEDPRIVACY_DATA.",
    )
    add_options(
        cs,
        "flower cross-silo",
        (
            Use("dataset", help="heart_disease (default), tcga_brca, ..."),
            Use("method", help="ULDP-AVG-w (default), -AVG-ws, -SGD-w(s)"),
            Use("users", help="users (default 100)"),
            Use("rounds", default=3, help="rounds (default 3)"),
            Use("noise_multiplier", help="noise multiplier sigma (default 5)"),
            "seed",
            "secure_key_bits",
            "insecure_test_keys",
            "data_dir",
            Use("config", help="a TOML file of UldpConfig keys"),
            "tls",
            "node_auth",
            "simulation",
            Use("stage_timeout", default=120.0, help="seconds a stage waits (120)"),
            Use(
                "kill",
                metavar="S@R:silo-round",
                help="fault injection: kill silo S's SuperNode before round R's exchange",
            ),
            Use("replay", metavar="S@R", help="silo S replays a message in round R"),
            Use(
                "forge",
                help="fault injection, a lying server: parameters it proposes (sigma, clip, "
                "key_bits, ...): every silo must refuse them",
            ),
            Use("out", default=Path("results/flower-silos")),
            "json",
            Use("quiet", help="no progress lines"),
        ),
    )
    cs.set_defaults(func=cmd_cross_silo)


def cmd_app(args: argparse.Namespace) -> int:
    """Write the Flower App directory (its pyproject.toml) for ``flwr run``."""
    from fedprivacy.files import atomic_write_text
    from fedprivacy.flower.deploy.apps import app_pyproject

    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / "pyproject.toml"
    atomic_write_text(path, app_pyproject())
    if args.json:
        print(json.dumps({"app": str(args.dir), "files": [str(path)]}))
    elif not args.quiet:
        print(f"wrote {path}; run it with: flwr run {args.dir} <superlink>")
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Write node keys, the roster and each node's policy for nodes on this machine."""
    from fedprivacy.flower.nodes.operator import write_federation

    if args.users < 3:
        raise ParameterError("--users", f"must be at least 3, got {args.users}")
    roster, policies = write_federation(args.dir, args.users)
    if args.json:
        print(json.dumps({"roster": str(roster), "policies": str(policies)}))
    elif not args.quiet:
        print(
            f"wrote {args.users} node keys, {roster} and one policy per node in {policies}\n"
            "run a Flower app with node authentication on Flower's simulation runtime:\n"
            f"  FEDPRIVACY_POLICY_DIR={policies} flwr run APP --run-config "
            f"'roster=\"{roster}\"'"
        )
    return 0


#: ``flower deploy``'s options, in the order ``--help`` lists them
_DEPLOY_OPTIONS = (
    Use("users", default=6, help="users, one SuperNode each (default 6)"),
    Use("rounds", default=3, help="rounds (default 3)"),
    Use("scheme", default="random", help="participant-selection scheme (default random)"),
    Use("per_round", help="users per round (4)"),
    "target_privacy",
    Use("secagg", help="our SecAgg over the Message API"),
    Use("dp", help="none (default), central or distributed"),
    Use("noise_multiplier", help="with --dp"),
    Use("clip", help="with --dp: L2 bound (default 1)"),
    Use(
        "noise_mode",
        help="with --dp distributed: over-provisioned (default) or exact (needs "
        "node authentication, for the consistency check)",
    ),
    "seed",
    Use("config", help="a TOML file of TrainConfig keys"),
    "tls",
    Use(
        "node_auth",
        help="SuperNode authentication: only the nodes whose keys were registered may join, "
        "each signing its claim to its user (default: on, off with --simulation)",
    ),
    "simulation",
    Use("overlap_rounds", help="with --secagg: three exchanges a round instead of four"),
    Use(
        "key_rounds",
        help="with --secagg: each node masks up to N rounds with one pair of keys (1)",
    ),
    Use("stage_timeout", default=60.0, help="seconds a stage waits for replies (60)"),
    Use(
        "kill",
        metavar="U@R:STAGE",
        help="fault injection: kill user U's SuperNode (*: the last user asked) before STAGE "
        "(advertise, share, mask, unmask) of round R",
    ),
    Use("replay", metavar="U@R"),
    "bad_share",
    Use(
        "forge",
        help="fault injection, a lying server: parameters it proposes instead of the "
        "configuration's (noise, threshold, degree, clip, noise_multiplier, plaintext, repeat, "
        "partial, keys, model, graph; ';' separates rounds in turn): every node must refuse "
        "them",
    ),
    "rerun",
    Use("out", default=Path("results/flower")),
    "json",
    Use("quiet", help="no progress lines"),
)


def _add_deploy_parser(fsub: Any) -> None:
    """Add ``flower deploy`` to the ``flower`` subcommand parser ``fsub``."""
    dep = fsub.add_parser(
        "deploy",
        help="start a SuperLink and N SuperNodes on 127.0.0.1 and run the app with flwr run",
        description="Start a SuperLink and one SuperNode per user on 127.0.0.1 (TLS with a fresh "
        "CA by default), run the training with `flwr run`, stream progress, collect the "
        "participation log and the privacy report, compare every aggregate with the in-process "
        "pipeline, and stop every process started (also on Ctrl-C or failure).",
    )
    add_options(dep, "flower deploy", _DEPLOY_OPTIONS)
    dep.set_defaults(func=cmd_deploy)


def _add_app_parser(fsub: Any) -> None:
    """Add ``flower app`` to the ``flower`` subcommand parser ``fsub``."""
    app = fsub.add_parser(
        "app",
        help="write the Flower App directory for flwr run (SuperNodes on other machines)",
        description="Write DIR/pyproject.toml, a Flower App whose components are fedprivacy's "
        "ServerApp and ClientApp; every machine needs fedprivacy[flower] installed.",
    )
    app.add_argument("dir", type=run_directory, help="the app directory")
    add_options(app, "flower app", ("json", Use("quiet", help="print nothing")))
    app.set_defaults(func=cmd_app)


def _add_keys_parser(fsub: Any) -> None:
    """Add ``flower keys`` to the ``flower`` subcommand parser ``fsub``."""
    keys = fsub.add_parser(
        "keys",
        help="write node keys, the roster and each node's policy (nodes on this machine)",
        description="Write DIR/node-keys (a P-256 key pair per node, private keys 0600, and "
        "roster.toml, the federation's public keys) and DIR/policies/node-U.toml (each node's "
        "policy: the safe defaults with its own key and the roster), as the operator of every "
        "node would: for Flower's simulation runtime ($FEDPRIVACY_POLICY_DIR) with the roster "
        "in the run config, so every secure round runs with node authentication.",
    )
    keys.add_argument("dir", type=run_directory, help="the folder to write")
    add_options(
        keys,
        "flower keys",
        (
            Use("users", default=6, help="nodes (default 6)"),
            "json",
            Use("quiet", help="print nothing"),
        ),
    )
    keys.set_defaults(func=cmd_keys)


def add_flower_parser(sub: Any) -> None:
    """Add ``flower`` (``deploy``, ``cross-silo``, ``app``, ``keys``) to the parser ``sub``."""
    flower = sub.add_parser(
        "flower",
        help="run the pipeline on Flower (SuperLink and SuperNodes over TLS)",
        description="Deploy the round loop, secure aggregation and the privacy report on Flower.",
    )
    fsub = flower.add_subparsers(
        dest="flower_command",
        required=True,
        metavar="ACTION",
        help="deploy, cross-silo, app or keys",
    )
    _add_deploy_parser(fsub)
    _add_cross_silo_parser(fsub)
    _add_app_parser(fsub)
    _add_keys_parser(fsub)
