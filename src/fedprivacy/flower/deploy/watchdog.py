"""A watchdog that stops a local deployment's processes when the command dies unannounced.

The SuperLink, the SuperNodes and ``flwr run`` each run in a session of their own (so that
stopping one stops its children). A SIGKILLed ``fedprivacy flower deploy`` cannot stop them, so
:class:`Watchdog` starts one small process that holds the read end of a pipe: the command writes
each process group it starts, and ``done`` once it has stopped them. When the pipe closes
without ``done`` (the command died, whatever killed it), the watchdog sends SIGTERM, then SIGKILL,
to every group it was told about.

Adversary: none; this is hygiene against a local process left behind, not a security boundary.

Examples
--------
>>> import subprocess
>>> child = subprocess.Popen(["sleep", "30"], start_new_session=True)
>>> dog = Watchdog()
>>> dog.watch(child.pid)
>>> dog.close()  # the command stopped its processes itself: the watchdog leaves them be
>>> child.poll() is None
True
>>> child.kill(); _ = child.wait()
"""

from __future__ import annotations

import subprocess
import sys

__all__ = ["Watchdog"]

#: the watchdog process: read groups until ``done`` or end of input; on end of input, stop them
_SCRIPT = """
import os, signal, sys, time
groups = []
for line in sys.stdin:
    if line.strip() == "done":
        sys.exit(0)
    groups.append(int(line))
for sig, pause in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 0.0)):
    for group in groups:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass
    time.sleep(pause)
"""


class Watchdog:
    """Stop the process groups :meth:`watch` names if this process dies before :meth:`close`."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the terminal's group must not stop it first
        )

    def watch(self, group: int) -> None:
        """Stop process group ``group`` should this process die before :meth:`close`."""
        self._write(f"{group}\n")

    def close(self) -> None:
        """Say the groups are stopped: the watchdog exits without signalling them."""
        self._write("done\n")
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(10)

    def _write(self, line: str) -> None:
        stdin = self._process.stdin
        if stdin is None or stdin.closed:
            return
        try:
            stdin.write(line.encode())
            stdin.flush()
        except BrokenPipeError:  # the watchdog is gone (killed by hand): nothing to tell it
            pass
