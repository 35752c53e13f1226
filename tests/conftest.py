"""Suite-wide hooks: say in the summary which tests were skipped for want of the shared data."""

from __future__ import annotations

import pytest

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
