"""The shared datasets of the data tests: the ``data_dir`` fixture, which skips without them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: ``$FEDPRIVACY_DATA``, else ``shared/data`` beside the repository.
DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


@pytest.fixture(scope="module")
def data_dir(request: pytest.FixtureRequest) -> Path:
    """The shared datasets; the test is skipped unless they hold the module's ``NEEDED_DATA``.

    ``NEEDED_DATA``, a tuple of paths relative to the data directory, names what the module's
    tests read (the data directory itself when the module does not set it).
    """
    needed = getattr(request.module, "NEEDED_DATA", ("",))
    if not all((DATA / rel).exists() for rel in needed):
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    return DATA
