"""The warm ClientApp worker patches exactly the ClientApp launches of flwr 1.41.0's SuperExec.

Its end-to-end check is every deployment test (``LocalDeployment`` starts every SuperExec with
it, and those runs compare their aggregates with the in-process run bit for bit).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fedprivacy.flower.deploy import warm_clientapp as warm
from fedprivacy.flower.deploy.warm_clientapp import _Subprocess, check_flower_internals

pytestmark = pytest.mark.deployment  # starts processes (pyproject.toml: markers)


def test_the_installed_flower_launches_clientapps_as_the_worker_expects() -> None:
    from flwr.supercore.constant import TASK_TYPE_TO_COMMAND
    from flwr.supercore.superexec.executor import subprocess_executor

    check_flower_internals(subprocess_executor, TASK_TYPE_TO_COMMAND)


def test_a_changed_executor_is_refused() -> None:
    with pytest.raises(RuntimeError, match="pinned to flwr 1.41.0"):
        check_flower_internals(ModuleType("executor"), {"x": "flwr-clientapp"})
    executor = ModuleType("executor")
    executor.subprocess = subprocess  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="pinned to flwr 1.41.0"):
        check_flower_internals(executor, {"x": "flwr-clientapp-v2"})


def _received(sock: socket.socket) -> dict[str, Any]:
    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
    for fd in fds:
        os.close(fd)
    return dict(json.loads(data))


def test_clientapp_launches_go_to_the_zygote_and_others_to_popen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours, zygote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    started: list[list[str]] = []
    monkeypatch.setattr(subprocess, "Popen", lambda args, **kw: started.append(args))
    patched = _Subprocess(ours)
    args = ["flwr-clientapp", "--runtime-api-address", "127.0.0.1:1", "--token", "t"]
    assert patched.Popen(args) is None
    patched.Popen(["flwr-serverapp", "--token", "u"])
    request = _received(zygote)
    assert request["args"] == args and request["cwd"] == os.getcwd()
    assert request["env"] == dict(os.environ)
    assert started == [["flwr-serverapp", "--token", "u"]]
    assert patched.DEVNULL == subprocess.DEVNULL


def _report(args: list[str]) -> int:
    """A stand-in for Flower's ClientApp: what the forked child runs as, on its stdout."""
    seen = {"args": args, "env": os.environ.get("FP_NODE"), "cwd": os.getcwd()}
    os.write(1, json.dumps(seen).encode())
    return 0


def test_a_forked_clientapp_runs_with_the_requesters_output_environment_and_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(warm, "_run_clientapp", _report)
    superexec, zygote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    read, write = os.pipe()
    monkeypatch.setenv("FP_NODE", "node-7")
    monkeypatch.chdir(tmp_path)
    warm._request(superexec, ["flwr-clientapp", "--token", "t"], output=(write, write))
    os.close(write)
    monkeypatch.setenv("FP_NODE", "the zygote's")  # the child takes the request's, not these
    monkeypatch.chdir("/")
    assert warm._fork_clientapp(zygote, [zygote])
    with os.fdopen(read, "rb") as out:
        seen = json.loads(out.read())  # until the child exits
    os.wait()
    assert seen == {
        "args": ["flwr-clientapp", "--token", "t"],
        "env": "node-7",
        "cwd": str(tmp_path),
    }
    superexec.close()
    assert not warm._fork_clientapp(zygote, [zygote])  # the SuperExec went: stop serving it


def test_the_shared_zygote_serves_only_this_user_on_a_private_socket(tmp_path: Path) -> None:
    path = warm.zygote_path()
    env = {**os.environ, "FEDPRIVACY_WARM_IMPORTS": ""}
    command = [sys.executable, "-m", "fedprivacy.flower.deploy.warm_clientapp", "--serve", path]
    proc = subprocess.Popen(command, env=env)
    try:
        warm.wait_for_zygote(path, proc, timeout=60)  # type: ignore[arg-type]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.connect(path)
            assert warm._same_user(sock)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(os.path.dirname(path))


def test_a_zygote_that_never_listens_is_reported(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(RuntimeError, match="zygote did not start"):
        warm.wait_for_zygote(str(tmp_path / "none"), proc)  # type: ignore[arg-type]
