"""The parser itself: fast to build, every option documented, one meaning per short flag."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator

import pytest

from fedprivacy.cli.main import build_parser, main


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _commands(
    parser: argparse.ArgumentParser, path: str = "fedprivacy"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's parser, nested ones (``flower deploy``) included, each once."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias shares its command's parser
                    seen.add(id(sub))
                    yield from _commands(sub, f"{path} {name}")


def _meaning(action: argparse.Action) -> str:
    """What an option is: its long spelling(s) and the destination it fills."""
    longs = "/".join(o for o in action.option_strings if o.startswith("--")) or "(no long form)"
    return f"{longs} -> {action.dest}"


def short_flag_meanings() -> dict[str, dict[str, set[str]]]:
    """short flag -> meaning -> the commands in which the flag has that meaning."""
    uses: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path, parser in _commands(build_parser()):
        for action in parser._actions:
            for flag in action.option_strings:
                if not flag.startswith("--"):
                    uses[flag][_meaning(action)].add(path)
    return uses


def test_building_the_parser_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from fedprivacy.cli.main import build_parser\n"
        "build_parser()\n"
        "heavy = [m for m in ('torch', 'dp_accounting', 'matplotlib', 'opacus', 'sklearn') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == ""


def test_every_option_has_help() -> None:
    commands = dict(_commands(build_parser()))
    assert set(_subparsers(build_parser())) <= {c.split()[-1] for c in commands}
    assert "fedprivacy flower deploy" in commands  # nested commands count too
    missing = [
        f"{path} {action.option_strings or action.dest}"
        for path, sub in commands.items()
        if path != "fedprivacy"  # the bare command's own subcommand list is its usage
        for action in sub._actions
        if not action.help
    ]
    assert missing == []


def test_each_short_flag_has_one_meaning_in_every_command() -> None:
    uses = short_flag_meanings()
    assert {"-q", "-K", "-T", "-R", "-C", "-N", "-z"} <= set(uses)  # the walk reaches them
    assert len(uses["-R"]["--rounds -> rounds"]) >= 4  # ... and the nested ones
    assert any(" flower " in c for m in uses["-R"].values() for c in m)
    conflicts = {flag: sorted(meanings) for flag, meanings in uses.items() if len(meanings) > 1}
    assert conflicts == {}, "a short flag means different things in different commands"


def test_q_means_quiet_in_every_command() -> None:
    uses = short_flag_meanings()
    assert set(uses["-q"]) == {"--quiet -> quiet"}
    assert {"fedprivacy uldp", "fedprivacy simulate", "fedprivacy flower deploy"} <= set(
        uses["-q"]["--quiet -> quiet"]
    )


def test_fedprivacy_alone_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    for name in ("simulate", "audit", "demo", "train", "reproduce", "account", "regress", "uldp"):
        assert name in out
