r"""One (de)serialisation for every configuration dataclass: mappings and TOML files.

A configuration is a dataclass that derives from :class:`Config`; every field is a key. The
field types say how a value read from a file is checked and converted (:func:`coerce`), so the
classes themselves only declare their fields and validate them.

A TOML file (or mapping) may be flat, or group its keys into sections (tables) of any name, one
level deep: a section name is only grouping, every key is still a field name and may be given
once in the whole file. :meth:`Config.to_toml` writes the flat form, which every reader
understands.

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Run(Config):
...     users: int = 20
...     lr: float = 0.1
...     tags: tuple[str, ...] = ()
>>> flat = tomllib.loads("users = 8\nlr = 1")
>>> sectioned = tomllib.loads("[selection]\nusers = 8\n[training]\nlr = 1")
>>> Run.from_mapping(flat) == Run.from_mapping(sectioned) == Run(users=8, lr=1.0)
True
>>> print(Run(tags=("a", "b")).to_toml(), end="")
users = 20
lr = 0.1
tags = [
    "a",
    "b",
]
>>> Run.from_mapping({"users": "8"})
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: users: must be an integer, got '8'
>>> Run.from_mapping({"selection": {"users": 8}, "training": {"users": 9}})
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: config: key 'users' in [training] is also given in [selection]
"""

from __future__ import annotations

import dataclasses
import numbers
import tomllib
import types
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal, Self, Union, get_args, get_origin, get_type_hints

import tomli_w

from fedprivacy.config_sections import RENAMED_KEYS
from fedprivacy.errors import ParameterError

__all__ = ["Config", "coerce", "flatten_sections", "read_toml"]


class Config:
    """Base of the configuration dataclasses: ``to_dict``, ``to_toml`` and their inverses.

    A subclass is a (usually frozen) dataclass. A field declared with ``compare=False`` (a path
    on this machine, such as ``data_dir``) is not part of the run: equality ignores it and
    :meth:`to_toml` leaves it out.

    Examples
    --------
    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True)
    ... class Job(Config):
    ...     name: str
    ...     rate: float | None = None
    ...     data_dir: str | None = field(default=None, compare=False)
    >>> job = Job.from_mapping({"name": "a", "rate": 1, "data-dir": "/data"})
    >>> job
    Job(name='a', rate=1.0, data_dir='/data')
    >>> job.to_dict()
    {'name': 'a', 'rate': 1.0, 'data_dir': '/data'}
    >>> print(job.to_toml(), end="")
    name = "a"
    rate = 1.0
    >>> job.with_settings({"rate": 2}).rate
    2.0
    >>> Job.from_mapping({"rate": 0.5})
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: name: is required (no default)
    """

    def to_dict(self) -> dict[str, Any]:
        """Every field, TOML/JSON-ready: ``None`` values left out, tuples as lists."""
        out: dict[str, Any] = {}
        for f in _fields(type(self)):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def to_toml(self) -> str:
        """The configuration as flat TOML (fields with ``compare=False`` left out)."""
        local = {f.name for f in _fields(type(self)) if not f.compare}
        return tomli_w.dumps({k: v for k, v in self.to_dict().items() if k not in local})

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Self:
        """Build from a mapping of field names (flat or in sections; dashes accepted).

        Raises
        ------
        ParameterError
            For an unknown key (named ``config``; the message lists the known keys), a key of an
            old spelling (named after it; the message names the new one, see
            :data:`~fedprivacy.config_sections.RENAMED_KEYS`), a key given twice, a value of the
            wrong type (named after the field) or a missing required field.
        """
        values = _read(cls, data)
        missing = [f.name for f in _fields(cls) if f.name not in values and _required(f)]
        if missing:
            raise ParameterError(missing[0], "is required (no default)")
        return cls(**values)

    @classmethod
    def from_toml(cls, path: str | Path) -> Self:
        """Read a TOML file whose keys (flat or in sections) are the fields.

        Raises
        ------
        ParameterError
            If the file is missing, unreadable or not TOML (named ``config``), or as
            :meth:`from_mapping`, named ``FILE: key`` (a key of the file, not a flag).
        """
        data = read_toml(path)
        try:
            return cls.from_mapping(data)
        except ParameterError as exc:
            raise ParameterError(f"{path}: {exc.name}", str(exc)[len(exc.name) + 2 :]) from None

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> Self:
        """Build from a configuration this package wrote itself (a run directory, a checkpoint).

        As :meth:`from_mapping`, but the keys of an older spelling
        (:data:`~fedprivacy.config_sections.RENAMED_KEYS`) are read as their new one: a run
        started before a rename still resumes. A user's own file or flag gets the error instead.

        Examples
        --------
        >>> from fedprivacy.uldp.config import UldpConfig
        >>> UldpConfig.from_stored({"sigma": 2.0}).noise_multiplier
        2.0
        """
        hints = _hints(cls)
        renamed = {}
        for key, value in flatten_sections(data).items():
            name = key.replace("-", "_")
            new = RENAMED_KEYS.get(name)
            renamed[new if name not in hints and new in hints else key] = value
        return cls.from_mapping(renamed)

    @classmethod
    def from_stored_toml(cls, path: str | Path) -> Self:
        """:meth:`from_stored` of a TOML file this package wrote (a run's ``config.toml``)."""
        return cls.from_stored(read_toml(path))

    def differences(self, other: Config, ignore: Collection[str] = ()) -> list[str]:
        """The fields whose values differ between ``self`` and ``other``, sorted, but ``ignore``.

        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Run(Config):
        ...     users: int = 20
        ...     lr: float = 0.1
        >>> Run().differences(Run(users=8, lr=0.2), ignore=("lr",))
        ['users']
        """
        mine, theirs = self.to_dict(), other.to_dict()
        return sorted(
            k for k in set(mine) | set(theirs) if k not in ignore and mine.get(k) != theirs.get(k)
        )

    def with_settings(self, data: Mapping[str, Any]) -> Self:
        """A copy with the keys of ``data`` replaced, read as :meth:`from_mapping` reads them."""
        return dataclasses.replace(self, **_read(type(self), data))  # type: ignore[type-var]

    def with_overrides(self, **changes: Any) -> Self:
        """A copy with the given non-``None`` fields replaced (values taken as they are)."""
        changes = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def flatten_sections(data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``data`` with every section (a table) replaced by its keys.

    Keys keep their spelling; a key given twice (dashes and underscores are the same) is an
    error, as is a table inside a section.

    Raises
    ------
    ParameterError
        Named ``config``.

    Examples
    --------
    >>> flatten_sections({"seed": 1, "data": {"users": 8}, "training": {"lr-decay": 0.5}})
    {'seed': 1, 'users': 8, 'lr-decay': 0.5}
    >>> flatten_sections({"lr": 1.0, "training": {"lr": 0.5}})
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: config: key 'lr' in [training] is also given at the top level
    """
    out: dict[str, Any] = {}
    where: dict[str, tuple[str, str]] = {}
    for key, value in data.items():
        if not isinstance(value, Mapping):
            _put(out, where, key, value, "at the top level")
            continue
        for inner, item in value.items():
            if isinstance(item, Mapping):
                raise ParameterError(
                    "config", f"[{key}] holds the table {inner!r}: sections do not nest"
                )
            _put(out, where, inner, item, f"in [{key}]")
    return out


def _put(
    out: dict[str, Any], where: dict[str, tuple[str, str]], key: str, value: Any, place: str
) -> None:
    name = key.replace("-", "_")
    if name in where:
        first, spelling = where[name]
        alias = "" if spelling == key else f" as {spelling!r}"
        raise ParameterError("config", f"key {key!r} {place} is also given{alias} {first}")
    where[name] = (place, key)
    out[key] = value


def coerce(name: str, value: Any, hint: Any) -> Any:
    """``value`` of the field ``name`` checked against its type ``hint`` and converted.

    ``int`` takes integers (not bools), ``float`` any real number (not bools) as a float,
    ``bool`` only ``true`` / ``false``, ``str`` only strings, ``Literal`` one of its values,
    ``X | None`` also ``None``, ``tuple[X, ...]`` a list (or, for strings, a comma-separated
    string) of ``X``; a ``str | float`` union reads a number written as a string as the number.
    Other types pass through unchecked (the configuration's ``validate`` checks them).

    Raises
    ------
    ParameterError
        Named ``name``, for a value of the wrong type.

    Examples
    --------
    >>> coerce("lr", 1, float)
    1.0
    >>> coerce("milestones", [3, 5], tuple[int, ...])
    (3, 5)
    >>> coerce("estimators", "ols, fgd", tuple[str, ...])
    ('ols', 'fgd')
    >>> coerce("dropout", "0.2", str | float), coerce("dropout", "heterogeneous", str | float)
    (0.2, 'heterogeneous')
    >>> coerce("mode", "fast", Literal["exact", "none"])
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: mode: must be one of exact, none; got 'fast'
    """
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        return _coerce_union(name, value, [a for a in args if a is not type(None)])
    if origin is Literal:
        if value not in args:
            allowed = ", ".join(str(a) for a in args)
            raise ParameterError(name, f"must be one of {allowed}; got {value!r}")
        return value
    if origin is tuple or hint is tuple:
        return _coerce_tuple(name, value, args)
    check = _SCALARS.get(hint)
    return value if check is None else check(name, value)


def _coerce_union(name: str, value: Any, members: list[Any]) -> Any:
    if len(members) == 1:
        return coerce(name, value, members[0])
    if isinstance(value, str) and str in members:
        for number in (m for m in (int, float) if m in members):
            try:
                return number(value)
            except ValueError:
                pass
        return value
    for member in members:
        try:
            return coerce(name, value, member)
        except ParameterError:
            pass
    kinds = " or ".join(_KINDS.get(m, getattr(m, "__name__", str(m))) for m in members)
    raise ParameterError(name, f"must be {kinds}, got {value!r}")


def _coerce_tuple(name: str, value: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    variadic = len(args) == 2 and args[1] is Ellipsis
    if isinstance(value, str) and variadic and args[0] is str:
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple):
        raise ParameterError(name, f"must be a list, got {value!r}")
    if not args:
        return tuple(value)
    if variadic:
        return tuple(coerce(name, v, args[0]) for v in value)
    if len(value) != len(args):
        raise ParameterError(name, f"must be a list of {len(args)} values, got {value!r}")
    return tuple(coerce(name, v, a) for v, a in zip(value, args, strict=True))


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(name, f"must be an integer, got {value!r}")
    return int(value)


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(name, f"must be a number, got {value!r}")
    return float(value)


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(name, f"must be true or false, got {value!r}")
    return value


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ParameterError(name, f"must be a string, got {value!r}")
    return value


_SCALARS: dict[Any, Any] = {int: _int, float: _float, bool: _bool, str: _str}
_KINDS: dict[Any, str] = {int: "an integer", float: "a number", bool: "a boolean", str: "a string"}


def read_toml(path: str | Path) -> dict[str, Any]:
    """The top-level table of a TOML configuration file.

    Raises
    ------
    ParameterError
        If the file does not exist, cannot be read (a directory, no permission), is not UTF-8
        text or is not valid TOML (named ``config``).
    """
    p = Path(path)
    try:
        return tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ParameterError("config", f"file not found: {p}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError("config", f"{p} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ParameterError("config", f"{p} is not a text (UTF-8) file") from None
    except OSError as exc:
        raise ParameterError("config", f"cannot read {p}: {exc.strerror or exc}") from None


# -- helpers on the dataclass ----------------------------------------------------------------


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} derives from Config but is not a dataclass")
    return dataclasses.fields(cls)


def _hints(cls: type) -> dict[str, Any]:
    """The type of every field (annotations resolved once per class)."""
    hints = _HINTS.get(cls)
    if hints is None:
        names = {f.name for f in _fields(cls)}
        hints = {k: v for k, v in get_type_hints(cls).items() if k in names}
        _HINTS[cls] = hints
    return hints


_HINTS: dict[type, dict[str, Any]] = {}


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _read(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """Field values of ``data`` (sections flattened, dashes read as underscores), coerced."""
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for key, value in flatten_sections(data).items():
        name = key.replace("-", "_")
        if name not in hints:
            renamed = RENAMED_KEYS.get(name)
            if renamed in hints:
                raise ParameterError(key, f"is now spelled {renamed}")
            known = ", ".join(sorted(hints))
            raise ParameterError("config", f"unknown key {key!r}; known keys: {known}")
        values[name] = coerce(name, value, hints[name])
    return values
