"""A command's parser, generated from the flag table.

A command lists the concepts it takes (:func:`add_options`), changing only what differs there
(:class:`Use`: the help, the default, the choices); the flags themselves come from
:data:`fedprivacy.cli.flag_table.FLAGS`, and the older spellings the command still accepts from
:data:`fedprivacy.cli.flag_table.RENAMED`.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="fedprivacy simulate")
>>> add_options(parser, "simulate", ["users", Use("rounds", default=3)])
>>> args = parser.parse_args(["-N", "9"])
>>> args.users, args.rounds
(9, 3)
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any, TypeVar

from fedprivacy.cli.flag_table import FLAGS, RENAMED
from fedprivacy.cli.vocabulary import TAKES_VALUE, Flag, OldSwitch, accept_old_spelling
from fedprivacy.config import Config

__all__ = ["Use", "add_options", "concept_names", "config_from_args", "given_options"]

C = TypeVar("C", bound=Config)


@dataclass(frozen=True)
class Use:
    """A command's use of a concept: its name and what differs in this command.

    ``required`` makes the option mandatory; every other keyword replaces the
    :class:`Flag`'s field (``help``, ``default``, ``choices``, ``type``, ``metavar``).
    """

    name: str
    required: bool = False
    changes: dict[str, Any] = field(default_factory=dict)

    def __init__(self, name: str, required: bool = False, **changes: Any) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "required", required)
        object.__setattr__(self, "changes", changes)


def _flag_of(use: str | Use) -> tuple[Flag, Use]:
    use = Use(use) if isinstance(use, str) else use
    flag = FLAGS[use.name]
    return replace(flag, **use.changes), use


def add_options(parser: argparse.ArgumentParser, command: str, uses: Iterable[str | Use]) -> None:
    """Add the concepts ``uses`` to ``parser``, and the old spellings ``command`` accepted.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    command : str
        The command as typed after ``fedprivacy`` (``"flower deploy"``): it picks the old
        spellings of :data:`~fedprivacy.cli.flag_table.RENAMED`.
    uses : iterable of str or Use
        The concepts, by name, in the order ``--help`` lists them.
    """
    added: dict[str, tuple[Flag, argparse.Action]] = {}
    for use in uses:
        flag, spec = _flag_of(use)
        kwargs = flag.arguments()
        if spec.required:
            kwargs["required"] = True
        added[flag.name] = (flag, parser.add_argument(*flag.spellings(), **kwargs))
    for renamed in RENAMED.get(command, ()):
        new, action = added[renamed.concept]
        if renamed.value is TAKES_VALUE:
            accept_old_spelling(parser, action, renamed.old, renamed.replacement(new), command)
            continue
        parser.add_argument(
            renamed.old,
            dest=new.name,
            action=OldSwitch,
            new=renamed.replacement(new),
            command=command,
            value=renamed.value,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )


def concept_names(uses: Iterable[str | Use], *, without: Iterable[str] = ()) -> tuple[str, ...]:
    """The concepts of ``uses`` by name (a command's configuration fields: ``without`` the rest).

    Examples
    --------
    >>> concept_names(["users", Use("rounds", default=3), "json"], without=("json",))
    ('users', 'rounds')
    """
    skip = set(without)
    names = (u if isinstance(u, str) else u.name for u in uses)
    return tuple(n for n in names if n not in skip)


def given_options(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The options of ``names`` given on the command line (paths as strings).

    Examples
    --------
    >>> given_options(argparse.Namespace(users=9, rounds=None), ["users", "rounds"])
    {'users': 9}
    """
    values = {name: getattr(args, name) for name in names}
    return {k: str(v) if isinstance(v, PurePath) else v for k, v in values.items() if v is not None}


def config_from_args(
    kind: type[C], args: argparse.Namespace, names: Iterable[str], **fixed: Any
) -> C:
    """``--config FILE`` (or the defaults), then the options of ``names`` given, then ``fixed``.

    Examples
    --------
    >>> from fedprivacy.fl.training_config import TrainConfig
    >>> args = argparse.Namespace(config=None, users=9, rounds=None)
    >>> config_from_args(TrainConfig, args, ["users", "rounds"], seed=3).users
    9
    """
    base = kind() if args.config is None else kind.from_toml(args.config)
    return base.with_overrides(**given_options(args, names), **fixed)
