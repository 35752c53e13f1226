"""Cross-silo ULDP-FL on real Flower processes: a SuperLink and 4 silo SuperNodes over TLS.

ULDP-AVG-w with the private weighting protocol (Paillier, X25519 key agreement relayed by the
server, blinded histograms, masks) runs its setup and 3 rounds as Flower messages; every round's
aggregate equals the same weighted sum computed in the clear in one process up to the silos' own
noise; silo 1 replays its previous reply in round 3, which the server refuses with the
protocol's typed error (the round is aborted). Every process is stopped. About two minutes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fedprivacy.uldp.config import UldpConfig

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("flwr") is None or sys.platform != "linux",
    reason="needs fedprivacy[flower] (make install installs it) on Linux",
)


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory, data_dir: str, heart_config: Callable[..., UldpConfig]
) -> dict[str, Any]:
    from fedprivacy.flower.deploy import FaultPlan, deploy

    run_dir = tmp_path_factory.mktemp("silos")
    events: list[dict[str, Any]] = []
    config = heart_config(users=40)
    summary = deploy(
        config,
        4,
        run_dir,
        data_dir=data_dir,
        tls=True,
        stage_timeout=120.0,
        timeout=600.0,
        faults=FaultPlan(replay={1: 3}),
        on_event=events.append,
    )
    return {"summary": summary, "run_dir": run_dir, "events": events}


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
    assert processes_of(run["run_dir"]) == []
