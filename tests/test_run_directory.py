"""The run directory: checked before any work, written atomically after it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.run_directory import check_run_directory, write_run_directory


def test_a_new_folder_is_accepted_and_nothing_is_created(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    assert check_run_directory(out) == out
    assert not (tmp_path / "a").exists()


def test_an_existing_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ParameterError, match="exists and is not a folder"):
        check_run_directory(tmp_path / "f")
    with pytest.raises(ParameterError, match="is not a folder, so .* cannot be made"):
        check_run_directory(tmp_path / "f" / "run")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_folder_without_write_permission_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ParameterError, match="cannot write in"):
        check_run_directory(locked / "run")


def test_files_are_written_by_kind_then_the_plots(tmp_path: Path) -> None:
    def plots(folder: Path) -> list[Path]:
        (folder / "p.png").write_bytes(b"png")
        return [folder / "p.png"]

    files = {"a.csv": "x,y\n", "b.bin": b"\x00\x01", "c.json": {"k": [1, None]}}
    written = write_run_directory(tmp_path / "run", files, plots)
    assert [p.name for p in written] == ["a.csv", "b.bin", "c.json", "p.png"]
    assert (tmp_path / "run" / "b.bin").read_bytes() == b"\x00\x01"
    assert json.loads((tmp_path / "run" / "c.json").read_text()) == {"k": [1, None]}
