"""The API reference documents every fedprivacy name the README imports."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMPORT = re.compile(r"^\s*(?:>>> )?from (fedprivacy[\w.]*) import ([\w, ]+)$", re.M)
DIRECTIVE = re.compile(r"^::: (\S+)$", re.M)


def _documented() -> set[str]:
    pages = (ROOT / "docs" / "reference").glob("*.md")
    return {m.group(1) for page in pages for m in DIRECTIVE.finditer(page.read_text())}


def test_every_name_the_readme_imports_has_a_reference_entry() -> None:
    documented = _documented()
    imported = [
        (module, name.strip())
        for module, names in IMPORT.findall((ROOT / "README.md").read_text())
        for name in names.split(",")
    ]
    assert len(imported) >= 6
    missing = []
    for module, name in imported:
        defined_in = getattr(importlib.import_module(module), name).__module__
        if not {f"{defined_in}.{name}", defined_in, f"{module}.{name}"} & documented:
            missing.append(f"{module}.{name}")
    assert missing == []
