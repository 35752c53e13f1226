"""Every Python example of the README runs as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if "heart_disease" in BLOCKS[index]:  # the examples read the data from $FEDPRIVACY_DATA
        if not os.environ.get("FEDPRIVACY_DATA"):
            if not (DATA / "heart_disease").is_dir():
                pytest.skip("Heart Disease data not found (../shared/data or $FEDPRIVACY_DATA)")
            monkeypatch.setenv("FEDPRIVACY_DATA", str(DATA))
    exec(compile(BLOCKS[index], f"README.md python block {index}", "exec"), {})


#: README blocks of ``$ command`` lines and the output they print
SHELL_BLOCKS = [
    b
    for b in re.findall(r"```\n(\$ .*?)```", README.read_text(), flags=re.DOTALL)
    if all(
        line.startswith(("$ printf ", "$ fedprivacy "))
        for line in b.splitlines()
        if line[:2] == "$ "
    )
]


@pytest.mark.parametrize("index", range(len(SHELL_BLOCKS)))
def test_readme_command_prints_what_the_readme_shows(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex
    import subprocess

    from fedprivacy.cli.main import main

    monkeypatch.chdir(tmp_path)
    printed, shown = [], []
    for line in SHELL_BLOCKS[index].splitlines():
        if line.startswith("$ printf "):
            subprocess.run(line[2:], shell=True, check=True, cwd=tmp_path)
        elif line.startswith("$ fedprivacy "):
            assert main(shlex.split(line[2:])[1:]) == 0
            printed += capsys.readouterr().out.splitlines()
        else:
            shown.append(line)
    assert printed == shown
