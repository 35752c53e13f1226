"""Name registries: one :class:`Registry` type for every table from a name to an implementation.

Each extension point of the package (accountant kinds, models, datasets, partitions, selectors,
fairness rules, method families, mechanisms, experiment runners, ...) is a module-level
:class:`Registry`. A factory looks a name up with :meth:`Registry.lookup` (or ``registry[name]``;
an unknown name is a :class:`~fedprivacy.errors.ParameterError` that lists the valid ones)
instead of an ``if name == ...`` chain, and a new implementation is added with
:meth:`Registry.register`, which refuses an empty or taken name.

Examples
--------
>>> SHAPES: Registry[int] = Registry("shape")
>>> SHAPES.register("square", 4)
4
>>> SHAPES.register("triangle", 3)
3
>>> SHAPES["square"], "circle" in SHAPES, SHAPES.names(), len(SHAPES)
(4, False, ('square', 'triangle'), 2)
>>> SHAPES.lookup("circle")
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: shape: must be one of square, triangle; got 'circle'
>>> SHAPES.register("square", 5)
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: shape: 'square' is registered already
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from typing import Final, TypeVar, overload

from fedprivacy.errors import ParameterError

__all__ = ["UNKNOWN", "Registry", "alternatives"]

T = TypeVar("T")
D = TypeVar("D")

#: The default message of an unknown name (``{names}``: the valid names, comma-separated).
UNKNOWN = "must be one of {names}; got {name!r}"


class _Missing(Enum):
    """The type of :data:`_MISSING`."""

    MISSING = 0


_MISSING: Final = _Missing.MISSING


def alternatives(names: Iterable[str]) -> str:
    """The names quoted and joined as alternatives: ``'a' or 'b'``, ``'a', 'b' or 'c'``.

    Examples
    --------
    >>> alternatives(["rdp", "pld"])
    "'rdp' or 'pld'"
    >>> alternatives({"a": 1, "b": 2, "c": 3})
    "'a', 'b' or 'c'"
    """
    quoted = [repr(n) for n in names]
    return " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)


class Registry(Mapping[str, T]):
    """A table from names to items (classes, builders, runners), in registration order.

    A read-only :class:`~collections.abc.Mapping` (``in``, iteration, ``len``, ``items()``,
    ``values()``, ``get``, ``dict(registry)``) whose only ways in are :meth:`register` and
    :meth:`unregister`, and whose lookups of an unknown name raise a
    :class:`~fedprivacy.errors.ParameterError` that lists the valid names.

    Parameters
    ----------
    parameter : str
        What a name is (the :class:`~fedprivacy.errors.ParameterError`'s name, as the user
        spells the option), e.g. ``"scheme"``.
    unknown : str
        Message of an unknown name, formatted with ``name`` (the name asked for), ``names``
        (the valid names, comma-separated) and ``alternatives`` (the valid names quoted, see
        :func:`alternatives`). Default :data:`UNKNOWN`.

    Examples
    --------
    >>> KINDS: Registry[type] = Registry("kind", "must be {alternatives}, got {name!r}")
    >>> @KINDS.register("number")
    ... class Number:
    ...     pass
    >>> KINDS.register("text", str) is str
    True
    >>> KINDS["number"] is Number, list(KINDS), dict(KINDS.items())["text"]
    (True, ['number', 'text'], <class 'str'>)
    >>> KINDS.lookup("list")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: kind: must be 'number' or 'text', got 'list'
    >>> KINDS.lookup("list", parameter="kinds")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: kinds: must be 'number' or 'text', got 'list'
    >>> KINDS.register("", int)
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: kind: a name must be a non-empty string, got ''
    >>> with KINDS.restoring():
    ...     _ = KINDS.register("integer", int)
    ...     "integer" in KINDS
    True
    >>> "integer" in KINDS, KINDS.get("integer"), KINDS
    (False, None, Registry('kind', ['number', 'text']))
    """

    def __init__(self, parameter: str, unknown: str = UNKNOWN) -> None:
        self.parameter = parameter
        self.unknown = unknown
        self._items: dict[str, T] = {}

    @overload
    def register(self, name: str, item: T) -> T: ...

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...

    def register(self, name: str, item: T | _Missing = _MISSING) -> T | Callable[[T], T]:
        """Add ``item`` under ``name`` and return it; without ``item``, a decorator that does.

        Parameters
        ----------
        name : str
            The new name, non-empty.
        item : object, optional
            What the name stands for. Left out, the result is a decorator registering what it
            decorates (a function or class) and returning it unchanged (typed as ``T``: a class
            whose own type matters to mypy is better registered after its definition).

        Returns
        -------
        object or callable
            ``item``, or the decorator.

        Raises
        ------
        ParameterError
            If ``name`` is not a non-empty string or is registered already.
        """
        if not isinstance(name, str) or not name:
            raise ParameterError(self.parameter, f"a name must be a non-empty string, got {name!r}")
        if name in self._items:
            raise ParameterError(self.parameter, f"{name!r} is registered already")
        if isinstance(item, _Missing):
            return lambda obj: self.register(name, obj)
        self._items[name] = item
        return item

    def unregister(self, name: str) -> T:
        """Remove ``name`` (a registered name) and return its item.

        Raises
        ------
        ParameterError
            If ``name`` is not registered.
        """
        item = self.lookup(name)
        del self._items[name]
        return item

    def lookup(self, name: object, *, parameter: str | None = None) -> T:
        """The item registered as ``name``.

        Parameters
        ----------
        name : object
            The name asked for (any object: a non-string is unknown).
        parameter : str, optional
            The error's parameter name when it is not the registry's (e.g. a list option).

        Returns
        -------
        object
            The registered item.

        Raises
        ------
        ParameterError
            If ``name`` is not registered; the message lists the valid names.
        """
        if isinstance(name, str) and name in self._items:
            return self._items[name]
        text = self.unknown.format(
            name=name, names=", ".join(self._items), alternatives=alternatives(self._items)
        )
        raise ParameterError(self.parameter if parameter is None else parameter, text)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._items)

    @contextmanager
    def restoring(self) -> Iterator[Registry[T]]:
        """A context in which registrations are undone on exit (for tests and experiments)."""
        saved = dict(self._items)
        try:
            yield self
        finally:
            self._items.clear()
            self._items.update(saved)

    def __getitem__(self, name: str) -> T:
        """``lookup(name)``."""
        return self.lookup(name)

    @overload
    def get(self, name: str, /) -> T | None: ...

    @overload
    def get(self, name: str, /, default: T | D) -> T | D: ...

    def get(self, name: str, /, default: object = None) -> object:
        """The item of ``name``, or ``default`` if ``name`` is not registered."""
        return self._items.get(name, default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.parameter!r}, {list(self._items)})"
