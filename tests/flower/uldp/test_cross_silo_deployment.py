"""Cross-silo ULDP-FL on real Flower processes: a SuperLink and 4 silo SuperNodes over TLS.

ULDP-AVG-w with the private weighting protocol (Paillier, X25519 key agreement relayed by the
server, blinded histograms, masks) runs its setup and 3 rounds as Flower messages; every round's
aggregate equals the same weighted sum computed in the clear in one process up to the silos' own
noise; silo 1 replays its previous reply in round 3, which the server refuses with the
protocol's typed error (the round is aborted). A second deployment SIGKILLs silo 2's SuperNode
before round 2's exchange: that round is aborted without output and without a privacy charge.
A third has a lying ServerApp (``forge``): it proposes sigma 1e-6, clip 1.0 instead of 0.1 and
a 1024-bit test key to silos whose operators' policies (written by ``deploy`` on each silo's
side) say sigma 1, clip 0.1 and 3072-bit keys; every silo refuses at the first stage, naming
the parameters, and the run still ends with its report. Every process is stopped. About five
minutes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fedprivacy.flower.deploy.local_deployment import DeploymentError
from fedprivacy.uldp.config import UldpConfig

pytestmark = [
    pytest.mark.deployment,
    pytest.mark.skipif(
        importlib.util.find_spec("flwr") is None or sys.platform != "linux",
        reason="needs fedprivacy[flower] (make install installs it) on Linux",
    ),
]


def _deploy(run_dir: Path, data_dir: str, config: UldpConfig, **kw: Any) -> dict[str, Any]:
    """Deploy ``config`` on 4 silo SuperNodes; the summary, the run directory and the events."""
    from fedprivacy.flower.deploy.deploy import deploy

    for attempt in (1, 2):  # a run that ends without a summary is tried once more
        events: list[dict[str, Any]] = []
        where = run_dir / f"try-{attempt}"
        try:
            summary = deploy(
                config, 4, where, data_dir=data_dir, timeout=600.0, on_event=events.append, **kw
            )
        except DeploymentError as e:
            if attempt == 2 or "without a summary" not in str(e):
                raise
            warnings.warn(f"deployment retried: {e}", stacklevel=2)
            continue
        return {"summary": summary, "run_dir": where, "events": events}
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory, data_dir: str, heart_config: Callable[..., UldpConfig]
) -> dict[str, Any]:
    from fedprivacy.flower.deploy.deploy import FaultPlan

    faults = FaultPlan(replay={1: 3})
    config = heart_config(users=40)
    run_dir = tmp_path_factory.mktemp("silos")
    return _deploy(run_dir, data_dir, config, tls=True, stage_timeout=120.0, faults=faults)


def test_four_silos_over_tls_aggregate_the_in_process_sum_up_to_their_noise(
    run: dict[str, Any],
) -> None:
    s = run["summary"]
    assert s["tls"] is True and s["engine"] == "deployment" and s["silos"] == 4
    assert s["rounds_aggregated"] == 2
    # sigma 1, C 0.1: the 4 silos' summed noise has std 0.1 per entry (28 entries compared)
    assert s["noise_std_expected"] == pytest.approx(0.1)
    assert s["samples"] == 2 * 14
    assert 0.05 < s["deviation_std"] < 0.15
    roster = json.loads((run["run_dir"] / "roster.json").read_text())
    assert sorted(roster) == ["0", "1", "2", "3"] and len(set(roster.values())) == 4


def test_a_replayed_reply_over_the_network_is_refused_with_the_typed_error(
    run: dict[str, Any],
) -> None:
    (rejected,) = run["summary"]["rejected"]
    assert (rejected["user"], rejected["round"]) == (1, 3)
    assert rejected["error"] == "WrongRoundError"
    assert run["summary"]["rounds_aborted"] == 1


def test_every_process_of_the_cross_silo_deployment_is_stopped(
    run: dict[str, Any], processes_of: Callable[[Path], list[int]]
) -> None:
    assert processes_of(run["run_dir"].parent) == []  # every try


@pytest.fixture(scope="module")
def killed(
    tmp_path_factory: pytest.TempPathFactory, data_dir: str, heart_config: Callable[..., UldpConfig]
) -> dict[str, Any]:
    from fedprivacy.flower.deploy.deploy import FaultPlan
    from fedprivacy.flower.messaging.stages import Stage

    faults = FaultPlan(kill=(2, 2, Stage.SILO_ROUND))
    config = heart_config(users=40, rounds=2)
    run_dir = tmp_path_factory.mktemp("killed")
    # without TLS, so without SuperNode authentication (Flower's needs TLS)
    return _deploy(
        run_dir, data_dir, config, tls=False, node_auth=False, stage_timeout=60.0, faults=faults
    )


def test_a_killed_silo_process_aborts_its_round_without_output(killed: dict[str, Any]) -> None:
    from fedprivacy.participation.ledger import ParticipationLedger

    s = killed["summary"]
    kills = [e for e in killed["events"] if e.get("event") == "killed"]
    assert [(e["user"], e["round"], e["stage"]) for e in kills] == [(2, 2, "silo-round")]
    assert s["rounds_aggregated"] == 1 and s["rounds_aborted"] == 1
    assert [(d["user"], d["round"]) for d in s["dropouts"]] == [(2, 2)]
    (aborted,) = [e for e in killed["events"] if e.get("event") == "round" and e.get("aborted")]
    assert aborted["round"] == 2 and aborted["aggregated"] == []
    assert aborted["aborted"] == "silos [2] missing or refused"
    ledger = ParticipationLedger.from_csv(killed["run_dir"] / "participation.csv")
    assert ledger.matrix().sum(axis=1).tolist() == [40, 0]
    # round 1 still equals the in-process sum (noise std 0.1 per entry, 14 entries)
    assert s["samples"] == 14 and s["max_abs_error_vs_simulation"] < 0.6


def test_the_aborted_round_is_not_charged_to_the_users(killed: dict[str, Any]) -> None:
    from fedprivacy.dp.accounting import PrivacyAccountant

    p = killed["summary"]["privacy"]
    nm = killed["summary"]["secure_weighting"]["noise_multiplier_effective"]
    one = PrivacyAccountant("rdp").compose_gaussian(nm, 1, 1.0)
    two = PrivacyAccountant("rdp").compose_gaussian(nm, 2, 1.0)
    assert p["epsilon_server"] == pytest.approx(one.epsilon(p["delta"]), rel=1e-9)
    assert p["epsilon_server"] < two.epsilon(p["delta"])


def test_every_process_of_the_killed_deployment_is_stopped(
    killed: dict[str, Any], processes_of: Callable[[Path], list[int]]
) -> None:
    assert processes_of(killed["run_dir"].parent) == []  # every try


@pytest.fixture(scope="module")
def lied_to(
    tmp_path_factory: pytest.TempPathFactory, data_dir: str, heart_config: Callable[..., UldpConfig]
) -> dict[str, Any]:
    from fedprivacy.flower.deploy.deploy import FaultPlan

    faults = FaultPlan(forge="sigma=1e-6,clip=1.0,key_bits=1024")
    config = heart_config(users=40, rounds=2, secure_key_bits=3072, insecure_test_keys=False)
    run_dir = tmp_path_factory.mktemp("lied-to")
    return _deploy(run_dir, data_dir, config, tls=True, stage_timeout=60.0, faults=faults)


def test_every_silo_refuses_a_lying_servers_proposal_under_its_own_policy(
    lied_to: dict[str, Any],
) -> None:
    refused = [e for e in lied_to["events"] if e.get("event") == "node_refused"]
    assert sorted((e["user"], e["stage"]) for e in refused) == [(s, "silo-key") for s in range(4)]
    for e in refused:
        assert e["error"] == "PolicyViolationError"
        assert e["detail"].startswith("noise_multiplier: noise multiplier 1e-06 requested")
        assert "clip: clip 1 requested; this party clips at 0.1" in e["detail"]
        assert "key_bits: a 1024-bit test key was proposed" in e["detail"]
    # each silo's own log (its SuperNode's) names what it refused
    logs = lied_to["run_dir"] / "logs"
    for s in range(4):
        log = (logs / f"supernode-{s}.log").read_text(errors="replace")
        assert f"silo {s} refuses the server's proposal: noise_multiplier:" in log


def test_the_lied_to_run_ends_with_its_report_and_charges_nobody(lied_to: dict[str, Any]) -> None:
    s, run_dir = lied_to["summary"], lied_to["run_dir"]
    assert s["rounds"] == s["rounds_aggregated"] == 0 and "silo-key" in s["setup_failed"]
    assert s["privacy"]["epsilon"] == 0.0 and s["max_abs_error_vs_simulation"] is None
    assert "no round ran" in (run_dir / "privacy.md").read_text().lower()
    policy = (run_dir / "policies" / "node-0.toml").read_text()
    assert "min_key_bits = 3072" in policy and "noise_multiplier = 1.0" in policy


def test_every_process_of_the_lied_to_deployment_is_stopped(
    lied_to: dict[str, Any], processes_of: Callable[[Path], list[int]]
) -> None:
    assert processes_of(lied_to["run_dir"].parent) == []  # every try
