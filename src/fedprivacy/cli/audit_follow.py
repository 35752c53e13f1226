"""``fedprivacy audit --follow``: the server's view of a log that is still being written.

Each completed round of the log goes into an
:class:`~fedprivacy.participation.incremental.IncrementalAudit`; one line a round says the rank,
the ``T_weak`` interval, ``T_strong`` and how many users are exposed, and a round that exposes
users names them. It stops once the log has not grown for ``--idle`` seconds, or on Ctrl-C, and
then prints the last view (and writes ``audit_rounds.csv`` and ``audit.json`` with ``--out``).
"""

from __future__ import annotations

import argparse
import csv
import errno
import io
import json
import time
from pathlib import Path
from typing import Any

from fedprivacy.participation.incremental import AuditView, IncrementalAudit
from fedprivacy.participation.log_follow import LogFollower

__all__ = ["IDLE_SECONDS", "POLL_SECONDS", "follow_log"]

#: How often the log is read for new lines.
POLL_SECONDS = 0.2
#: ``--idle`` when not given.
IDLE_SECONDS = 60.0


def _line(view: AuditView, newly: list[str]) -> str:
    text = f"round {view.rounds - 1}: rank {view.rank}, {view.describe()}"
    if newly:
        shown = ", ".join(newly[:20]) + (" ..." if len(newly) > 20 else "")
        text += f"; EXPOSED now: {shown}"
    return text


class _Printer:
    """One line (or JSON object) a round; with ``quiet``, only the rounds where the view changed."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: list[dict[str, Any]] = []
        self._last: tuple[object, ...] | None = None

    def round(self, view: AuditView, names: list[str], before: set[int]) -> None:
        newly = [names[u] for u in view.exposed if u not in before]
        row = {"round": view.rounds - 1, **view.to_dict(), "newly_exposed": newly}
        self.rows.append(row)
        key = (view.t_weak, len(view.exposed))
        changed, self._last = key != self._last, key
        if self.args.json:
            print(json.dumps(row), flush=True)
        elif changed or not self.args.quiet:
            print(_line(view, newly), flush=True)


def _csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    fields = [k for k in rows[0] if k != "newly_exposed"] if rows else ["round"]
    writer = csv.DictWriter(buf, fields, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _summary(args: argparse.Namespace, audit: IncrementalAudit | None, names: list[str]) -> Any:
    view = audit.view() if audit is not None else None
    return {
        "file": str(args.file),
        "rounds": 0 if view is None else view.rounds,
        "users": len(names),
        "rank": None if view is None else view.rank,
        "t_weak": {"lower": None, "upper": None}
        if view is None
        else dict(zip(("lower", "upper"), view.t_weak, strict=True)),
        "t_strong": None if view is None else view.t_strong,
        "exposed_users": [] if view is None else [names[u] for u in view.exposed],
        "certified": False,
    }


def _feed(
    audit: IncrementalAudit | None, follow: LogFollower, rounds: list[Any], printer: _Printer
) -> IncrementalAudit | None:
    for users in rounds:
        if audit is None:
            audit = IncrementalAudit(max(1, follow.num_users))
        audit.grow(max(audit.num_users, follow.num_users))
        before = set(audit.view().exposed)
        printer.round(audit.add_round(users), follow.user_ids, before)
    return audit


def follow_log(args: argparse.Namespace) -> int:
    """Follow ``args.file`` until it has been idle for ``args.idle`` seconds (or Ctrl-C)."""
    from fedprivacy.run_directory import write_run_directory

    if not Path(args.file).exists():  # a log never written is a mistake, not an idle follow
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(args.file))
    follow, printer = LogFollower(args.file), _Printer(args)
    idle = IDLE_SECONDS if args.idle is None else args.idle
    rounds = follow.poll()  # a directory, a gzip or a malformed first line: refused before output
    audit: IncrementalAudit | None = None
    if not (args.json or args.quiet):
        print(f"following {args.file} (stops after {idle:g} s without a new line)")
    last = time.monotonic()
    try:
        while True:
            if rounds:
                last = time.monotonic()
            elif time.monotonic() - last >= idle:
                audit = _feed(audit, follow, follow.finish(), printer)
                break
            audit = _feed(audit, follow, rounds, printer)
            time.sleep(POLL_SECONDS)
            rounds = follow.poll()
    except KeyboardInterrupt:
        audit = _feed(audit, follow, follow.finish(), printer)
    summary = _summary(args, audit, follow.user_ids)
    if args.out is not None:
        files = {"audit_rounds.csv": _csv(printer.rows), "audit.json": summary}
        write_run_directory(args.out, files)
    if not args.json:
        print(
            f"followed {summary['rounds']} round(s): {len(summary['exposed_users'])} exposed; "
            f"for certified bounds over the rationals run: fedprivacy audit {args.file}"
        )
    return 0
