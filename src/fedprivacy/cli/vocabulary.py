"""The words of the command line: a concept's :class:`Flag`, and its older spellings.

Each concept of the command line (the users, the noise multiplier, the output folder...) is one
:class:`Flag` in :data:`fedprivacy.cli.flag_table.FLAGS`: one long flag, at most one short
letter, the same in every command that has it. Spellings that older releases used
(:class:`Renamed`) are accepted for one release with a warning naming the new flag
(:func:`accept_old_spelling`, :class:`OldSwitch`). :func:`fedprivacy.cli.options.add_options`
builds a command's parser from them.

Examples
--------
>>> Flag("--users", "number of users N", short="-N", type=int).spellings()
('--users', '-N')
"""

from __future__ import annotations

import argparse
import builtins
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TAKES_VALUE", "Flag", "Renamed", "OldSwitch", "accept_old_spelling"]

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


def accept_old_spelling(
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


class OldSwitch(argparse.Action):
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
        """Warn that the old switch is deprecated, then store its value."""
        _warn(self.command, str(option_string), self.new)
        setattr(namespace, self.dest, self.value)
