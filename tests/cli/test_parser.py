"""The parser itself: fast to build, every option documented, one meaning per short flag."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from fedprivacy.cli.main import build_parser, main


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


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
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, sub in _subparsers(build_parser()).items()
        for action in sub._actions
        if not action.help
    ]
    assert missing == []


def test_q_means_quiet_in_every_command() -> None:
    for name, sub in _subparsers(build_parser()).items():
        for action in sub._actions:
            if "-q" in action.option_strings:
                assert action.dest == "quiet", name


def test_fedprivacy_alone_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    for name in ("simulate", "audit", "demo", "train", "reproduce", "account", "regress", "uldp"):
        assert name in out
