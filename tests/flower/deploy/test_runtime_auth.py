"""A SuperNode's local runtime API refuses every process without the node's fresh secret.

Issue #28, finding 7: between stages a node's X25519 keys, self-mask seed, held shares and update
travel from the SuperNode to the ClientApp process over the SuperNode's runtime API on
127.0.0.1, which handed the task (with the token to read them) to any local process that asked.
Here a real SuperNode is started as the deployment starts it, and a local process asks for its
next task over that API, without the secret, with another secret, and with the node's own.
The whole deployment with the secrets runs in ``test_deployment.py``.
"""

from __future__ import annotations

import importlib.util
import re
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.deployment,
    pytest.mark.skipif(
        importlib.util.find_spec("flwr") is None or sys.platform != "linux",
        reason="needs fedprivacy[flower] (make install installs it) on Linux",
    ),
]

ACQUIRE = "/flwr.proto.Runtime/AcquireTask"


def _runtime_port(log: Path, timeout: float = 60.0) -> int:
    """The port the SuperNode's runtime API listens on, from its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", text)
        if found:
            return int(found.group(1))
        time.sleep(0.2)
    raise AssertionError(f"the runtime API did not start: {log}")


def _acquire(port: int, secret: bytes | None) -> int:
    """Ask the runtime API for a task as a local process would; the HTTP status."""
    import httpx
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.interceptors.http.superexec_auth import SuperExecAuthHttpInterceptor
    from flwr.supercore.runtime.runtime_http_client import RuntimeHttpClient

    interceptors = []
    if secret is not None:
        interceptors.append(
            SuperExecAuthHttpInterceptor(master_secret=secret, protected_methods={ACQUIRE})
        )
    client = RuntimeHttpClient.from_server_address(f"127.0.0.1:{port}", True, None, interceptors)
    try:
        client.AcquireTask(AcquireTaskRequest(supported_task_types=["clientapp"]))
    except httpx.HTTPStatusError as exc:
        return int(exc.response.status_code)
    finally:
        client.close()
    return 200


def test_the_runtime_api_answers_only_the_holder_of_the_nodes_fresh_secret(
    tmp_path: Path, processes_of: Callable[[Path], list[int]]
) -> None:
    from fedprivacy.flower.deploy.local_deployment import LocalDeployment

    run_dir = tmp_path / "run"
    with LocalDeployment(run_dir, tls=False) as dep:
        dep.start_superlink()
        dep.start_supernode(0)
        dep.start_supernode(1)
        port = _runtime_port(dep.log_path("supernode-0"))
        assert _acquire(port, None) == 401  # was 200: any local process could claim the task
        assert _acquire(port, b"\x00" * 32) == 401
        assert _acquire(port, dep.runtime_secrets[1].read_bytes()) == 401  # another node's
        assert _acquire(port, dep.runtime_secrets[0].read_bytes()) == 200  # its SuperExec's
        assert dep.runtime_ports[0] == port
        log = dep.log_path("supernode-0").read_text(errors="replace")
        assert "SuperExec authentication failed" in log
    secrets = sorted((run_dir / "runtime-secrets").iterdir())
    assert [p.name for p in secrets] == ["supernode-0.secret", "supernode-1.secret"]
    assert stat.S_IMODE((run_dir / "runtime-secrets").stat().st_mode) == 0o700
    for path in secrets:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert len(path.read_bytes()) == 32
    assert secrets[0].read_bytes() != secrets[1].read_bytes()  # fresh per node
    assert processes_of(run_dir) == []  # the SuperExecs stopped with their SuperNodes


def test_a_restarted_supernode_gets_a_new_secret(tmp_path: Path) -> None:
    from fedprivacy.flower.deploy.runtime_auth import write_runtime_secret

    path = tmp_path / "runtime-secrets" / "supernode-0.secret"
    first = write_runtime_secret(path).read_bytes()
    assert write_runtime_secret(path).read_bytes() != first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
