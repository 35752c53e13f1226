"""The top-level API: every noun resolves to its module's object, and importing stays light."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import fedprivacy


@pytest.mark.parametrize("name", sorted(fedprivacy._LAZY))
def test_every_top_level_noun_is_its_modules_object(name: str) -> None:
    module = importlib.import_module(fedprivacy._LAZY[name])
    assert getattr(fedprivacy, name) is getattr(module, name)
    assert name in fedprivacy.__all__ and name in dir(fedprivacy)


def test_all_lists_exactly_the_nouns() -> None:
    assert set(fedprivacy.__all__) == {"FedPrivacyError", "ParameterError", "__version__"} | set(
        fedprivacy._LAZY
    )


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = fedprivacy.nope  # type: ignore[attr-defined]


def test_import_loads_neither_torch_nor_the_accountant() -> None:
    code = "import sys, fedprivacy; print('torch' in sys.modules, 'dp_accounting' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
