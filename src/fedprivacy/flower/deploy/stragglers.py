"""Processes a local deployment left behind, found by environment and session, and stopped.

Killing a deployment's process groups misses what its processes started in sessions of their
own (Ray's agents and workers in a simulation). Those inherit the deployment's environment, so a
marker entry such as ``FLWR_HOME=...`` finds them in ``/proc/PID/environ``, except where a
process rewrote its title over its environment (``setproctitle``: Ray's agents, a moment after
they start). Every session in which a marked process was seen is remembered, and any process of
such a session is a straggler too. Linux only (``/proc``); elsewhere nothing is found.

Examples
--------
>>> hunter = Stragglers(b"FLWR_HOME=/nonexistent/flwr-home", "/nonexistent")
>>> hunter.find()
[]
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
import warnings
from pathlib import Path

__all__ = ["Stragglers"]


class Stragglers:
    """The stragglers of one deployment, marked by an environment entry.

    Parameters
    ----------
    mark : bytes
        The exact environment entry (``NAME=value``) the deployment's processes carry.
    label : str
        Names the deployment in the warning about survivors.
    """

    def __init__(self, mark: bytes, label: str) -> None:
        self.mark = mark
        self.label = label
        self.sessions: set[int] = set()
        self._tracked_at = -math.inf

    def track(self, every: float = 0.0) -> None:
        """Note the sessions of the marked processes (at most once in ``every`` seconds).

        Call it while the run is going, so a session is known while its marked members live.
        """
        now = time.monotonic()
        if now - self._tracked_at >= every:
            self._tracked_at = now
            self.find()

    def find(self) -> list[int]:
        """Live marked processes and every live process of a session where one was seen.

        This process and its session are never included.
        """
        ours = {os.getpid(), os.getsid(0)}
        proc = Path("/proc")
        if not proc.is_dir():
            return []
        live: dict[int, int] = {}
        for entry in proc.iterdir():
            if not entry.name.isdigit() or (pid := int(entry.name)) in ours:
                continue
            try:
                env = (entry / "environ").read_bytes()
                zombie = "State:\tZ" in (entry / "status").read_text()
                sid = os.getsid(pid)
            except OSError:
                continue
            if zombie or sid in ours:
                continue
            if self.mark in env.split(b"\0"):
                self.sessions.add(sid)
            live[pid] = sid
        return sorted(pid for pid, sid in live.items() if sid in self.sessions)

    def stop(self, timeout: float = 30.0, quiet: float = 1.5) -> None:
        """Kill the stragglers until none has been seen for ``quiet`` seconds.

        A process that a dying agent forks in the last moment may not be visible at the first
        empty scan, so one empty scan is not enough. SIGTERM first, SIGKILL to any pid seen
        again; a :class:`RuntimeWarning` names those still alive after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        signalled: set[int] = set()
        last_seen = time.monotonic()
        pids: list[int] = []
        while time.monotonic() < deadline:
            pids = self.find()
            now = time.monotonic()
            if not pids and now - last_seen >= quiet:
                return
            if pids:
                last_seen = now
            for pid in pids:
                sig = signal.SIGKILL if pid in signalled else signal.SIGTERM
                signalled.add(pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            time.sleep(0.25)
        if pids:
            warnings.warn(
                f"processes of {self.label} still alive after {timeout:.0f} s: {pids}",
                RuntimeWarning,
                stacklevel=3,
            )
