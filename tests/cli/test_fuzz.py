"""CLI fuzz test: random argument values for every command end in exit code 0 or 2, never a
traceback.

The values are drawn, with a seeded generator, from pools of awkward inputs (negative, zero,
huge, NaN, infinite, non-numeric, empty; missing files, directories, binary files). The heavy
runners are replaced by a stub that raises :class:`Reached`: a combination that passes every
check reaches the runner and counts as handled, so the test stays fast whatever it draws.
Every refusal must name the option (or the file) at fault. ``FEDPRIVACY_FUZZ_EXAMPLES`` (default
40 per command, 440 command lines in all) and ``FEDPRIVACY_FUZZ_SEED`` widen a
local search.
``audit`` gets random *file contents* instead (:func:`test_random_logs_end_in_exit_code_0_or_2`):
bytes, CSV-like text with awkward fields, BOMs, long-form lines and gzip of each.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
from pathlib import Path

import pytest

from fedprivacy.cli.main import build_parser, main

NUMBERS = ["-1", "0", "1", "2", "3", "0.5", "1e-300", "1000000000000", "1e308", "nan", "inf",
           "-inf", "abc", "", "3.5", "0x10"]  # fmt: skip
INTS = ["-1", "0", "1", "2", "3", "1000000000000", "-1000000000000"]
FLOATS = [*INTS, "0.5", "1e-300", "1e308", "nan", "inf", "-inf", "0.999999"]
STRINGS = ["x", "", "heterogeneous", "cpu", "1,2", "a=b", "=", "bogus", "ULDP-AVG", "\x00"]

RUNNERS = {
    "fedprivacy.experiments.selection_run": "run_selection_experiment",
    "fedprivacy.experiments.demo": "run_demo",
    "fedprivacy.experiments.training_run": "run_training",
    "fedprivacy.experiments.reproduce": "run_experiment",
    "fedprivacy.uldp.run": "run_uldp",
    "fedprivacy.regression.simulation": "run_regression",
    "fedprivacy.dp.accounting": "PrivacyAccountant",
    "fedprivacy.flower.deploy.deploy": "deploy",
    "fedprivacy.cli.audit_follow": "follow_log",  # follows a log until it is idle
}


class Reached(Exception):
    """A stubbed runner was called: the arguments passed every check."""


def _stub(*args: object, **kwargs: object) -> None:
    raise Reached


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    for module, name in RUNNERS.items():
        monkeypatch.setattr(importlib.import_module(module), name, _stub)
    monkeypatch.setattr(
        importlib.import_module("fedprivacy.experiments.training_attack"),
        "run_attack_experiment",
        _stub,
    )


def _paths(tmp: Path) -> list[str]:
    binary = tmp / "binary.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    text = tmp / "text.toml"
    text.write_text("users = 'many'\n")
    (tmp / "folder").mkdir(exist_ok=True)
    return [str(tmp / "missing.csv"), str(tmp / "folder"), str(binary), str(text), str(tmp / "o")]


def _value(rng: random.Random, action: argparse.Action, paths: list[str]) -> str:
    if action.choices is not None and rng.random() < 0.8:
        return str(rng.choice(list(action.choices)))
    if action.type is int and rng.random() < 0.85:  # mostly values argparse accepts
        return rng.choice(INTS)
    if action.type is float and rng.random() < 0.85:
        return rng.choice(FLOATS)
    if action.type in (int, float) or rng.random() < 0.3:
        return rng.choice(NUMBERS)
    if action.type is Path or any(k in action.dest for k in ("dir", "path", "config", "out")):
        return rng.choice(paths)
    return rng.choice(STRINGS + NUMBERS[:4] + paths)


#: positional values drawn besides the paths (reproduce's experiment names)
POSITIONALS = ["list", "nonexistent", "table4-mnist-iid", "attack-cifar10"]


def _argv(
    rng: random.Random, command: str, sub: argparse.ArgumentParser, paths: list[str]
) -> list[str]:
    argv = command.split()
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        if not action.option_strings:  # positional
            argv.append(rng.choice([*POSITIONALS, *paths]))  # a file, an experiment name
            continue
        if not action.required and rng.random() < 0.8:
            continue
        flag = rng.choice(action.option_strings)
        if action.nargs == 0:
            argv.append(flag)
        else:
            argv += [flag, _value(rng, action, paths)]
    return argv


COMMANDS = [
    "simulate",
    "audit",
    "demo",
    "train",
    "reproduce",
    "account",
    "regress",
    "uldp",
    "flower deploy",
    "flower cross-silo",
    "flower app",
]

#: with FEDPRIVACY_FUZZ_EXAMPLES = 40: 11 x 40 = 440 random command lines, most of them refused


def _parser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _names_the_input(
    err: str, argv: list[str], paths: list[str], parser: argparse.ArgumentParser
) -> bool:
    """A refusal names an option given (in any spelling), a file or experiment given, or the
    missing option."""
    options = parser._option_string_actions
    named = [s for a in argv if a in options for s in options[a].option_strings]
    named += [a for a in argv if a in paths or a in POSITIONALS]
    return "required" in err or any(a in err for a in named)


@pytest.mark.parametrize("command", COMMANDS)
def test_random_arguments_end_in_exit_code_0_or_2(
    command: str,
    tmp_path: Path,
    stubbed: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a default --out (results/...) lands here
    sub = _parser(command)
    paths = _paths(tmp_path)
    rng = random.Random(f"fuzz-{command}{os.environ.get('FEDPRIVACY_FUZZ_SEED', '')}")
    for _ in range(int(os.environ.get("FEDPRIVACY_FUZZ_EXAMPLES", "40"))):
        argv = _argv(rng, command, sub, paths)
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse refuses the value
            code = exc.code  # type: ignore[assignment]
        except Reached:  # the stubbed runner: every check passed
            code = 0
        except Exception as exc:  # pragma: no cover - the failure this test looks for
            raise AssertionError(f"fedprivacy {' '.join(argv)!r} raised {exc!r}") from exc
        err = capsys.readouterr().err
        assert code in (0, 2), argv
        if code == 2:  # refused: one error naming what was wrong, before any runner
            assert "Traceback" not in err and "error:" in err, (argv, err)
            assert _names_the_input(err, argv, paths, sub), (argv, err)


CELLS = ["0", "1", "1", "0", "2", "-1", "0.5", "nan", "", " 1", "x", "1e3", "\ufeff0", "0x1"]


def _log_bytes(rng: random.Random) -> bytes:
    """A small random participation log, well-formed or not, in any of the accepted shapes."""
    kind = rng.randrange(4)
    if kind == 0:  # raw bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
    rows, cols = rng.randrange(0, 6), rng.randrange(1, 6)
    lines = []
    if rng.random() < 0.5:  # a header, sometimes numeric or ragged
        lines.append(
            ",".join(
                rng.choice(["u", "a", "0", "1", "round", "user", ""]) + str(i)
                for i in range(cols + rng.choice([0, 0, 1, -1]))
            )
        )
    for _ in range(rows):
        if kind == 1:  # long form
            lines.append(f"{rng.choice(['0', '1', '7', '-1', 'x'])},{rng.choice(CELLS)}")
        else:  # wide form, mostly 0/1
            width = cols + (rng.random() < 0.1)
            lines.append(
                ",".join(
                    rng.choice(CELLS[:4] if rng.random() < 0.8 else CELLS) for _ in range(width)
                )
            )
    text = ("\ufeff" if rng.random() < 0.2 else "") + "\n".join(lines) + "\n"
    raw = text.encode("utf-8", errors="surrogatepass")
    return gzip.compress(raw) if kind == 3 else raw


def test_random_logs_end_in_exit_code_0_or_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"fuzz-audit{os.environ.get('FEDPRIVACY_FUZZ_SEED', '')}")
    log = tmp_path / "log.csv"
    for _ in range(int(os.environ.get("FEDPRIVACY_FUZZ_EXAMPLES", "40")) * 2):
        log.write_bytes(_log_bytes(rng))
        argv = ["audit", str(log), "--time-limit", "5", *rng.choice([[], ["--json"]])]
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code  # type: ignore[assignment]
        except Exception as exc:  # pragma: no cover - the failure this test looks for
            raise AssertionError(f"audit of {log.read_bytes()!r} raised {exc!r}") from exc
        assert code in (0, 2), log.read_bytes()
        capsys.readouterr()
    for path in (tmp_path / "missing.csv", tmp_path):  # a missing file, a directory
        assert main(["audit", str(path)]) == 2
