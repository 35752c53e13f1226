"""Result files are readable by whoever the umask allows, as any new file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fedprivacy.files import atomic_write_json, atomic_write_text


def test_result_files_honour_the_umask(tmp_path: Path) -> None:
    for mask in (0o022, 0o077, 0o002):
        previous = os.umask(mask)
        try:
            atomic_write_text(tmp_path / f"a{mask}.txt", "x")
            atomic_write_json(tmp_path / f"b{mask}.json", {"a": 1})
        finally:
            os.umask(previous)
        for name in (f"a{mask}.txt", f"b{mask}.json"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~mask
