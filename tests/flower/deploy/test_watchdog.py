"""A SIGKILLed command leaves no process behind: the watchdog stops the groups it was told."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.deployment  # starts processes (pyproject.toml: markers)

#: a "command" that starts a process group, tells its watchdog, prints the pid, then waits
COMMAND = """
import subprocess, sys, time
from fedprivacy.flower.deploy.watchdog import Watchdog
dog = Watchdog()
child = subprocess.Popen(["sleep", "60"], start_new_session=True)
dog.watch(child.pid)
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie counts as stopped
        return stat.read().split()[2] != "Z"


def test_a_sigkilled_command_leaves_no_process_behind() -> None:
    command = subprocess.Popen([sys.executable, "-c", COMMAND], stdout=subprocess.PIPE, text=True)
    assert command.stdout is not None
    child = int(command.stdout.readline())
    try:
        assert _alive(child)
        command.send_signal(signal.SIGKILL)
        command.wait(10)
        deadline = time.monotonic() + 15
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the command's process group outlived it"
    finally:
        if _alive(child):
            os.killpg(child, signal.SIGKILL)
