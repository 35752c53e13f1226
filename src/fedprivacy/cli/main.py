"""The ``fedprivacy`` command."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from fedprivacy import __version__
from fedprivacy.cli.flags import flag_names, with_flag
from fedprivacy.cli.memory import check_memory
from fedprivacy.cli.options import Use, add_options
from fedprivacy.errors import FedPrivacyError, NoiseWarning, ParameterError, WeakKeyWarning
from fedprivacy.plugins import load_plugins


def _is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (progress bars in a log are lines of carriage returns)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def _progress_factory(enabled: bool) -> Callable[[str, int], Callable[[int], None]] | None:
    """Tqdm bars on stderr, or None when progress is off or stderr is not a terminal."""
    if not (enabled and _is_terminal(sys.stderr)):
        return None
    from tqdm import tqdm

    open_bars: list[Any] = []

    def factory(desc: str, total: int) -> Callable[[int], None]:
        # the bar opens at its first update and closes the previous one, so bars never stack
        state: dict[str, Any] = {"status": ""}

        def update(n: int) -> None:
            if "bar" not in state:
                while open_bars:
                    open_bars.pop().close()
                state["bar"] = tqdm(
                    total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True
                )
                open_bars.append(state["bar"])
            state["bar"].update(n)
            if state["status"] != state.get("shown"):  # a new view: shown at once
                state["shown"] = state["status"]
                state["bar"].set_postfix_str(state["status"])

        def status(text: str) -> None:  # the server's view after the round (FederatedRun.run)
            state["status"] = text

        update.status = status  # type: ignore[attr-defined]
        return update

    return factory


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job on the paper's setting."""
    from fedprivacy.experiments.demo import DemoConfig, run_demo, scheme_configs
    from fedprivacy.experiments.selection_run import MAX_DENSE_CELLS

    cfg = DemoConfig(rounds=args.rounds, seed=args.seed, metrics_time_limit=args.metrics_time_limit)
    if isinstance(cfg.rounds, int) and cfg.rounds * cfg.users > MAX_DENSE_CELLS:
        raise ParameterError(
            "rounds",
            f"at most {MAX_DENSE_CELLS // cfg.users:,} (the privacy metric needs a dense "
            f"rounds x {cfg.users} matrix), got {cfg.rounds}",
        )
    for scheme in scheme_configs(cfg):  # refuse bad values before any output or folder
        scheme.validate()
        check_memory("simulate", scheme)
    started = time.perf_counter()
    if args.json:
        summary = run_demo(cfg, args.out, log=lambda line: None)
        print(json.dumps(summary))
        return 0
    print(
        f"fedprivacy demo: N={cfg.users}, K={cfg.per_round}, {cfg.rounds} rounds, "
        f"heterogeneous dropout, seed {cfg.seed} -> {args.out}"
    )
    run_demo(cfg, args.out, progress_factory=_progress_factory(not args.quiet))
    out = Path(args.out)
    print()
    print((out / "summary.md").read_text())
    print(f"Figures: {', '.join(sorted(p.name for p in out.glob('*.png')))}")
    print(f"Done in {time.perf_counter() - started:.0f} s; results in {out}")
    return 0


def _add_demo_parser(sub: Any) -> None:
    """Add ``demo`` to the subcommand parser ``sub``."""
    demo = sub.add_parser(
        "demo",
        help="the paper's six selection schemes in 9 runs (Fig. 3, Fig. 4, attack); no download",
        description="N=120, K=12, heterogeneous dropout: random, weighted random, partition and "
        "Multi-RoundSecAgg T=6, 4, 3, each under both fairness rules (the paper's Algorithm 2 and "
        "the authors' code). Writes Fig. 3a-c and Fig. 4 as PNG, summary.md/json, per-scheme "
        "CSVs.",
    )
    add_options(
        demo,
        "demo",
        (
            Use("out", default=Path("results/demo"), help="output folder (results/demo)"),
            Use("rounds", default=2000, help="number of rounds (default 2000)"),
            Use("seed", default=0),
            Use(
                "metrics_time_limit",
                default=25.0,
                help="seconds for each scheme's T_weak curve (default 25)",
            ),
            Use("json", help="print the summary as one JSON object"),
            Use("quiet", help="no progress bars"),
        ),
    )
    demo.set_defaults(func=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fedprivacy`` command."""
    parser = argparse.ArgumentParser(
        prog="fedprivacy",
        description="Privacy in federated learning across many rounds, users and silos.",
    )
    parser.add_argument("--version", action="version", version=f"fedprivacy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from fedprivacy.cli.account_command import add_account_parser
    from fedprivacy.cli.audit_command import add_audit_parser
    from fedprivacy.cli.flower_command import add_flower_parser
    from fedprivacy.cli.regress_command import add_regress_parser
    from fedprivacy.cli.simulate_command import add_simulate_parser
    from fedprivacy.cli.train_commands import add_train_parsers
    from fedprivacy.cli.uldp_command import add_uldp_parser

    add_simulate_parser(sub, _progress_factory)
    add_audit_parser(sub)
    _add_demo_parser(sub)
    add_train_parsers(sub, _progress_factory)
    add_account_parser(sub)
    add_regress_parser(sub)
    add_uldp_parser(sub)
    add_flower_parser(sub)
    return parser


@contextlib.contextmanager
def _warnings_as_lines(command: str) -> Iterator[None]:
    """Print each distinct :class:`WeakKeyWarning` or :class:`NoiseWarning` once, in one line.

    As ``fedprivacy CMD: warning: ...``.

    A warning raised at several layers (a weak key is checked by the config, the session and the
    key generation) reaches the user as one line, without Python's source-line decoration.
    """
    seen: set[str] = set()

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not issubclass(category, WeakKeyWarning | NoiseWarning):
            previous(message, category, filename, lineno, file, line)
            return
        text = str(message)
        if text not in seen:
            seen.add(text)
            print(f"fedprivacy {command}: warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always", WeakKeyWarning)
        warnings.simplefilter("always", NoiseWarning)
        previous = warnings.showwarning
        warnings.showwarning = show
        try:
            yield
        finally:
            warnings.showwarning = previous


def _subparser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the action ``args`` ran (``flower cross-silo``'s, not ``flower``'s).

    Two actions of one command may spell one field's option differently (``flower deploy
    --noise-multiplier``, ``flower cross-silo --sigma``); an error names the one typed.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(args, action.dest, None)
            if name in action.choices:
                return _subparser(action.choices[name], args)
    return parser


def _name(args: argparse.Namespace) -> str:
    """The command as typed: ``flower deploy``, not ``flower``."""
    action = getattr(args, "flower_command", None)
    return args.command if action is None else f"{args.command} {action}"


def _check_out(args: argparse.Namespace) -> None:
    """Refuse a non-empty ``--out`` the run would mix into, before any work.

    ``reproduce``'s ``--out`` is a results folder that it reuses by design.
    """
    from fedprivacy.run_directory import check_out_folder

    out = getattr(args, "out", None)
    if out is None or args.command == "reproduce":
        return
    resumable = hasattr(args, "resume")
    check_out_folder(
        Path(out), resumable=resumable, resume=getattr(args, "resume", None) is not None
    )


def _os_error(exc: OSError) -> str:
    """``exc`` in one line: what went wrong and the path."""
    what = exc.strerror or type(exc).__name__
    return f"{what}: {exc.filename}" if exc.filename else what


def _option_of_path(parser: argparse.ArgumentParser, args: argparse.Namespace, path: Any) -> str:
    """``"--out: "`` (or a positional's name) when ``path`` is that option's path or under it."""
    if path is None:
        return ""
    target = Path(os.fsdecode(path)).absolute()
    for action in parser._actions:  # noqa: SLF001 - argparse exposes no public list
        value = getattr(args, action.dest, None)
        if not isinstance(value, str | Path) or not str(value):
            continue
        given = Path(value).absolute()
        if target == given or given in target.parents:
            longs = [o for o in action.option_strings if o.startswith("--")]
            name = (longs or action.option_strings or [action.dest])[0]
            return f"{name}: "
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fedprivacy`` command."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # `fedprivacy` alone: the commands and what they do, not just a usage error
        parser.print_help()
        return 2
    return run(parser, parser.parse_args(argv))


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the command ``args`` parsed by ``parser``; an error is one line and exit code 2.

    ``--out`` is checked first, then the command checks its options before any work.
    """
    try:
        _check_out(args)
        load_plugins()
        with _warnings_as_lines(args.command):
            code: int = args.func(args)
    except FedPrivacyError as exc:
        flags = flag_names(_subparser(parser, args), args.command)
        print(f"fedprivacy {_name(args)}: error: {with_flag(exc, flags)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader (e.g. `| head`) closed the pipe: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a path of the command line that cannot be read or written
        where = _option_of_path(_subparser(parser, args), args, exc.filename)
        print(f"fedprivacy {_name(args)}: error: {where}{_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM where a command turns it into one
        print(f"fedprivacy {_name(args)}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
