"""Result files are readable by whoever the umask allows, as any new file."""

from __future__ import annotations

import json
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


def test_audit_writes_its_report_to_out_and_quiet_prints_the_findings_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.csv"
    log.write_text("alice,bob,carol\n1,1,0\n0,1,1\n1,0,1\n")
    out = tmp_path / "audit"
    assert main(["audit", str(log), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["audit.json", "audit.md"]
    assert json.loads((out / "audit.json").read_text())["exposed_users"] == [
        "alice",
        "bob",
        "carol",
    ]
    assert (out / "audit.md").read_text() in printed  # the file holds what was printed
    assert main(["audit", str(log), "-q"]) == 0
    quiet = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[0] for line in quiet] == ["T_weak", "T_strong", "EXPOSED:"]
