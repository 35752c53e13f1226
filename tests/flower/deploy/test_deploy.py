"""``LocalDeployment.stop``: processes that leave the deployment's groups are found and stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.deployment,
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc"),
]


_IGNORE_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"


def _detached_sleeper(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A process in a session of its own that ignores SIGTERM."""
    return subprocess.Popen([sys.executable, "-c", _IGNORE_TERM], env=env, start_new_session=True)


def test_a_straggler_that_appears_after_an_empty_scan_is_still_stopped(
    tmp_path: Path, processes_of: Callable[[Path], list[int]]
) -> None:
    from fedprivacy.flower.deploy.local_deployment import LocalDeployment

    dep = LocalDeployment(tmp_path, tls=False)
    late: list[subprocess.Popen[bytes]] = []
    spawn = threading.Timer(0.5, lambda: late.append(_detached_sleeper(dep.env)))
    spawn.start()
    try:
        start = time.monotonic()
        dep.stop()  # nothing runs at the first scan; the sleeper appears 0.5 s later
        spawn.join()
        assert late and late[0].wait(5) is not None  # killed (it ignores SIGTERM)
        assert time.monotonic() - start >= 1.5  # waited for a quiet period, not one scan
        assert processes_of(tmp_path) == []
    finally:
        spawn.cancel()
        for proc in late:
            proc.kill()
            proc.wait()


def test_a_session_member_without_our_environment_is_stopped_once_its_session_was_seen(
    tmp_path: Path,
) -> None:
    """Like Ray's agents: ``FLWR_HOME`` vanishes from their environ, their session stays."""
    from fedprivacy.flower.deploy.local_deployment import LocalDeployment

    dep = LocalDeployment(tmp_path, tls=False)
    bare = {"PATH": os.environ.get("PATH", "")}
    code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {_IGNORE_TERM!r}], env={bare!r})\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", code], env=dep.env, start_new_session=True, stdout=subprocess.PIPE
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    try:
        dep.track()  # while the run goes on: the session is seen through the leader
        assert sorted(dep.stragglers()) == sorted([leader.pid, child])
        leader.kill()  # the child is orphaned and carries nothing of ours but its session
        leader.wait()
        assert b"FLWR_HOME" not in Path(f"/proc/{child}/environ").read_bytes()
        dep.stop()
        assert (
            not Path(f"/proc/{child}").exists()
            or "State:\tZ" in Path(f"/proc/{child}/status").read_text()
        )
    finally:
        leader.kill()
        leader.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_stragglers_are_found_by_their_environment_only(tmp_path: Path) -> None:
    from fedprivacy.flower.deploy.local_deployment import LocalDeployment

    dep = LocalDeployment(tmp_path, tls=False)
    ours = _detached_sleeper(dep.env)
    other = _detached_sleeper({**os.environ, "FLWR_HOME": str(tmp_path / "elsewhere")})
    try:
        deadline = time.monotonic() + 10
        while ours.pid not in dep.stragglers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ours.pid in dep.stragglers() and other.pid not in dep.stragglers()
        dep.stop()
        assert ours.wait(5) is not None and other.poll() is None
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()
