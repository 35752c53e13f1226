"""Real Flower processes on loopback: a SuperLink and 8 SuperNodes over TLS, and the Ray engine.

One deployment runs 3 rounds of Multi-RoundSecAgg (K = 6, T = 2) with our SecAgg on the digits
MLP; in round 0 a selected node sends wrong unmasking shares, in round 1 a selected SuperNode is
killed before the masked-input stage, in round 2 a selected node replays its previous message.
Every process is stopped (checked through /proc), and every stage is bounded by a timeout. These
tests take a few minutes on 2 cores.
"""

from __future__ import annotations

import importlib.util
import json
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.fedavg.reference import observed_layout

pytestmark = [
    pytest.mark.deployment,
    pytest.mark.skipif(
        importlib.util.find_spec("flwr") is None or sys.platform != "linux",
        reason="needs fedprivacy[flower] (make install installs it) on Linux",
    ),
]

# K = 6 (three batches of T = 2): a lost batch leaves 4 inputs, the majority threshold of 6
# parties; with K = 4 the strict-majority threshold (3 of 4) aborts any round that loses a batch
USERS = 8
CONFIG = TrainConfig(
    users=USERS,
    per_round=6,
    rounds=3,
    scheme="multiround",
    target_privacy=2,
    secagg=True,
    dropout=0.0,
    trainer="loop",
    seed=3,
    eval_every=3,
)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from fedprivacy.flower.deploy.deploy import FaultPlan, deploy
    from fedprivacy.flower.messaging.stages import Stage

    run_dir = tmp_path_factory.mktemp("deployment")
    events: list[dict[str, Any]] = []
    summary = deploy(
        CONFIG,
        USERS,
        run_dir,
        tls=True,
        node_auth=True,
        stage_timeout=90.0,
        timeout=900.0,
        # the nodes draw their batches: who is asked when is known only once the run goes, so
        # each node's fault falls on the first user asked in its round (``*@R``), the kill on
        # the last
        faults=FaultPlan(kill=(None, 1, Stage.MASK), replay={None: 2}, badshare={None: 0}),
        on_event=events.append,
    )
    rounds = [e for e in events if e["event"] == "round"]
    (killed,) = [e["user"] for e in events if e["event"] == "killed"]
    layout = observed_layout(events)
    assert layout is not None
    return {
        "summary": summary,
        "run_dir": run_dir,
        "victim": killed,
        "replayer": min(rounds[2]["selected"]),
        "offender": min(rounds[0]["selected"]),
        "events": events,
        "batches": layout.batches(range(USERS), 2),
    }


def _batch_of(deployment: dict[str, Any], user: int) -> frozenset[int]:
    """The user's batch among those the nodes drew."""
    (batch,) = [b for b in deployment["batches"].values() if user in b]
    return batch


def _rounds(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in deployment["events"] if e["event"] == "round"]


def test_eight_supernodes_over_tls_aggregate_what_the_in_process_pipeline_aggregates(
    deployment: dict[str, Any],
) -> None:
    s = deployment["summary"]
    assert s["tls"] is True and s["node_auth"] is True
    assert s["supernodes"] == USERS and s["rounds"] == 3
    assert s["rounds_aggregated"] == 3
    # every round's aggregate (the faulty ones included) equals the in-process pipeline's, with
    # the availability and dropouts the deployment saw
    assert s["max_abs_error_vs_simulation"] == 0.0
    roster = json.loads((deployment["run_dir"] / "roster.json").read_text())
    assert sorted(int(u) for u in roster) == list(range(USERS))
    assert len(set(roster.values())) == USERS  # one node per user


def test_killing_a_supernode_before_the_masked_input_costs_its_whole_batch(
    deployment: dict[str, Any],
) -> None:
    victim = deployment["victim"]
    assert {"round": 1, "stage": "mask", "event": "killed", "user": victim} in deployment["events"]
    r1 = _rounds(deployment)[1]
    assert victim in r1["selected"] and victim not in r1["aggregated"]
    lost = set(r1["selected"]) - set(r1["aggregated"])
    assert lost == _batch_of(deployment, victim)  # its batch (drawn by the nodes), whole
    assert victim not in _rounds(deployment)[2]["selected"]  # gone: not asked again


def test_a_replayed_message_is_rejected_with_the_protocols_typed_error(
    deployment: dict[str, Any],
) -> None:
    replayer = deployment["replayer"]
    rejected = [(e["round"], e["stage"], e["user"]) for e in deployment["summary"]["rejected"]]
    assert rejected == [(2, "mask", replayer)]
    error = deployment["summary"]["rejected"][0]["error"]
    assert error in ("DuplicateMessageError", "OutOfOrderError")
    r2 = _rounds(deployment)[2]
    assert not _batch_of(deployment, replayer) & set(r2["aggregated"])


def test_wrong_unmasking_shares_cost_nothing_but_the_offenders_name(
    deployment: dict[str, Any],
) -> None:
    """Issue #28, finding 5: one node's wrong shares used to crash the run with no report."""
    s, offender = deployment["summary"], deployment["offender"]
    assert {(e["round"], e["user"]) for e in s["bad_shares"]} == {(0, offender)}
    assert s["aborted"] == []
    assert any(e.get("event") == "bad_share" for e in deployment["events"])
    r0 = _rounds(deployment)[0]
    assert offender in r0["aggregated"] and r0["aggregated"] == r0["selected"]
    # the sum is still exact (max_abs_error_vs_simulation == 0 above) and the report written
    assert (deployment["run_dir"] / "privacy.md").stat().st_size > 0


def test_each_supernode_had_its_own_runtime_secret(deployment: dict[str, Any]) -> None:
    """Issue #28, finding 7: each node's runtime API closed by its own fresh secret."""
    folder = deployment["run_dir"] / "runtime-secrets"
    secrets = sorted(folder.iterdir())
    assert sorted(p.name for p in secrets) == sorted(f"supernode-{u}.secret" for u in range(USERS))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in secrets)
    assert len({p.read_bytes() for p in secrets}) == USERS


def test_the_audit_of_the_collected_log_shows_t_weak_at_least_t(
    deployment: dict[str, Any],
) -> None:
    log = deployment["summary"]["participation"]
    out = subprocess.run(
        [sys.executable, "-m", "fedprivacy.cli.main", "audit", log, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    audit = json.loads(out.stdout)
    assert audit["t_weak"]["lower"] >= 2  # certified: no combination isolates fewer than T
    assert audit["exposed_users"] == []
    matrix = np.loadtxt(log, delimiter=",", skiprows=1)
    assert matrix.shape == (3, USERS)


def test_every_process_of_the_deployment_is_stopped(
    deployment: dict[str, Any], processes_of: Callable[[Path], list[int]]
) -> None:
    assert processes_of(deployment["run_dir"]) == []


def test_a_supernode_with_a_certificate_of_another_ca_is_refused(
    tmp_path: Path, processes_of: Callable[[Path], list[int]]
) -> None:
    from fedprivacy.flower.deploy.local_deployment import LocalDeployment
    from fedprivacy.flower.deploy.tls import generate_tls_materials

    other = generate_tls_materials(tmp_path / "other-ca")
    with LocalDeployment(tmp_path / "run") as dep:
        dep.start_superlink()
        bad = dep.start_supernode(0, root_certificates=other.ca_cert)
        dep.start_supernode(1)
        deadline = time.monotonic() + 60
        good_log = dep.log_path("supernode-1")
        while time.monotonic() < deadline and (
            bad.poll() is None or "SuperNode ID" not in good_log.read_text(errors="replace")
        ):
            time.sleep(0.2)
        bad_log = dep.log_path("supernode-0").read_text(errors="replace")
        assert bad.poll() is not None and bad.returncode != 0
        assert "CERTIFICATE_VERIFY_FAILED" in bad_log and "SuperNode ID" not in bad_log
        assert "SuperNode ID" in good_log.read_text(errors="replace")  # the CA's own is accepted
    assert processes_of(tmp_path / "run") == []


def test_a_supernode_whose_key_was_not_registered_is_refused(
    tmp_path: Path, processes_of: Callable[[Path], list[int]]
) -> None:
    from fedprivacy.flower.deploy.local_deployment import LocalDeployment
    from fedprivacy.flower.nodes.node_auth import generate_node_keys

    keys = generate_node_keys(tmp_path / "keys", [0, 1])
    with LocalDeployment(tmp_path / "run") as dep:
        dep.start_superlink(node_auth=True)
        dep.write_flower_config()
        dep.register_supernodes([keys[0]])
        dep.start_supernode(0, keys=keys[0])
        stranger = dep.start_supernode(1, keys=keys[1])  # valid key pair, never registered
        deadline = time.monotonic() + 60
        good_log = dep.log_path("supernode-0")
        while time.monotonic() < deadline and (
            stranger.poll() is None or "SuperNode ID" not in good_log.read_text(errors="replace")
        ):
            time.sleep(0.2)
        log = dep.log_path("supernode-1").read_text(errors="replace")
        assert stranger.poll() is not None and stranger.returncode != 0
        assert "Failed to activate SuperNode" in log and "SuperNode ID" not in log
        assert "SuperNode ID" in good_log.read_text(errors="replace")
    assert processes_of(tmp_path / "run") == []


def test_the_same_app_runs_on_the_ray_simulation_engine(
    tmp_path: Path,
    processes_of: Callable[[Path], list[int]],
    ray_processes: Callable[[], set[int]],
) -> None:
    from fedprivacy.flower.deploy.deploy import deploy

    before = ray_processes()
    summary = deploy(CONFIG, USERS, tmp_path, simulation=True, stage_timeout=120.0, timeout=600)
    assert summary["engine"] == "simulation (Ray)" and summary["tls"] is False
    assert summary["rounds_aggregated"] == 3
    assert summary["max_abs_error_vs_simulation"] == 0.0
    assert processes_of(tmp_path) == []
    assert ray_processes() - before == set()  # Ray's agents too (their environ is overwritten)
