"""Digests of data files, streamed and cached per process on path, size and modification time.

The loaders verify every file against its published checksum
(:func:`fedprivacy.data.sources.verify_known_file`); a large file is hashed once per process
unless it changes.

Examples
--------
>>> import tempfile
>>> path = Path(tempfile.mkdtemp()) / "f"
>>> _ = path.write_bytes(b"abc")
>>> sha256_file(path)[:16]
'ba7816bf8f01cfea'
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import zlib
from collections.abc import Callable
from pathlib import Path

from fedprivacy.errors import ParameterError

__all__ = ["clear_digest_cache", "file_digest", "sha256_file"]

_CHUNK = 1 << 20
_ALGORITHMS = ("sha256", "md5")


def _hash_stream(read: Callable[[int], bytes], algorithm: str) -> str:
    h = hashlib.new(algorithm)
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            break
        h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=256)
def _cached_digest(
    path: str, size: int, mtime_ns: int, algorithm: str, gzip_content: bool
) -> str | None:
    # size and mtime_ns are part of the cache key only: a changed file is hashed again.
    del size, mtime_ns
    if gzip_content:
        try:
            with gzip.open(path, "rb") as fh:
                return _hash_stream(fh.read, algorithm)
        except (OSError, EOFError, zlib.error):
            return None  # not a valid gzip file: cannot match any content digest
    with open(path, "rb") as fh:
        return _hash_stream(fh.read, algorithm)


def file_digest(path: Path, algorithm: str = "sha256", *, gzip_content: bool = False) -> str | None:
    """Return the hex digest of a file (streaming, cached on path, size and mtime).

    Parameters
    ----------
    path : pathlib.Path
        The file.
    algorithm : {"sha256", "md5"}
        Hash algorithm.
    gzip_content : bool
        Hash the decompressed content of a gzip file instead of the file itself.

    Returns
    -------
    str or None
        The lowercase hex digest; ``None`` only when ``gzip_content`` is set and the file is not a
        valid gzip stream.

    Raises
    ------
    ParameterError
        If ``algorithm`` is not supported.
    OSError
        If the file cannot be read.
    """
    if algorithm not in _ALGORITHMS:
        raise ParameterError("algorithm", f"must be one of {_ALGORITHMS}, got {algorithm!r}")
    p = Path(path).resolve()
    st = p.stat()
    return _cached_digest(str(p), st.st_size, st.st_mtime_ns, algorithm, gzip_content)


def sha256_file(path: Path) -> str:
    """Return the SHA-256 hex digest of a file, read in 1 MiB chunks.

    Results are cached per process on ``(path, size, mtime)``.

    Parameters
    ----------
    path : pathlib.Path
        The file.

    Returns
    -------
    str
        Lowercase hex digest.
    """
    digest = file_digest(path, "sha256")
    assert digest is not None
    return digest


def clear_digest_cache() -> None:
    """Forget every cached digest (for tests, or after a file was replaced in place)."""
    _cached_digest.cache_clear()
