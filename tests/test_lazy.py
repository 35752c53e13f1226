"""Every package export resolves, lazily: importing a package loads none of its heavy modules."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = ("fedprivacy", "fedprivacy.fl", "fedprivacy.uldp", "fedprivacy.participation")


@pytest.mark.parametrize("name", PACKAGES)
def test_every_export_resolves_and_unknown_names_raise(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__ and set(package.__all__) <= set(dir(package))
    for export in package.__all__:
        assert getattr(package, export) is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = package.nothing_here


def test_importing_the_packages_loads_no_torch() -> None:
    code = (
        "import sys, fedprivacy, fedprivacy.fl, fedprivacy.uldp, fedprivacy.participation; "
        "print('torch' in sys.modules, 'scipy.optimize' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
