"""One flag per concept: how the flag table becomes every command's parser.

Each concept of the command line (the users, the noise multiplier, the output folder...) is one
:class:`Flag` in :data:`fedprivacy.cli.flag_table.FLAGS`: one long flag, at most one short
letter, the same in every command that has it. A command lists the concepts it takes
(:func:`add_options`), changing only what differs there: the help, the default, the choices.
Spellings that older releases used are accepted for one release with a warning naming the new
flag (:data:`fedprivacy.cli.flag_table.RENAMED`).

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
import builtins
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["TAKES_VALUE", "Flag", "Renamed", "Use", "add_options"]

#: :attr:`Renamed.value` of an old spelling that takes the new flag's value
TAKES_VALUE: Any = object()


@dataclass(frozen=True)
class Flag:
    """One concept of the command line.

    Parameters
    ----------
    long : str
        The flag, ``--users``.
    help : str
        What it means, for every command that has it (a command may say more).
    short : str or None
        The one-letter flag, ``-N``: the same concept in every command.
    dest : str or None
        The attribute (and configuration field) it sets; by default the long flag's words.
    type, action, choices, nargs, const, metavar, default
        As :meth:`argparse.ArgumentParser.add_argument`.
    """

    long: str
    help: str
    short: str | None = None
    dest: str | None = None
    type: Callable[[str], Any] | None = None
    action: str | builtins.type[argparse.Action] | None = None
    choices: Sequence[str] | None = None
    nargs: str | None = None
    const: Any = None
    metavar: str | None = None
    default: Any = None

    @property
    def name(self) -> str:
        """The concept's name: its ``dest``."""
        return self.dest or self.long[2:].replace("-", "_")

    def spellings(self) -> tuple[str, ...]:
        """The option strings: the long flag, then the short one."""
        return (self.long,) if self.short is None else (self.long, self.short)

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`~argparse.ArgumentParser.add_argument`."""
        kwargs: dict[str, Any] = {"dest": self.name, "help": self.help, "default": self.default}
        if self.action is not None:
            kwargs["action"] = self.action
            if self.action in ("store_true", "append") or not isinstance(self.action, str):
                kwargs.update({} if self.metavar is None else {"metavar": self.metavar})
                return kwargs
        for key in ("type", "choices", "nargs", "const"):
            if (value := getattr(self, key)) is not None:
                kwargs[key] = value
        if self.choices is None:
            kwargs["metavar"] = self.metavar or self.long[2:].replace("-", "_").upper()
        return kwargs


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


@dataclass(frozen=True)
class Renamed:
    """An older spelling, accepted for one release with a warning naming the new flag.

    ``value`` is what a switch stores (``--insecure`` stores ``tls = False``);
    :data:`TAKES_VALUE` when the old spelling takes the new flag's value.
    """

    old: str
    concept: str
    value: Any = TAKES_VALUE
    new: str | None = None

    def replacement(self, flag: Flag) -> str:
        """The spelling the warning asks for (``--no-tls`` for ``--insecure``)."""
        return self.new or flag.long


def _warn(command: str, old: str, new: str) -> None:
    print(
        f"fedprivacy {command}: warning: {old} is deprecated and will be removed in the next "
        f"release; use {new}",
        file=sys.stderr,
    )


class _OldSpellings(argparse.Action):
    """Mixed into an option's action: its older spellings store the same, after a warning.

    The older spellings share the option's action (so a required option given in its older
    spelling counts as given) but are not listed in ``--help``.
    """

    old_spellings: dict[str, str]
    command: str

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if option_string in self.old_spellings:
            _warn(self.command, option_string, self.old_spellings[option_string])
        super().__call__(parser, namespace, values, option_string)


def _accept(
    parser: argparse.ArgumentParser, action: argparse.Action, old: str, new: str, command: str
) -> None:
    """Let ``parser`` read ``old`` as ``action``'s option, with a deprecation warning."""
    parser._option_string_actions[old] = action
    if not isinstance(action, _OldSpellings):
        cls = type(action)
        action.__class__ = type(f"Renamed{cls.__name__}", (_OldSpellings, cls), {})
        assert isinstance(action, _OldSpellings)
        action.old_spellings, action.command = {}, command
    action.old_spellings[old] = new


class _OldSwitch(argparse.Action):
    """An older switch that stores a constant in a newer option (``--insecure``: no TLS)."""

    def __init__(self, *args: Any, new: str, command: str, value: Any, **kwargs: Any) -> None:
        kwargs["nargs"] = 0
        super().__init__(*args, **kwargs)
        self.new, self.command, self.value = new, command, value

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        _warn(self.command, str(option_string), self.new)
        setattr(namespace, self.dest, self.value)


def _flag_of(use: str | Use) -> tuple[Flag, Use]:
    from fedprivacy.cli.flag_table import FLAGS

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
    from fedprivacy.cli.flag_table import RENAMED

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
            _accept(parser, action, renamed.old, renamed.replacement(new), command)
            continue
        parser.add_argument(
            renamed.old,
            dest=new.name,
            action=_OldSwitch,
            new=renamed.replacement(new),
            command=command,
            value=renamed.value,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )
