"""One vocabulary: every parser walked, every option from the flag table, every option read.

A short letter with two meanings is ``tests/cli/test_parser.py``'s. Here: a concept with two
spellings, an option outside the flag table, an older spelling that no longer works or warns,
a command without ``--json`` / ``-q``, and an option that a command accepts and never reads
(each option is given alone on a valid command line, with the heavy runners stubbed, and the
command must read its value).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fedprivacy.cli.flag_table import FLAGS, RENAMED
from fedprivacy.cli.main import build_parser, run
from fedprivacy.cli.vocabulary import TAKES_VALUE

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def _parsers(
    parser: argparse.ArgumentParser, path: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(command, parser) of every command that runs (``flower deploy``, not ``flower``)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if path and not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _parsers(sub, f"{path} {name}".strip())


COMMANDS = dict(_parsers(build_parser()))


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The listed options (not ``--help``, positionals, or hidden older spellings)."""
    return [
        a
        for a in parser._actions
        if a.option_strings
        and a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction)
    ]


def test_a_concept_has_one_spelling_and_one_letter_in_every_command() -> None:
    spellings: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    meanings: dict[str, set[str]] = defaultdict(set)
    for parser in COMMANDS.values():
        for action in _options(parser):
            spellings[action.dest].add(tuple(action.option_strings))
            for flag in action.option_strings:
                meanings[flag].add(action.dest)
    assert {d: s for d, s in spellings.items() if len(s) > 1} == {}
    assert {f: m for f, m in meanings.items() if len(m) > 1} == {}
    assert ("--users", "-N") in spellings["users"] and ("--time-limit",) in spellings[
        "metrics_time_limit"
    ]


def test_every_option_comes_from_the_flag_table() -> None:
    outside = [
        f"{command} {action.option_strings[0]}"
        for command, parser in COMMANDS.items()
        for action in _options(parser)
        if action.dest not in FLAGS or FLAGS[action.dest].long != action.option_strings[0]
    ]
    assert outside == []
    used = {a.dest for p in COMMANDS.values() for a in _options(p)}
    assert sorted(set(FLAGS) - used) == []  # no concept in the table that no command takes


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_takes_json_and_quiet(command: str) -> None:
    flags = {f for a in _options(COMMANDS[command]) for f in a.option_strings}
    assert {"--json", "-q", "--quiet"} <= flags


RENAMES = [(command, r) for command, renames in RENAMED.items() for r in renames]


@pytest.mark.parametrize(("command", "renamed"), RENAMES, ids=[f"{c}:{r.old}" for c, r in RENAMES])
def test_an_older_spelling_still_works_for_one_release_and_names_the_new_flag(
    command: str, renamed: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = COMMANDS[command]
    action = next(a for a in _options(parser) if a.dest == renamed.concept)
    value = [_value(action)] if renamed.value is TAKES_VALUE else []
    args = parser.parse_args([*_required(command), renamed.old, *value])
    warning = capsys.readouterr().err
    assert f"{renamed.old} is deprecated" in warning
    assert f"use {renamed.replacement(FLAGS[renamed.concept])}" in warning
    if value:
        expected = action.type(value[0]) if callable(action.type) else value[0]
    else:
        expected = renamed.value
    assert getattr(args, renamed.concept) == expected


def _value(action: argparse.Action) -> str:
    """A value the option accepts that is not its default."""
    samples = {
        "dropout": "0.1",
        "fairness": "authors",
        "device": "cpu",
        "seeds": "1",
        "local_lr_milestones": "1",
        "set": "eval_every=1",
        "kill": "1@0:mask",
        "replay": "1@0",
        "bad_share": "1@0",
        "forge": "noise=0",
        "estimators": "ols,fgd",
        "data_dir": str(DATA),
        "only": "a",
        "dataset": "creditcard-synthetic",
        "method": "ULDP-AVG",
    }
    if action.dest in samples and (
        action.choices is None or samples[action.dest] in action.choices
    ):
        return samples[action.dest]
    if action.choices is not None:
        return str([c for c in action.choices if c != action.default][-1])
    if action.type is float:
        return "0.5"
    return "2"


def _required(command: str) -> list[str]:
    return {
        "simulate": ["--scheme", "random", "-N", "10", "-K", "2", "-R", "3"],
        "account": ["-z", "1", "--steps", "10", "--delta", "1e-5"],
    }.get(command, [])


class Reached(Exception):
    """A stubbed runner was called: the command had read its options by then."""


def _stub(*args: object, **kwargs: object) -> None:
    raise Reached


#: the runners replaced by :func:`_stub` (``account`` and ``regress`` run for real: fast)
RUNNERS = {
    "fedprivacy.experiments.selection_run": "run_selection_experiment",
    "fedprivacy.experiments.demo": "run_demo",
    "fedprivacy.experiments.training_run": "run_training",
    "fedprivacy.experiments.reproduce": "run_experiment",
    "fedprivacy.uldp.run": "run_uldp",
    "fedprivacy.flower.deploy.deploy": "deploy",
    "fedprivacy.cli.audit_follow": "follow_log",  # follows a log until it is idle
}


class Recording(argparse.Namespace):
    """A namespace that remembers which options the command read."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "_read", set())

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            object.__getattribute__(self, "_read").add(name)
        return object.__getattribute__(self, name)


def _base(command: str, tmp: Path) -> list[str]:
    """A valid command line of ``command`` (before the option under test)."""
    log = tmp / "log.csv"
    log.write_text("1,1,0\n1,0,1\n")
    return {
        "audit": [str(log)],
        "reproduce": ["table4-mnist-iid", "--out", str(tmp / "reproduce")],
        "regress": ["--clients", "3", "--n", "20", "--p", "3", "--replications", "2"],
        "uldp": ["--dataset", "creditcard-synthetic", "--method", "ULDP-AVG", "-N", "9", "-R", "1"],
        "flower cross-silo": [
            "--dataset",
            "creditcard-synthetic",
            "-N",
            "9",
            "--data-dir",
            str(DATA),
        ],
        "flower app": [str(tmp / "app")],
        "flower keys": [str(tmp / "keys")],
        "demo": ["--out", str(tmp / "demo")],
        "flower deploy": ["--out", str(tmp / "deploy")],
    }.get(command, _required(command))


#: (command, option) pairs read only in another setting than the base command line's, with it
OTHER_SETTING = {
    ("reproduce", "t0"): ["attack-cifar10", "--out", "{tmp}"],
    ("reproduce", "window"): ["attack-cifar10", "--out", "{tmp}"],
}


def _option_lines(tmp: Path) -> Iterator[tuple[argparse.Action, list[str]]]:
    for command, parser in COMMANDS.items():
        for action in _options(parser):
            other = OTHER_SETTING.get((command, action.dest))
            base = [a.format(tmp=tmp) for a in other] if other else _base(command, tmp)
            flag = action.option_strings[0]
            if isinstance(action, argparse.BooleanOptionalAction):
                given = [f"--no-{flag[2:]}"]
            elif action.nargs == 0:
                given = [flag]
            elif action.dest in ("out", "resume", "config", "creditcard_path"):
                given = [flag, str(tmp / action.dest)]
            else:
                given = [flag, _value(action)]
            yield action, [*command.split(), *base, *given]


def test_no_command_accepts_an_option_it_never_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # every module imported before any is patched: one imported while another is patched would
    # keep the stub it imported by name (demo's run_selection_experiment) for later tests
    modules = {name: importlib.import_module(module) for module, name in RUNNERS.items()}
    attack = importlib.import_module("fedprivacy.experiments.training_attack")
    for name, module in modules.items():
        monkeypatch.setattr(module, name, _stub)
    monkeypatch.setattr(attack, "run_attack_experiment", _stub)
    monkeypatch.setenv("FEDPRIVACY_DATA", str(DATA))
    unread = []
    for action, argv in _option_lines(tmp_path):
        parser = build_parser()
        args = parser.parse_args(argv, namespace=Recording())
        object.__getattribute__(args, "_read").clear()  # parsing looks at every option
        with contextlib.suppress(Reached):  # a refusal (exit code 2) reads the option too
            run(parser, args)
        capsys.readouterr()
        if action.dest not in object.__getattribute__(args, "_read"):
            unread.append(" ".join(argv))
    assert unread == []
