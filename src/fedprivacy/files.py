"""Result files written atomically, so an interrupted run never leaves half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, private: bool = False, durable: bool = False
) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    The file gets the mode of an ordinary new file, ``0o666 & ~umask`` (``tempfile.mkstemp``
    alone would leave it at 0600, unreadable to colleagues on a shared server); with
    ``private=True`` (private keys) it stays 0600 from its creation on. With ``durable=True``
    the data and the rename are flushed to the disk (``fsync``) before the call returns.

    Examples
    --------
    >>> import os, stat, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> atomic_write_bytes(os.path.join(folder, "a.txt"), b"hi")
    >>> mode = stat.S_IMODE(os.stat(os.path.join(folder, "a.txt")).st_mode)
    >>> mode == 0o666 & ~_umask()
    True
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        if not private:
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def save_figure(
    fig: Any, path: str | os.PathLike[str], *, dpi: int = 120, tight: bool = False
) -> Path:
    """Write a matplotlib figure as PNG atomically and close it; return ``path``.

    ``tight`` crops the white border (``bbox_inches="tight"``).
    """
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)
