"""Readers of participation logs: one entry point, a registry of formats.

* ``wide``: one row per round, one 0/1 column per user; an optional header of user ids. A header
  is a first row with a field that is not a number; a first row of numbers that are not all 0/1 is
  an error naming the row and the column (never silently a header).
* ``long``: one ``round,user`` line per aggregated user (how large sparse logs are kept), with an
  optional ``round,user`` header; rounds are integers from 0, a round without lines is a skipped
  round. Without the header a two-column file is long when a field is not 0/1.

The bytes may be gzip-compressed (detected by the magic bytes, whatever the suffix) and may start
with a UTF-8 byte-order mark (Excel exports); binary files and directories raise
:class:`~fedprivacy.errors.ParameterError`.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from fedprivacy._registry import Registry
from fedprivacy.errors import ParameterError

__all__ = [
    "FORMATS",
    "Deadline",
    "ParsedLog",
    "is_long_header",
    "is_number",
    "long_pair",
    "parse_log",
    "read_log_text",
    "wide_header",
    "wide_round",
]

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(nan|inf|infinity)$", re.I)
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class ParsedLog:
    """A participation log as index sets: ``sets[r]`` are the users aggregated in round ``r``."""

    user_ids: list[str] | None
    num_users: int
    sets: list[NDArray[np.intp]]


def read_log_text(path: str | os.PathLike[str]) -> str:
    r"""The text of a log file, gunzipped if its bytes say so, without a byte-order mark.

    Examples
    --------
    >>> import tempfile, gzip, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "log"
    >>> _ = f.write_bytes(gzip.compress("\ufeffa,b\n1,0\n".encode()))
    >>> read_log_text(f)
    'a,b\n1,0\n'
    """
    p = Path(path)
    if p.is_dir():
        raise ParameterError("file", f"{path} is a directory, not a participation log")
    data = p.read_bytes()
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ParameterError("file", f"{path}: corrupt gzip data ({exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ParameterError("file", f"{path} is not a UTF-8 text file (binary data?)") from None


def is_number(cell: str) -> bool:
    """Whether a CSV field reads as a number (``nan`` and ``inf`` included)."""
    return bool(_NUMBER.match(cell.strip()))


class Deadline:
    """When reading must stop: :meth:`check` raises once the time is up (the CLI's --time-limit).

    Examples
    --------
    >>> Deadline(None).check(0)  # no limit
    >>> Deadline(0.0, "log.csv").check(0)
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: time_limit: reading log.csv took more than 0 s (stopped at \
row 0); raise the time limit, or give the log in long form (round,user lines)
    """

    def __init__(self, seconds: float | None, path: str = "") -> None:
        self.seconds, self.path = seconds, path
        self.end = None if seconds is None else time.monotonic() + seconds

    def check(self, row: int, every: int = 256) -> None:
        """Raise :class:`ParameterError` (``time_limit``) if the time is up.

        The clock is read every ``every`` rows only.
        """
        if self.end is None or row % every or time.monotonic() <= self.end:
            return
        raise ParameterError(
            "time_limit",
            f"reading {self.path} took more than {self.seconds:g} s (stopped at row {row}); "
            "raise the time limit, or give the log in long form (round,user lines)",
        )


def wide_round(row: list[str], r: int, line: int, width: int, path: str) -> NDArray[np.intp]:
    """The users of one wide row (round ``r``, on ``line`` of the file).

    Raises
    ------
    ParameterError
        If the row has the wrong number of columns or a value other than 0 and 1.
    """
    if len(row) != width:
        raise ParameterError("file", f"{path}: round {r} has {len(row)} columns, expected {width}")
    arr = np.asarray(row)
    ones = arr == "1"
    if not np.all(ones | (arr == "0")):  # slow path: spaces around the digits, or an error
        arr = np.char.strip(arr)
        ones = arr == "1"
        bad = np.flatnonzero(~(ones | (arr == "0")))
        if bad.size:
            c = int(bad[0])
            raise ParameterError(
                "file",
                f"{path}: round {r} (line {line}), column {c} is {row[c]!r}; expected 0 or 1",
            )
    return np.flatnonzero(ones).astype(np.intp)


def wide_header(row: list[str]) -> list[str] | None:
    """The user ids of a header row, or None when the row is a round (all numbers)."""
    return [c.strip() for c in row] if any(not is_number(c) for c in row) else None


def _parse_wide(rows: list[list[str]], path: str, deadline: Deadline) -> ParsedLog:
    header = wide_header(rows[0])
    if header is not None:
        rows = rows[1:]
    width = len(header) if header is not None else len(rows[0])
    offset = 1 if header is not None else 0
    sets: list[NDArray[np.intp]] = []
    for r, row in enumerate(rows):
        deadline.check(r)
        sets.append(wide_round(row, r, r + 1 + offset, width, path))
    if width == 0:
        raise ParameterError("file", f"{path} has no user columns")
    return ParsedLog(header, width, sets)


def _is_long(rows: list[list[str]]) -> bool:
    if is_long_header(rows[0]):
        return True
    if any(len(r) != 2 for r in rows):
        return False
    return all(is_number(c) for c in rows[0]) and any(
        c.strip() not in {"0", "1"} for r in rows for c in r
    )


def is_long_header(row: list[str]) -> bool:
    """Whether ``row`` is the ``round,user`` header of a long log."""
    return [c.strip().lower() for c in row] == ["round", "user"]


def long_pair(row: list[str], line: int, path: str) -> tuple[int, str]:
    """The ``(round, user)`` of one long-form line.

    Raises
    ------
    ParameterError
        If the line is not ``round,user`` with a round counted from 0 and a nonempty user.
    """
    if len(row) != 2:
        raise ParameterError("file", f"{path}: line {line} needs 'round,user'")
    rnd, user = row[0].strip(), row[1].strip()
    if rnd.startswith("-") and rnd[1:].isdigit():
        raise ParameterError(
            "file", f"{path}: line {line}: round {rnd} is negative (rounds count from 0)"
        )
    if not rnd.isdigit():
        raise ParameterError("file", f"{path}: line {line}: round {rnd!r} is not an integer")
    if not user:
        raise ParameterError("file", f"{path}: line {line}: empty user")
    return int(rnd), user


def _parse_long(rows: list[list[str]], path: str, deadline: Deadline) -> ParsedLog:
    if is_long_header(rows[0]):
        rows = rows[1:]
    pairs: list[tuple[int, str]] = []
    for line, row in enumerate(rows, start=1):
        deadline.check(line)
        pairs.append(long_pair(row, line, path))
    if not pairs:
        raise ParameterError("file", f"{path} lists no aggregated user")
    names = list(dict.fromkeys(u for _, u in pairs))
    if all(u.isdigit() for u in names):
        names.sort(key=int)
    index = {u: i for i, u in enumerate(names)}
    rounds = max(r for r, _ in pairs) + 1
    members: list[list[int]] = [[] for _ in range(rounds)]
    for r, u in pairs:
        members[r].append(index[u])
    sets = []
    for r, m in enumerate(members):
        arr = np.unique(np.asarray(m, dtype=np.intp))
        if arr.size != len(m):
            raise ParameterError("file", f"{path}: a user appears twice in round {r}")
        sets.append(arr)
    return ParsedLog(names, len(names), sets)


_Detector = Callable[[list[list[str]]], bool]
_Parser = Callable[[list[list[str]], str, Deadline], ParsedLog]

#: Formats tried in order: name -> (detector, parser). The last one accepts everything.
FORMATS: Registry[tuple[_Detector, _Parser]] = Registry("format")
FORMATS.register("long", (_is_long, _parse_long))
FORMATS.register("wide", (lambda rows: True, _parse_wide))


def parse_log(path: str | os.PathLike[str], *, time_limit: float | None = None) -> ParsedLog:
    r"""Read a participation log in any registered format, in at most ``time_limit`` seconds.

    Raises
    ------
    ParameterError
        If the file is empty, binary, a directory, or malformed (the message names the line), or
        (named ``time_limit``) if reading it takes longer than ``time_limit``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = f.write_text("round,user\n0,alice\n0,bob\n2,bob\n")
    >>> log = parse_log(f)
    >>> log.user_ids, [s.tolist() for s in log.sets]
    (['alice', 'bob'], [[0, 1], [], [1]])
    """
    deadline = Deadline(time_limit, str(path))
    text = read_log_text(path)
    rows = []
    for i, r in enumerate(csv.reader(io.StringIO(text))):
        deadline.check(i, every=4096)
        if r and any(c.strip() for c in r):
            rows.append(r)
    if not rows:
        raise ParameterError("file", f"{path} holds no rows")
    for detect, parse in FORMATS.values():
        if detect(rows):
            return parse(rows, str(path), deadline)
    raise ParameterError("file", f"{path}: unknown log format")  # pragma: no cover
