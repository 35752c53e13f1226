"""Name registries: a ``dict`` from a name to what builds or runs it, with two helpers.

A factory looks a name up with :func:`lookup` (an unknown name is a :class:`ParameterError`
listing the valid ones) instead of an ``if name == ...`` chain, and a new implementation is added
with :func:`register`, which refuses a name already taken.

Examples
--------
>>> SHAPES: dict[str, int] = {}
>>> register(SHAPES, "shape", "square", 4)
4
>>> register(SHAPES, "shape", "triangle", 3)
3
>>> lookup(SHAPES, "shape", "square")
4
>>> lookup(SHAPES, "shape", "circle")
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: shape: must be one of square, triangle; got 'circle'
>>> lookup(SHAPES, "shape", "circle", "must be {alternatives}, got {name!r}")
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: shape: must be 'square' or 'triangle', got 'circle'
>>> register(SHAPES, "shape", "square", 5)
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: shape: 'square' is registered already
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TypeVar

from fedprivacy.errors import ParameterError

__all__ = ["UNKNOWN", "alternatives", "lookup", "register"]

T = TypeVar("T")

#: The default message of an unknown name (``{names}``: the valid names, comma-separated).
UNKNOWN = "must be one of {names}; got {name!r}"


def alternatives(names: Mapping[str, object]) -> str:
    """The names quoted and joined as alternatives: ``'a' or 'b'``, ``'a', 'b' or 'c'``.

    Examples
    --------
    >>> alternatives({"rdp": 1, "pld": 2})
    "'rdp' or 'pld'"
    >>> alternatives({"a": 1, "b": 2, "c": 3})
    "'a', 'b' or 'c'"
    """
    quoted = [repr(n) for n in names]
    return " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)


def register(registry: MutableMapping[str, T], parameter: str, name: str, item: T) -> T:
    """Add ``item`` to ``registry`` under ``name`` and return it.

    Parameters
    ----------
    registry : dict
        The registry (name -> class, builder or runner).
    parameter : str
        What a name is in this registry (the :class:`ParameterError`'s name), e.g. ``"scheme"``.
    name : str
        The new name, non-empty.
    item : object
        What the name stands for.

    Returns
    -------
    object
        ``item``.

    Raises
    ------
    ParameterError
        If ``name`` is not a non-empty string or is registered already.
    """
    if not isinstance(name, str) or not name:
        raise ParameterError(parameter, f"a name must be a non-empty string, got {name!r}")
    if name in registry:
        raise ParameterError(parameter, f"{name!r} is registered already")
    registry[name] = item
    return item


def lookup(registry: Mapping[str, T], parameter: str, name: object, message: str = UNKNOWN) -> T:
    """What ``name`` stands for in ``registry``.

    Parameters
    ----------
    registry : dict
        The registry.
    parameter : str
        The name of the caller's parameter (the :class:`ParameterError`'s name).
    name : object
        The name asked for.
    message : str
        Message of an unknown name, formatted with ``name``, ``names`` (the valid names,
        comma-separated) and ``alternatives`` (see :func:`alternatives`).

    Returns
    -------
    object
        The registered item.

    Raises
    ------
    ParameterError
        If ``name`` is not a registered name; the message lists the valid ones.
    """
    if isinstance(name, str) and name in registry:
        return registry[name]
    text = message.format(name=name, names=", ".join(registry), alternatives=alternatives(registry))
    raise ParameterError(parameter, text)
