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
BLOCKS = [*COMMANDS, "flower/deploy", "flower/cross-silo", "flower/app", "flower/keys"]
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


FLAGS_BLOCK = re.compile(r"(<!-- flags -->\n)(.*?)(<!-- /flags -->)", re.S)


def _commands_of(parser: argparse.ArgumentParser, path: str) -> dict[str, set[str]]:
    """long flag -> the commands (``flower deploy``) whose parser lists it."""
    found: dict[str, set[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for flag, paths in _commands_of(sub, f"{path} {name}".strip()).items():
                    found.setdefault(flag, set()).update(paths)
        elif action.help != argparse.SUPPRESS:
            for flag in action.option_strings:
                found.setdefault(flag, set()).add(path)
    return found


def flag_table() -> str:
    """docs/cli.md's flag table: each concept's flag, letter, meaning and commands; renames."""
    from fedprivacy.cli.flag_table import RENAMED, THEMES

    used = _commands_of(build_parser(), "")
    lines = []
    for theme, flags in THEMES.items():
        lines += [f"**{theme}**", "", "| flag | short | meaning | commands |", "|---|---|---|---|"]
        for flag in flags:
            meaning = flag.help.replace("|", "\\|")
            commands = ", ".join(sorted(used.get(flag.long, ())))
            lines.append(f"| `{flag.long}` | {flag.short or ''} | {meaning} | {commands} |")
        lines.append("")
    lines += [
        "**Older spellings**, accepted until the next release with a warning naming the new flag:",
        "",
        "| command | old | new |",
        "|---|---|---|",
    ]
    for command, renames in RENAMED.items():
        for r in renames:
            from fedprivacy.cli.flag_table import FLAGS

            lines.append(f"| {command} | `{r.old}` | `{r.replacement(FLAGS[r.concept])}` |")
    return "\n".join(lines) + "\n"


def documented() -> dict[str, str]:
    return {m.group(2): m.group(3) for m in BLOCK.finditer(CLI_PAGE.read_text())}


def regenerate() -> None:
    text = BLOCK.sub(
        lambda m: m.group(1) + help_text(m.group(2)) + m.group(4), CLI_PAGE.read_text()
    )
    text = FLAGS_BLOCK.sub(lambda m: m.group(1) + flag_table() + m.group(3), text)
    CLI_PAGE.write_text(text)


def test_flag_table_matches_the_code() -> None:
    block = FLAGS_BLOCK.search(CLI_PAGE.read_text())
    assert block is not None and block.group(2) == flag_table(), (
        "docs/cli.md: the flag table is stale; run `PYTHONPATH=src python "
        "tests/docs/test_cli_reference.py`"
    )


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
