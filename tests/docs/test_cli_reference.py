"""docs/cli.md carries each command's ``--help`` verbatim; this keeps it in step with the parser.

After changing an option, regenerate the blocks with
``PYTHONPATH=src python tests/docs/test_cli_reference.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import pytest

from fedprivacy.cli.main import build_parser

CLI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
COMMANDS = [
    "simulate",
    "audit",
    "demo",
    "train",
    "reproduce",
    "account",
    "uldp",
    "regress",
    "flower",
]
# each block names a command, or a nested action as COMMAND/ACTION
BLOCKS = [*COMMANDS, "flower/deploy", "flower/cross-silo", "flower/app"]
WIDTH = "100"
BLOCK = re.compile(r"(<!-- help: (\S+) -->\n```text\n)(.*?)(```\n<!-- /help -->)", re.S)


def help_text(command: str) -> str:
    """The ``--help`` output of ``fedprivacy COMMAND [ACTION]`` at a fixed width of 100 columns."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parser = build_parser()
        for name in command.split("/"):
            sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            parser = sub.choices[name]
        return parser.format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def documented() -> dict[str, str]:
    return {m.group(2): m.group(3) for m in BLOCK.finditer(CLI_PAGE.read_text())}


def regenerate() -> None:
    text = BLOCK.sub(
        lambda m: m.group(1) + help_text(m.group(2)) + m.group(4), CLI_PAGE.read_text()
    )
    CLI_PAGE.write_text(text)


def test_every_command_is_documented() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(COMMANDS)
    assert sorted(documented()) == sorted(BLOCKS)


@pytest.mark.parametrize("command", BLOCKS)
def test_help_block_matches_parser(command: str) -> None:
    assert documented()[command] == help_text(command), (
        f"docs/cli.md: the --help block of {command!r} is stale; run "
        "`PYTHONPATH=src python tests/docs/test_cli_reference.py`"
    )


if __name__ == "__main__":
    regenerate()
    sys.exit(0)
