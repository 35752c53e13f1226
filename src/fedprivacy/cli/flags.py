"""Errors name the flag the user typed (``--per-round``), not the configuration field.

Configuration objects raise :class:`~fedprivacy.errors.ParameterError` with their field names
(``per_round``) because they are also used from Python. The CLI maps each field to its flag:
from the subcommand's parser (an option's ``dest`` is the field) plus :data:`ALIASES` for the
internal names that differ from any ``dest``.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> _ = parser.add_argument("--per-round", "-K", type=int)
>>> flags = flag_names(parser, "simulate")
>>> flags["per_round"]
'--per-round'
>>> from fedprivacy.errors import ParameterError
>>> with_flag(ParameterError("per_round", "must be >= 1, got 0"), flags)
'--per-round: must be >= 1, got 0'
>>> with_flag(ParameterError("--steps", "must be >= 1"), flags)
'--steps: must be >= 1'
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fedprivacy.errors import FedPrivacyError, ParameterError

__all__ = [
    "ALIASES",
    "Either",
    "DEFAULT_FAIRNESS_RULE",
    "dropout",
    "flag_names",
    "positive_seconds",
    "run_directory",
    "with_flag",
]

#: What a bare ``--fairness`` selects: the paper's rule (equal to
#: :data:`fedprivacy.participation.fairness.DEFAULT_FAIRNESS_RULE`, spelled here so that
#: building the parser imports no numpy).
DEFAULT_FAIRNESS_RULE = "paper"

#: command -> internal parameter name -> flag, for names that no option's ``dest`` spells
ALIASES: dict[str, dict[str, str]] = {
    "simulate": {"point_time_limit": "--time-limit", "fairness_rule": "--fairness"},
    "audit": {"time_limit": "--time-limit"},
    "uldp": {"num_users": "--users", "num_silos": "--silos", "key_bits": "--secure-key-bits"},
    "train": {"milestones": "--local-lr-milestones", "fairness_rule": "--fairness"},
    "regress": {"learning_rate": "--lr", "estimator": "--estimators"},
}


def flag_names(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """Map each option's ``dest`` (and :data:`ALIASES` of ``command``) to its long flag.

    The options of nested actions (``flower deploy``) count too.
    """
    names: dict[str, str] = dict(ALIASES.get(command, {}))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in action.choices.values():
                for dest, flag in flag_names(nested, command).items():
                    names.setdefault(dest, flag)
            continue
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs and action.dest not in names:
            names[action.dest] = longs[0]
    return names


def with_flag(exc: FedPrivacyError, flags: dict[str, str]) -> str:
    """The message of ``exc``, led by the flag when it is a :class:`ParameterError`."""
    text = str(exc)
    if not isinstance(exc, ParameterError):
        return text
    flag = flags.get(exc.name)
    prefix = f"{exc.name}: "
    if flag is None or not text.startswith(prefix):
        return text
    return f"{flag}: {text[len(prefix) :]}"


class Either(argparse.BooleanOptionalAction):
    """``--x`` / ``--no-x``; both in one command line is an error (else the last would win).

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="p", exit_on_error=False)
    >>> _ = parser.add_argument("--tls", action=Either, default=True)
    >>> parser.parse_args(["--no-tls"]).tls
    False
    >>> parser.parse_args(["--tls", "--no-tls"])
    Traceback (most recent call last):
    ...
    argparse.ArgumentError: argument --tls/--no-tls: --no-tls contradicts --tls
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Set the flag, unless its other spelling was given before."""
        given: dict[str, str] = getattr(namespace, "_either_given", {})
        earlier = given.get(self.dest)
        if earlier is not None and option_string is not None and earlier != option_string:
            raise argparse.ArgumentError(self, f"{option_string} contradicts {earlier}")
        if option_string is not None:
            given[self.dest] = option_string
            namespace._either_given = given  # noqa: SLF001 - the parse's own record
        super().__call__(parser, namespace, values, option_string)


def run_directory(value: str) -> Path:
    """``--out``'s type: a run directory checked when the command line is parsed, before work.

    Examples
    --------
    >>> run_directory("/dev/null")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: /dev/null exists and is not a folder
    """
    from fedprivacy.run_directory import check_run_directory

    if not value.strip():
        raise argparse.ArgumentTypeError("is empty: give a folder (. for this one)")
    try:
        return check_run_directory(value)
    except ParameterError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("out: ")) from None


def positive_seconds(value: str) -> float:
    """A time limit's type: a finite number of seconds above 0, checked when parsed.

    Examples
    --------
    >>> positive_seconds("2.5")
    2.5
    >>> positive_seconds("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a number of seconds > 0, got '0'
    """
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not (seconds > 0 and seconds != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {value!r}")
    return seconds


def dropout(value: str) -> str | float:
    """``--dropout``'s type: a probability, or ``'heterogeneous'``.

    Examples
    --------
    >>> dropout("0.2"), dropout("heterogeneous")
    (0.2, 'heterogeneous')
    """
    if value == "heterogeneous":
        return value
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a probability in [0, 1) or 'heterogeneous', got {value!r}"
        ) from None
