"""Participation-log readers: formats, headers, encodings and clear errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.cli.main import main
from fedprivacy.errors import ParameterError
from fedprivacy.participation.ledger import ParticipationLedger


@pytest.mark.parametrize("first", ["1,2,0", "0.5,1,0", "1,nan,0"])
def test_numeric_first_row_is_never_a_header(tmp_path: Path, first: str) -> None:
    f = tmp_path / "f.csv"
    f.write_text(f"{first}\n0,1,1\n")
    with pytest.raises(ParameterError, match=r"round 0 \(line 1\), column [01] "):
        ParticipationLedger.from_csv(f)


def test_cli_reports_bad_first_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "f.csv"
    f.write_text("1,2,0\n0,1,1\n")
    assert main(["audit", str(f)]) == 2
    assert "fedprivacy audit: error:" in capsys.readouterr().err


@pytest.mark.parametrize("num_users", [1, 2, 3, 7])
def test_to_csv_round_trips(tmp_path: Path, num_users: int) -> None:
    rng = np.random.default_rng(num_users)
    p = (rng.random((5, num_users)) < 0.5).astype(np.uint8)
    ledger = ParticipationLedger.from_matrix(p)
    ledger.to_csv(tmp_path / "p.csv")
    back = ParticipationLedger.from_csv(tmp_path / "p.csv")
    assert back.matrix().tolist() == p.tolist()
    assert back.rounds == 5


@pytest.mark.parametrize("scheme", ["random", "weighted-random", "partition", "multiround"])
@pytest.mark.parametrize("n", [2, 4])
def test_simulate_then_audit_round_trip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scheme: str, n: int
) -> None:
    out = tmp_path / "d"
    args = ["simulate", "--scheme", scheme, "-N", str(n), "-K", "2", "-R", "3", "--out", str(out)]
    if scheme == "multiround":
        args += ["-T", "2"]
    assert main([*args, "-q"]) == 0
    capsys.readouterr()
    back = ParticipationLedger.from_csv(out / "participation.csv")
    assert back.rounds == 3 and back.num_users == n
    assert all(s.size in (0, 2) for s in (back.selected(r) for r in range(3)))


def test_bom_is_stripped(tmp_path: Path) -> None:
    f = tmp_path / "excel.csv"
    f.write_bytes("alice,bob\n1,0\n1,1\n".encode("utf-8-sig"))
    assert ParticipationLedger.from_csv(f).user_ids == ["alice", "bob"]


def test_gzip_detected_by_magic_bytes(tmp_path: Path) -> None:
    f = tmp_path / "log.csv"  # no .gz suffix
    f.write_bytes(gzip.compress(b"a,b\n1,0\n0,1\n"))
    assert ParticipationLedger.from_csv(f).matrix().tolist() == [[1, 0], [0, 1]]


def test_long_form(tmp_path: Path) -> None:
    f = tmp_path / "long.csv"
    f.write_text("round,user\n0,3\n0,10\n2,3\n")
    ledger = ParticipationLedger.from_csv(f)
    assert ledger.user_ids == ["3", "10"]
    assert ledger.matrix().tolist() == [[1, 1], [0, 0], [1, 0]]
    bare = tmp_path / "bare.csv"
    bare.write_text("0,5\n1,5\n1,7\n")
    assert ParticipationLedger.from_csv(bare).matrix().tolist() == [[1, 0], [1, 1]]
    dup = tmp_path / "dup.csv"
    dup.write_text("round,user\n0,a\n0,a\n")
    with pytest.raises(ParameterError, match="twice"):
        ParticipationLedger.from_csv(dup)


@pytest.mark.parametrize("kind", ["binary", "directory"])
def test_unreadable_inputs_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    target = tmp_path / "x"
    if kind == "binary":
        target.write_bytes(bytes(range(128, 256)))
    else:
        target.mkdir()
    with pytest.raises(ParameterError):
        ParticipationLedger.from_csv(target)
    assert main(["audit", str(target)]) == 2
    assert "fedprivacy audit: error:" in capsys.readouterr().err


def test_cli_audits_gzipped_long_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    lines = ["round,user"] + [f"{r},{u}" for r in range(40) for u in range(r % 7, 200, 9)]
    lines += ["40,alone"]
    f = tmp_path / "big.log"
    f.write_bytes(gzip.compress("\n".join(lines).encode()))
    assert main(["audit", str(f), "--json", "--time-limit", "20"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rounds"] == 41 and "alone" in data["exposed_users"]
    assert data["t_weak"]["upper"] == 1 and data["t_weak"]["lower"] == 1
