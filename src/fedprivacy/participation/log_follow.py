r"""Rounds of a participation log that is still being written, as they are completed.

``fedprivacy audit --follow`` reads a log while the system that writes it runs (any FL system's,
or a fedprivacy run's ``participation.csv``). :class:`LogFollower` reads only the bytes appended
since the last :meth:`~LogFollower.poll`, keeps a line that has no newline yet for later, and
returns the rounds that are complete:

* a **wide** log (one 0/1 row per round, an optional header of user ids) completes a round with
  every line;
* a **long** log (``round,user`` lines) completes round ``r`` when a line of a later round
  arrives (rounds never listed in between are skipped rounds), and its last round when the
  writer is done (:meth:`~LogFollower.finish`). A log is long when it starts with the
  ``round,user`` header or its first line has a field that is not 0/1; a log of two 0/1
  columns without a header is read as wide, so a writer of long logs should write the header.

Users named for the first time by a long log are numbered in order of appearance; the number of
users grows as they appear (:attr:`LogFollower.user_ids`).

Examples
--------
>>> import tempfile, pathlib
>>> f = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
>>> _ = f.write_text("round,user\n0,alice\n0,bob\n2,bob\n")
>>> follow = LogFollower(f)
>>> [s.tolist() for s in follow.poll()], follow.user_ids
([[0, 1], []], ['alice', 'bob'])
>>> [s.tolist() for s in follow.finish()]
[[1]]
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.participation.log_formats import (
    is_long_header,
    is_number,
    long_pair,
    wide_header,
    wide_round,
)

__all__ = ["LogFollower"]

_GZIP_MAGIC = b"\x1f\x8b"


class LogFollower:
    """The completed rounds of a growing participation log, one :meth:`poll` at a time.

    Parameters
    ----------
    path : path-like
        The log; it need not exist yet (a run that has not started writing).

    Raises
    ------
    ParameterError
        From :meth:`poll`: a gzip-compressed or malformed log, a round listed out of order, or a
        file that shrank (it was replaced: following it would mix two logs).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.user_ids: list[str] = []
        self._offset = 0
        self._partial = b""
        self._line = 0
        self._format: str | None = None
        self._rounds = 0  # rounds returned so far
        self._index: dict[str, int] = {}
        self._pending: list[int] = []  # long form: users of round self._rounds so far

    @property
    def num_users(self) -> int:
        """Users known so far (the width of a wide log)."""
        return len(self.user_ids)

    def poll(self) -> list[NDArray[np.intp]]:
        """The rounds completed by what was appended since the last call (maybe none)."""
        out: list[NDArray[np.intp]] = []
        for row in self._new_rows():
            self._line += 1
            if not any(c.strip() for c in row):
                continue
            if self._format is None:
                self._start(row)
                if self._line_was_header(row):
                    continue
            out.extend(self._wide(row) if self._format == "wide" else self._long(row))
        return out

    def finish(self) -> list[NDArray[np.intp]]:
        """What :meth:`poll` returns, and the last round of a long log (the writer is done)."""
        out = self.poll()
        if self._format == "long" and self._pending:
            out.append(self._close_round())
        return out

    # ------------------------------------------------------------------ reading
    def _new_rows(self) -> list[list[str]]:
        if not self.path.exists():
            return []
        if self.path.is_dir():
            raise ParameterError("file", f"{self.path} is a directory")
        size = self.path.stat().st_size
        if size < self._offset:
            raise ParameterError("file", f"{self.path} shrank while followed (it was replaced)")
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = self._partial + f.read(size - self._offset)
        self._offset = size
        if self._line == 0 and data.startswith(_GZIP_MAGIC):
            raise ParameterError("file", f"{self.path} is gzip-compressed: it cannot be followed")
        complete, _, self._partial = data.rpartition(b"\n")
        if not complete:
            return []
        text = complete.decode("utf-8-sig" if self._line == 0 else "utf-8")
        return list(csv.reader(text.splitlines()))

    def _start(self, row: list[str]) -> None:
        long = is_long_header(row) or (
            len(row) == 2 and is_number(row[0]) and row[1].strip() not in {"0", "1"}
        )
        self._format = "long" if long else "wide"
        if long:
            return
        header = wide_header(row)
        self.user_ids = header if header is not None else [str(i) for i in range(len(row))]

    def _line_was_header(self, row: list[str]) -> bool:
        return is_long_header(row) if self._format == "long" else wide_header(row) is not None

    def _wide(self, row: list[str]) -> list[NDArray[np.intp]]:
        users = wide_round(row, self._rounds, self._line, self.num_users, str(self.path))
        self._rounds += 1
        return [users]

    def _long(self, row: list[str]) -> list[NDArray[np.intp]]:
        rnd, user = long_pair(row, self._line, str(self.path))
        if rnd < self._rounds:
            raise ParameterError(
                "file",
                f"{self.path}: line {self._line}: round {rnd} after round {self._rounds} "
                "began (a followed long log lists its rounds in order)",
            )
        out = []
        while rnd > self._rounds:
            out.append(self._close_round())
        if user not in self._index:
            self._index[user] = len(self.user_ids)
            self.user_ids.append(user)
        self._pending.append(self._index[user])
        return out

    def _close_round(self) -> NDArray[np.intp]:
        users = np.asarray(sorted(self._pending), dtype=np.intp)
        if np.any(users[1:] == users[:-1]):
            raise ParameterError(
                "file", f"{self.path}: a user appears twice in round {self._rounds}"
            )
        self._pending = []
        self._rounds += 1
        return users
