"""``fedprivacy audit --follow`` on a log written while it runs."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.cli.main import main
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.ledger import ParticipationLedger


def write_slowly(path: Path, lines: list[str], pause: float) -> threading.Thread:
    """Append ``lines`` to ``path`` one at a time, ``pause`` seconds apart, in a thread."""

    def write() -> None:
        for line in lines:
            with path.open("a") as f:
                f.write(line + "\n")
            time.sleep(pause)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_follow_reports_every_round_and_ends_at_the_batch_audit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rng = np.random.default_rng(4)
    p = (rng.random((8, 6)) < 0.5).astype(int)
    p[-1] = [1, 0, 0, 0, 0, 0]  # the last round isolates user a
    log = tmp_path / "log.csv"
    lines = ["a,b,c,d,e,f", *(",".join(map(str, row)) for row in p)]
    writer = write_slowly(log, lines, 0.05)
    out_dir = tmp_path / "out"
    code = main(["audit", str(log), "--follow", "--idle", "1.5", "--json", "--out", str(out_dir)])
    writer.join(timeout=10)
    assert code == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["round"] for r in rows] == list(range(8))
    batch = audit_ledger(ParticipationLedger.from_matrix(p, list("abcdef")), time_limit=10)
    assert rows[-1]["exposed_users"] == batch.exposure.exposed.size
    assert "a" in sum((r["newly_exposed"] for r in rows), [])
    assert (rows[-1]["t_weak_lower"], rows[-1]["t_weak_upper"]) == (1, 1)
    summary = json.loads((out_dir / "audit.json").read_text())
    assert summary["rounds"] == 8 and "a" in summary["exposed_users"]
    assert (out_dir / "audit_rounds.csv").read_text().count("\n") == 9


def test_follow_a_long_log_that_does_not_exist_yet(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "later.csv"
    writer = write_slowly(log, ["round,user", "0,alice", "0,bob", "2,bob"], 0.1)
    code = main(["audit", str(log), "--follow", "--idle", "1.0"])
    writer.join(timeout=10)
    out = capsys.readouterr().out
    assert code == 0
    assert "round 2: rank 2, T_weak = 1, T_strong 1, 2 exposed; EXPOSED now: alice, bob" in out
    assert "followed 3 round(s): 2 exposed" in out


def test_a_log_that_cannot_be_followed_is_refused_before_any_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["audit", str(tmp_path), "--follow", "--idle", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "is a directory" in err
