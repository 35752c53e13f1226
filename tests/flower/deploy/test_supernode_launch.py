"""The SuperNode launcher patches exactly the idle pause of flwr 1.41.0's SuperNode loop."""

from __future__ import annotations

import time
from types import ModuleType

import pytest

from fedprivacy.flower.deploy import supernode_launch
from fedprivacy.flower.deploy.supernode_launch import (
    IDLE_PULL,
    _ShorterIdlePull,
    check_flower_internals,
)

pytestmark = pytest.mark.deployment  # starts processes (pyproject.toml: markers)


def test_the_installed_flower_has_the_loop_the_launcher_patches() -> None:
    from flwr.supernode import start_client_internal

    check_flower_internals(start_client_internal)  # fails on a Flower that changed it


def test_a_changed_loop_is_refused() -> None:
    changed = ModuleType("start_client_internal")
    changed.time = time  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="pinned to flwr 1.41.0"):
        check_flower_internals(changed)


def test_only_the_three_second_pause_is_shortened(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(supernode_launch.time, "sleep", slept.append)
    patched = _ShorterIdlePull()
    patched.sleep(3)
    patched.sleep(0.2)
    assert slept == [IDLE_PULL, 0.2]
    assert patched.monotonic is time.monotonic
