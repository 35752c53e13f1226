"""Fixtures of the deployment tests: processes left behind, the cross-silo configuration."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fedprivacy.uldp.config import UldpConfig

#: The shared datasets (Heart Disease for the cross-silo runs).
DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


def _live() -> Iterator[tuple[int, bytes, bytes]]:
    """``(pid, environ, cmdline)`` of every live process but this one (zombies skipped)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if "State:\tZ" not in status and int(pid) != os.getpid():
            yield int(pid), env, cmdline


def _processes_of(run_dir: Path) -> list[int]:
    """Live processes started for ``run_dir`` (their FLWR_HOME, or a path under it)."""
    mark = str(run_dir.resolve()).encode()
    return [pid for pid, env, cmdline in _live() if mark in env or mark in cmdline]


def _ray_processes() -> set[int]:
    """Live processes of Ray (by command line: their titles ``ray::...`` or Ray's files)."""
    return {
        pid
        for pid, _, cmdline in _live()
        if cmdline.startswith(b"ray::") or b"/site-packages/ray/" in cmdline
    }


@pytest.fixture
def ray_processes() -> Callable[[], set[int]]:
    """``ray_processes()``: live Ray processes, found by command line (their environment
    may be overwritten by their process title)."""
    return _ray_processes


@pytest.fixture
def processes_of() -> Callable[[Path], list[int]]:
    """``processes_of(run_dir)``: live processes started for ``run_dir``."""
    return _processes_of


@pytest.fixture(scope="session")
def data_dir() -> str:
    """The shared data directory; skips the test when Heart Disease is missing."""
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    return str(DATA)


@pytest.fixture(scope="session")
def heart_config() -> Callable[..., UldpConfig]:
    """``heart_config(**changes)``: ULDP-AVG-w on the 4 Heart Disease silos, 1024-bit test keys."""

    def make(**changes: object) -> UldpConfig:
        base: dict[str, object] = dict(
            dataset="heart_disease",
            method="ULDP-AVG-w",
            users=60,
            rounds=3,
            noise_multiplier=1.0,
            secure_key_bits=1024,
            insecure_test_keys=True,
        )
        base.update(changes)
        return UldpConfig(**base)  # type: ignore[arg-type]

    return make
