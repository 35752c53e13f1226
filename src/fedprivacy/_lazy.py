"""Lazy package exports: a name is imported from its module on first use.

The packages whose modules import torch (``fedprivacy``, :mod:`fedprivacy.fl`,
:mod:`fedprivacy.uldp`) export their main nouns this way, so that importing the package (and
the command line's start-up) stays light.

Examples
--------
>>> getattr_, dir_ = lazy_exports("demo", {"sqrt": "math"})
>>> getattr_("sqrt")(9.0), dir_()
(3.0, ['sqrt'])
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``.

    Parameters
    ----------
    package : str
        The package's ``__name__`` (a loaded value is cached in its namespace when it exists).
    exports : mapping of str to str
        Exported name -> the module that defines it.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace = sys.modules.get(package)
        if namespace is not None:
            setattr(namespace, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
