"""How ``deploy`` follows a run: a summary after ``flwr run`` ended, a clear error without."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fedprivacy.flower.deploy import deploy as deploy_module
from fedprivacy.flower.deploy.deploy import FaultPlan
from fedprivacy.flower.deploy.local_deployment import DeploymentError

pytestmark = pytest.mark.deployment  # starts processes (pyproject.toml: markers)


class _Dep:
    """The parts of a LocalDeployment that ``_watch`` uses."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        (run_dir / "logs").mkdir()

    def track(self, every: float) -> None:
        del every

    def log_path(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"


def _ended() -> subprocess.Popen[bytes]:
    runner = subprocess.Popen([sys.executable, "-c", "pass"])
    runner.wait()
    return runner


def test_a_summary_written_after_flwr_run_ended_is_still_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deploy_module, "GRACE_SECONDS", 5.0)
    dep, seen = _Dep(tmp_path), []

    def server_app() -> None:  # the ServerApp goes on after its log stream dropped
        time.sleep(1.0)
        (tmp_path / "events.jsonl").write_text(json.dumps({"event": "round", "round": 1}) + "\n")
        (tmp_path / "summary.json").write_text("{}")

    thread = threading.Thread(target=server_app)
    thread.start()
    deploy_module._watch(dep, _ended(), FaultPlan(), 30.0, seen.append, tmp_path)  # type: ignore[arg-type]
    thread.join()
    assert seen == [{"event": "round", "round": 1}]


def test_a_run_without_a_summary_is_an_error_that_quotes_the_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deploy_module, "GRACE_SECONDS", 0.5)
    dep = _Dep(tmp_path)
    dep.log_path("flwr-run").write_text("starting\nTraceback: the ServerApp failed\n")
    with pytest.raises(DeploymentError, match="ended without a summary") as caught:
        deploy_module._watch(dep, _ended(), FaultPlan(), 30.0, None, tmp_path)  # type: ignore[arg-type]
    assert "the ServerApp failed" in str(caught.value) and "superlink.log" in str(caught.value)
