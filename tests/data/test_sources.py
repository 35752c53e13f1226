import dataclasses
import gzip
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from fedprivacy.data import sources
from fedprivacy.data.sources import (
    DATA_ENV,
    KNOWN_FILES,
    cache_dir,
    file_digest,
    resolve_data_dir,
    sha256_file,
    verify_file,
    verify_known_file,
)
from fedprivacy.errors import ChecksumError, DataNotFoundError, ParameterError

# -- resolve_data_dir ----------------------------------------------------------------------------


def test_argument_beats_environment(tmp_path, monkeypatch):
    arg = tmp_path / "arg"
    env = tmp_path / "env"
    arg.mkdir()
    env.mkdir()
    monkeypatch.setenv(DATA_ENV, str(env))
    assert resolve_data_dir(arg) == arg.resolve()
    assert resolve_data_dir(str(arg)) == arg.resolve()


def test_environment_used_without_argument(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert resolve_data_dir(None) == tmp_path.resolve()


@pytest.mark.parametrize("env", [None, ""])
def test_no_directory_explains_both_ways_and_layout(monkeypatch, env):
    if env is None:
        monkeypatch.delenv(DATA_ENV, raising=False)
    else:
        monkeypatch.setenv(DATA_ENV, env)
    with pytest.raises(DataNotFoundError) as info:
        resolve_data_dir(None)
    msg = str(info.value)
    for needle in ("--data-dir", DATA_ENV, "mnist/", "cifar10_jpeg/", "cifar-10-python.tar.gz"):
        assert needle in msg


def test_missing_directory_named(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))  # must not be used: the argument wins
    missing = tmp_path / "nope"
    with pytest.raises(DataNotFoundError, match="nope.*does not exist"):
        resolve_data_dir(missing)
    monkeypatch.setenv(DATA_ENV, str(missing))
    with pytest.raises(DataNotFoundError, match=DATA_ENV):
        resolve_data_dir(None)


def test_file_is_not_a_directory(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(DataNotFoundError, match="not a directory"):
        resolve_data_dir(f)


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv(sources.CACHE_ENV)
    assert cache_dir() == Path.home() / ".cache" / "fedprivacy"


# -- digests and verify_file ---------------------------------------------------------------------


def test_sha256_streams_and_notices_changes(tmp_path):
    f = tmp_path / "blob.bin"
    payload = os.urandom(3 * (1 << 20) + 17)  # several chunks
    f.write_bytes(payload)
    assert sha256_file(f) == hashlib.sha256(payload).hexdigest()
    f.write_bytes(b"other content")
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))  # make sure mtime differs from before
    assert sha256_file(f) == hashlib.sha256(b"other content").hexdigest()
    assert file_digest(f, "md5") == hashlib.md5(b"other content").hexdigest()


def test_file_digest_rejects_unknown_algorithm(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"x")
    with pytest.raises(ParameterError, match="algorithm"):
        file_digest(f, "sha1")


def test_verify_file_ok_tampered_and_missing(tmp_path):
    f = tmp_path / "data.bin"
    f.write_bytes(b"hello world\n" * 1000)
    good = hashlib.sha256(f.read_bytes()).hexdigest()
    verify_file(f, good, what="test data")
    verify_file(f, good.upper(), what="test data")

    tampered = tmp_path / "tampered.bin"
    raw = bytearray(f.read_bytes())
    raw[100] ^= 1
    tampered.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError) as info:
        verify_file(tampered, good, what="test data")
    assert "tampered.bin" in str(info.value) and good in str(info.value)

    with pytest.raises(DataNotFoundError) as info2:
        verify_file(tmp_path / "absent.bin", good, what="test data", url="https://example.org/x")
    assert "absent.bin" in str(info2.value) and "https://example.org/x" in str(info2.value)


def test_verify_file_missing_known_name_says_where_to_download(tmp_path):
    with pytest.raises(DataNotFoundError) as info:
        verify_file(tmp_path / "cifar-100-python.tar.gz", "0" * 64, what="CIFAR-100")
    assert "cifar-100-python.tar.gz" in str(info.value)
    assert "https://www.cs.toronto.edu/~kriz/cifar.html" in str(info.value)


def test_verify_known_file_md5(tmp_path, monkeypatch):
    payload = b"not really cifar"
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(payload)
    with pytest.raises(ChecksumError, match="MD5"):
        verify_known_file(tmp_path, "cifar-10-python.tar.gz")
    entry = dataclasses.replace(
        KNOWN_FILES["cifar-10-python.tar.gz"], md5=hashlib.md5(payload).hexdigest()
    )
    monkeypatch.setitem(KNOWN_FILES, "cifar-10-python.tar.gz", entry)
    assert verify_known_file(tmp_path, "cifar-10-python.tar.gz") == (
        tmp_path / "cifar-10-python.tar.gz"
    )


def test_verify_known_file_missing(tmp_path):
    with pytest.raises(DataNotFoundError) as info:
        verify_known_file(tmp_path, "mnist/train-images-idx3-ubyte.gz")
    assert "mnist/train-images-idx3-ubyte.gz" in str(info.value)
    assert "yann.lecun.com" in str(info.value)


# -- the real shared data ------------------------------------------------------------------------


def test_table_matches_published_sha256sums(data_dir):
    published = {}
    for line in (data_dir / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        published[name.removeprefix("./")] = digest
    checked = 0
    for rel, known in KNOWN_FILES.items():
        if known.sha256 is not None:
            assert published[rel] == known.sha256
            checked += 1
    assert checked >= 3


def test_real_files_verify(data_dir):
    for rel in KNOWN_FILES:
        if (data_dir / rel).is_file():
            assert verify_known_file(data_dir, rel) == data_dir / rel


def test_recompressed_mnist_accepted_by_content(data_dir, tmp_path):
    (tmp_path / "mnist").mkdir()
    rel = "mnist/train-labels-idx1-ubyte.gz"
    content = gzip.decompress((data_dir / rel).read_bytes())
    (tmp_path / rel).write_bytes(gzip.compress(content, compresslevel=1, mtime=0))
    assert sha256_file(tmp_path / rel) != KNOWN_FILES[rel].sha256
    verify_known_file(tmp_path, rel)  # same content, different .gz bytes: accepted

    changed = bytearray(content)
    changed[-1] = (changed[-1] + 1) % 10
    (tmp_path / rel).write_bytes(gzip.compress(bytes(changed), mtime=0))
    os.utime(tmp_path / rel, ns=(1, 1))
    with pytest.raises(ChecksumError, match="gunzipped"):
        verify_known_file(tmp_path, rel)


def test_corrupt_gzip_is_a_checksum_error(data_dir, tmp_path):
    (tmp_path / "mnist").mkdir()
    rel = "mnist/t10k-labels-idx1-ubyte.gz"
    shutil.copyfile(data_dir / rel, tmp_path / rel)
    raw = bytearray((tmp_path / rel).read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / rel).write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="t10k-labels"):
        verify_known_file(tmp_path, rel)
