"""Suite-wide hooks: one torch thread, process-starting files first, skipped tests for want of data.

Every test runs torch on one thread (the models are tiny; on a shared 2-core machine two threads
made the inversion test five times slower), and every process a test starts inherits
``OMP_NUM_THREADS=1`` (``make test`` sets it before numpy loads).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread for the whole suite (where torch is installed)."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked ``deployment`` first, in their order, then the rest in theirs.

    Those files start Flower deployments and wait on them for minutes; under ``make test``'s
    two workers (one file at a time each) they begin at once and the other files fill the time
    around them, instead of the longest starting last.
    """
    items.sort(key=lambda item: item.get_closest_marker("deployment") is None)


#: The skip reason of every test that reads the real datasets (``../shared/data``).
NEEDS_DATA = "needs the shared datasets"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Count the tests skipped because the datasets are missing, and say how to enable them."""
    skipped = terminalreporter.stats.get("skipped", [])
    missing = [r for r in skipped if NEEDS_DATA in str(getattr(r, "longrepr", ""))]
    if missing:
        terminalreporter.write_line(
            f"{len(missing)} test(s) skipped: they need the shared datasets (../shared/data "
            "beside the repository, or set FEDPRIVACY_DATA to a copy)",
            yellow=True,
        )
