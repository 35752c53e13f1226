"""Result files are readable by whoever the umask allows, as any new file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fedprivacy.cli.main import main
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


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--rounds", "400"],
        ["simulate", "--rounds", "400"],
        ["uldp", "--dataset", "heart_disease", "--method", "DEFAULT", "-N", "9", "-R", "400"],
        ["demo"],
        ["flower", "deploy"],
        ["flower", "cross-silo"],
    ],
)
def test_a_file_as_out_is_refused_when_the_command_line_is_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """argparse refuses it (exit 2, one line), so no command starts any work."""
    (tmp_path / "f").write_text("x")
    with pytest.raises(SystemExit) as exc:
        main([*command, "--out", str(tmp_path / "f")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().endswith(f"argument --out: {tmp_path / 'f'} exists and is not a folder")
    assert "Traceback" not in err
