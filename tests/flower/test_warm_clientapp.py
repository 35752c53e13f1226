"""The warm ClientApp worker patches exactly the ClientApp launches of flwr 1.41.0's SuperExec.

Its end-to-end check is every deployment test (``LocalDeployment`` starts every SuperExec with
it, and those runs compare their aggregates with the in-process run bit for bit).
"""

from __future__ import annotations

import io
import json
import subprocess
from types import ModuleType

import pytest

from fedprivacy.flower.warm_clientapp import _Subprocess, check_flower_internals


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


def test_clientapp_launches_go_to_the_zygote_and_others_to_popen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipe = io.StringIO()
    started: list[list[str]] = []
    monkeypatch.setattr(subprocess, "Popen", lambda args, **kw: started.append(args))
    patched = _Subprocess(pipe)
    args = ["flwr-clientapp", "--runtime-api-address", "127.0.0.1:1", "--token", "t"]
    assert patched.Popen(args) is None
    patched.Popen(["flwr-serverapp", "--token", "u"])
    assert [json.loads(line) for line in pipe.getvalue().splitlines()] == [args]
    assert started == [["flwr-serverapp", "--token", "u"]]
    assert patched.DEVNULL == subprocess.DEVNULL
