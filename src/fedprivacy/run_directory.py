"""The run directory every job writes: checked before the work, written atomically after it.

``fedprivacy train``, ``simulate``, ``uldp`` (and the cross-silo deployment through it) write
their outputs with :func:`write_run_directory`: each file from its content (text, bytes, or a
JSON value), atomically, then the plots. The command line checks an ``--out`` with
:func:`check_run_directory` when it parses it, so that a path that cannot become a run
directory (an existing file, a folder without write permission) is refused before any work,
not after the run.

Examples
--------
>>> import json, tempfile
>>> out = Path(tempfile.mkdtemp()) / "run"
>>> written = write_run_directory(check_run_directory(out), {"a.json": {"x": 1}, "b.txt": "hi"})
>>> [p.name for p in written], json.loads((out / "a.json").read_text())
(['a.json', 'b.txt'], {'x': 1})
>>> check_run_directory(out / "b.txt")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: out: .../b.txt exists and is not a folder
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_bytes, atomic_write_json, atomic_write_text

__all__ = ["RUN_FILES", "check_out_folder", "check_run_directory", "write_run_directory"]

#: Files or folders by which a folder is recognised as a run directory of this package (a
#: finished run's summary, a training's configuration or checkpoint, a deployment's logs).
RUN_FILES = ("summary.json", "config.toml", "checkpoint.pt", "audit.json", "logs", "tls")


def check_run_directory(path: str | os.PathLike[str]) -> Path:
    """``path``, if it can be a run directory: a folder, or nothing yet under a writable one.

    Nothing is created.

    Raises
    ------
    ParameterError
        Named ``out``: ``path`` (or the first of its parents that exists) is not a folder, or
        that folder is not writable.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ParameterError("out", f"{folder} exists and is not a folder")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ParameterError("out", f"{existing} is not a folder, so {folder} cannot be made")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ParameterError("out", f"cannot write in {existing}")
    return folder


def check_out_folder(folder: Path, *, resumable: bool, resume: bool) -> None:
    """Refuse an existing, non-empty ``--out`` that the run would mix its files into.

    An empty or new folder is always fine. A folder holding a run of this package
    (:data:`RUN_FILES`) is replaced by the new run, except where the command can continue it
    (``resumable``: ``train``, ``uldp``), which then needs ``--resume``. Any other non-empty
    folder is refused.

    Raises
    ------
    ParameterError
        Named ``out``.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> check_out_folder(folder, resumable=True, resume=False)  # empty: fine
    >>> _ = (folder / "notes.txt").write_text("mine")
    >>> try:
    ...     check_out_folder(folder, resumable=False, resume=False)
    ... except ParameterError as exc:
    ...     print(str(exc).split(" is ")[1])
    not empty and holds no fedprivacy run; choose a new or empty folder
    """
    if not folder.is_dir() or resume or not any(folder.iterdir()):
        return
    if not any((folder / name).exists() for name in RUN_FILES):
        raise ParameterError(
            "out",
            f"{folder} is not empty and holds no fedprivacy run; choose a new or empty folder",
        )
    if resumable:
        raise ParameterError(
            "out",
            f"{folder} holds a run; --resume {folder} continues it, or choose another folder "
            "(or remove it) to start again",
        )


def write_run_directory(
    out: str | os.PathLike[str],
    files: Mapping[str, str | bytes | Any],
    plots: Callable[[Path], list[Path]] | None = None,
) -> list[Path]:
    """Write ``files`` (name -> content) into ``out``, then ``plots(out)``; return the paths.

    A ``str`` is written as UTF-8 text, ``bytes`` as they are, anything else as indented JSON;
    every file atomically (a crash never leaves half a file).
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in files.items():
        path = folder / name
        if isinstance(content, str):
            atomic_write_text(path, content)
        elif isinstance(content, bytes):
            atomic_write_bytes(path, content)
        else:
            atomic_write_json(path, content)
        written.append(path)
    if plots is not None:
        written += plots(folder)
    return written
