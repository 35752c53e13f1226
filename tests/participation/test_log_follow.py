"""Following a growing log: the rounds equal those of reading the finished file."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.participation.log_follow import LogFollower
from fedprivacy.participation.log_formats import parse_log


def follow_in_chunks(path: Path, text: str, chunk: int) -> tuple[list[list[int]], LogFollower]:
    """Write ``text`` to ``path`` ``chunk`` bytes at a time, polling after each write."""
    follow = LogFollower(path)
    rounds: list[list[int]] = [s.tolist() for s in follow.poll()]  # no file yet
    data = text.encode()
    for start in range(0, len(data), chunk):
        with path.open("ab") as f:
            f.write(data[start : start + chunk])
        rounds.extend(s.tolist() for s in follow.poll())
    rounds.extend(s.tolist() for s in follow.finish())
    return rounds, follow


def random_wide(rng: np.random.Generator, header: bool) -> str:
    p = (rng.random((12, 5)) < 0.4).astype(int)
    lines = ["a,b,c,d,e"] if header else []
    return "\n".join([*lines, *(",".join(map(str, row)) for row in p)]) + "\n"


@pytest.mark.parametrize("chunk", [1, 7, 10_000])
@pytest.mark.parametrize("header", [True, False])
def test_wide_rounds_equal_the_finished_file(tmp_path: Path, chunk: int, header: bool) -> None:
    text = random_wide(np.random.default_rng(chunk), header)
    rounds, follow = follow_in_chunks(tmp_path / "log.csv", text, chunk)
    (tmp_path / "whole.csv").write_text(text)
    log = parse_log(tmp_path / "whole.csv")
    assert rounds == [s.tolist() for s in log.sets]
    assert follow.num_users == log.num_users


@pytest.mark.parametrize("chunk", [1, 5, 10_000])
def test_long_rounds_equal_the_finished_file(tmp_path: Path, chunk: int) -> None:
    text = "round,user\n0,carol\n0,alice\n1,bob\n4,alice\n4,bob\n5,dave\n"
    rounds, follow = follow_in_chunks(tmp_path / "log.csv", text, chunk)
    (tmp_path / "whole.csv").write_text(text)
    log = parse_log(tmp_path / "whole.csv")
    assert log.user_ids is not None
    named = [sorted(follow.user_ids[u] for u in r) for r in rounds]
    assert named == [sorted(log.user_ids[u] for u in s) for s in log.sets]


def test_long_without_header_is_read_from_its_names(tmp_path: Path) -> None:
    (tmp_path / "log.csv").write_text("0,alice\n1,bob\n")
    follow = LogFollower(tmp_path / "log.csv")
    assert [s.tolist() for s in follow.poll()] == [[0]]
    assert [s.tolist() for s in follow.finish()] == [[1]]


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("round,user\n1,a\n0,b\n", "in order"),
        ("round,user\n0,a\n0,a\n1,b\n", "twice"),
        ("1,0,1\n1,1\n", "columns"),
        ("1,0\n0,2\n", "expected 0 or 1"),
        ("round,user\nx,a\n", "not an integer"),
    ],
)
def test_malformed_logs_name_the_line(tmp_path: Path, text: str, word: str) -> None:
    (tmp_path / "log.csv").write_text(text)
    with pytest.raises(ParameterError, match=word):
        LogFollower(tmp_path / "log.csv").finish()


def test_gzip_and_replaced_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "log.csv.gz").write_bytes(gzip.compress(b"1,0\n"))
    with pytest.raises(ParameterError, match="gzip"):
        LogFollower(tmp_path / "log.csv.gz").poll()
    path = tmp_path / "log.csv"
    path.write_text("1,0\n0,1\n")
    follow = LogFollower(path)
    follow.poll()
    path.write_text("1,0\n")
    with pytest.raises(ParameterError, match="shrank"):
        follow.poll()
    with pytest.raises(ParameterError, match="directory"):
        LogFollower(tmp_path).poll()
