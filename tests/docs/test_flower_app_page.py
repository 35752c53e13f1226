"""docs/flower-app.md shows the real diff between the two example apps.

The block between ``<!-- app-diff -->`` and ``<!-- /app-diff -->`` is generated from
``examples/digits-fedavg`` and ``examples/digits-private``; regenerate it with
``PYTHONPATH=src .venv/bin/python tests/docs/test_flower_app_page.py``.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "flower-app.md"
PLAIN, PRIVATE = ROOT / "examples" / "digits-fedavg", ROOT / "examples" / "digits-private"
BLOCK = re.compile(r"(<!-- app-diff -->\n)(.*?)(<!-- /app-diff -->)", re.S)


def render() -> str:
    """The unified diff of every file of the two apps, as a fenced block."""
    lines: list[str] = []
    for path in sorted(PLAIN.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts:
            continue
        name = path.relative_to(PLAIN).as_posix()
        lines += difflib.unified_diff(
            path.read_text().splitlines(),
            (PRIVATE / name).read_text().splitlines(),
            f"digits-fedavg/{name}",
            f"digits-private/{name}",
            lineterm="",
            n=1,
        )
    return "```diff\n" + "\n".join(lines) + "\n```\n"


def test_the_page_shows_the_current_diff() -> None:
    match = BLOCK.search(PAGE.read_text())
    assert match is not None, "docs/flower-app.md has no app-diff block"
    assert match.group(2) == render(), "regenerate: python tests/docs/test_flower_app_page.py"


if __name__ == "__main__":
    PAGE.write_text(BLOCK.sub(lambda m: m.group(1) + render() + m.group(3), PAGE.read_text()))
