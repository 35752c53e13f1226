"""A malicious SuperNode on a real deployment: its wrong shares cost nothing but its name.

Real Flower processes on loopback (a SuperLink, 6 SuperNodes over TLS with node
authentication, each SuperNode's runtime API closed by its own secret): 2 rounds of
Multi-RoundSecAgg (T = 2) with all 6 users a round, where user 0's node sends every share of its
round-0 unmasking response wrong (``badshare@0``). Issue #28, finding 5: the run used to crash
in round 0 with no report; now the server rebuilds every secret around the wrong shares, names
user 0, aggregates exactly what the in-process pipeline aggregates, and writes the report.
Takes a minute or two on 2 cores.
"""

from __future__ import annotations

import importlib.util
import json
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fedprivacy.experiments.training_config import TrainConfig

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("flwr") is None or sys.platform != "linux",
    reason="needs fedprivacy[flower] (make install installs it) on Linux",
)

USERS = 6
OFFENDER = 0
CONFIG = TrainConfig(
    users=USERS,
    per_round=USERS,  # 5 holders per secret, threshold 4: one share to spare
    rounds=2,
    scheme="multiround",
    target_privacy=2,
    secagg=True,
    dropout=0.0,
    trainer="loop",
    seed=3,
    eval_every=2,
)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from fedprivacy.flower.deploy import FaultPlan, deploy

    run_dir = tmp_path_factory.mktemp("malicious")
    events: list[dict[str, Any]] = []
    summary = deploy(
        CONFIG,
        USERS,
        run_dir,
        stage_timeout=90.0,
        timeout=900.0,
        faults=FaultPlan(badshare={OFFENDER: 0}),
        on_event=events.append,
    )
    return {"summary": summary, "run_dir": run_dir, "events": events}


def test_the_run_completes_names_the_offender_and_writes_its_report(
    deployment: dict[str, Any],
) -> None:
    s, run_dir = deployment["summary"], deployment["run_dir"]
    assert s["engine"] == "deployment" and s["tls"] is True
    assert s["rounds"] == 2 and s["rounds_aggregated"] == 2 and s["aborted"] == []
    named = {(e["round"], e["user"]) for e in s["bad_shares"]}
    assert named == {(0, OFFENDER)}
    assert any(e.get("event") == "bad_share" for e in deployment["events"])
    for name in ("privacy.md", "summary.json", "participation.csv"):
        assert (run_dir / name).stat().st_size > 0
    written = json.loads((run_dir / "summary.json").read_text())
    assert written["bad_shares"] == s["bad_shares"]
    # the wrong shares changed nothing: every aggregate is the honest in-process pipeline's
    assert s["max_abs_error_vs_simulation"] == 0.0
    rounds = [e for e in deployment["events"] if e.get("event") == "round"]
    assert rounds[0]["aggregated"] == list(range(USERS))  # its own input stays in the sum


def test_each_supernode_had_its_own_runtime_secret(deployment: dict[str, Any]) -> None:
    folder = deployment["run_dir"] / "runtime-secrets"
    secrets = sorted(folder.iterdir())
    assert [p.name for p in secrets] == [f"supernode-{u}.secret" for u in range(USERS)]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in secrets)
    assert len({p.read_bytes() for p in secrets}) == USERS


def test_every_process_of_the_deployment_is_stopped(
    deployment: dict[str, Any], processes_of: Callable[[Path], list[int]]
) -> None:
    assert processes_of(deployment["run_dir"]) == []
