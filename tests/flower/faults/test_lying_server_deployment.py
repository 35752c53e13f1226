"""A lying server on a real Flower deployment: every SuperNode refuses under its own policy.

``deploy`` acts as the operator of each local node and writes its policy (0600) from the
configuration: distributed DP at noise multiplier 1, clip 0.5, T = 2, secure rounds only, the
SecAgg+ graph of degree 4 the configuration names. The ServerApp then lies, one lie a round
(issue #28, finding 2): round 0 asks the parties for no noise while its report would say noise
multiplier 1, round 1 proposes a threshold of 2, round 2 asks for the update in the clear before
its secure round, round 3 asks a round already answered again, round 4 hands each node a key
roster whose other keys are the server's own (issue #50, finding 1: key substitution), round 5
proposes a graph from a seed of its own instead of the one the nodes drew together (finding 2),
round 6 batches of its own (the users by id) instead of those the same draw gave.
Every node refuses each lie, names the parameter (or the unsigned key) in the run's events and
in its own log, and the run ends with its report: rounds 0, 1, 4, 5 and 6 aggregate nothing,
rounds 2 and 3 only their honest secure round. Node authentication is on by default: every
node's claim to its user was signed and admitted, every key it used was signed, and every
secure round ran the signed survivor list.

Then the server starts a second run of the same app on the same SuperNodes (finding 4): each
node's answered rounds, trained models and budget are in its own 0600 state file beside its
policy, so round 2, whose model is the first run's round-2 model (nothing aggregated before
it, in either run), is refused by every node (``model``), and the budget keeps counting.
"""

from __future__ import annotations

import importlib.util
import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from fedprivacy.fl.training_config import TrainConfig

pytestmark = [
    pytest.mark.deployment,
    pytest.mark.skipif(
        importlib.util.find_spec("flwr") is None or sys.platform != "linux",
        reason="needs fedprivacy[flower] (make install installs it) on Linux",
    ),
]

USERS = 6
#: round -> the lie, and the parameter every node names refusing it
LIES = {
    0: "noise=",
    1: "threshold=2",
    2: "plaintext=1",
    3: "repeat=1",
    4: "keys=1",
    5: "graph=1",
    6: "layout=1",
}
NAMED = {
    0: "noise_multiplier",
    1: "threshold",
    2: "secure",
    3: "round",
    4: "the keys of user",
    5: "graph_seed",
    6: "batch_layout",
}
ERRORS = {4: "UnsignedKeyError"}  # else PolicyViolationError
CONFIG = TrainConfig(
    users=USERS,
    per_round=6,
    rounds=7,
    scheme="multiround",
    target_privacy=2,
    secagg=True,
    secagg_degree=4,
    dropout=0.0,
    trainer="loop",
    seed=3,
    eval_every=4,
    dp="distributed",
    noise_multiplier=1.0,
    clip=0.5,
)


@pytest.fixture(scope="module")
def lied_to(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from fedprivacy.flower.deploy.deploy import FaultPlan, deploy

    run_dir = tmp_path_factory.mktemp("lying")
    summary = deploy(
        CONFIG,
        USERS,
        run_dir,
        stage_timeout=90.0,
        timeout=900.0,
        faults=FaultPlan(forge=";".join(LIES.values()), rerun=True),
    )
    return {
        "summary": summary,
        "run_dir": run_dir,
        "events": _events(run_dir),
        "rerun": _events(run_dir / "rerun"),
    }


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines() if x]


def test_every_node_refuses_every_lie_and_names_the_parameter(lied_to: dict[str, Any]) -> None:
    refused = [e for e in lied_to["events"] if e["event"] == "node_refused"]
    assert {
        (e["round"], e["user"], e["error"], e["detail"][: len(NAMED[e["round"]])]) for e in refused
    } == {
        (r, u, ERRORS.get(r, "PolicyViolationError"), NAMED[r]) for r in LIES for u in range(USERS)
    }
    for u in range(USERS):  # and each node's own log says so
        log = (lied_to["run_dir"] / "logs" / f"supernode-{u}.log").read_text(errors="replace")
        assert all(f"{ERRORS.get(r, 'PolicyViolationError')}: {NAMED[r]}" in log for r in LIES), u


def test_the_run_ends_with_its_report_and_only_the_honest_rounds(
    lied_to: dict[str, Any],
) -> None:
    summary, run_dir = lied_to["summary"], lied_to["run_dir"]
    rounds = [e for e in lied_to["events"] if e["event"] == "round"]
    assert [bool(e["aggregated"]) for e in rounds] == [False, False, True, True] + [False] * 3
    assert summary["rounds_aggregated"] == 2 and summary["rounds_aborted"] == 5
    assert (run_dir / "privacy.md").stat().st_size > 0
    stages = [e for e in lied_to["events"] if e["event"] == "stage" and e["stage"] == "consistency"]
    assert [e["answered"] for e in stages] == [USERS, USERS]  # signed survivor lists


def test_nodes_were_authenticated_and_their_identities_signed(lied_to: dict[str, Any]) -> None:
    summary, run_dir = lied_to["summary"], lied_to["run_dir"]
    assert summary["node_auth"] is True and summary["tls"] is True
    identity = json.loads((run_dir / "identity.json").read_text())
    assert sorted(int(u) for u in identity["admitted"]) == list(range(USERS))
    assert identity["refused"] == []


def test_each_node_has_its_own_policy_file_readable_by_its_operator_only(
    lied_to: dict[str, Any],
) -> None:
    from fedprivacy.policy import PartyPolicy

    for u in range(USERS):
        path: Path = lied_to["run_dir"] / "policies" / f"node-{u}.toml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        policy = PartyPolicy.from_toml(path)
        assert (policy.noise_multiplier, policy.clip, policy.batch_size) == (1.0, 0.5, 2)
        assert policy.signing_key.endswith(f"node-{u}") and policy.roster
        state = json.loads((path.parent / f"party-{u}.state").read_text())  # finding 4
        assert stat.S_IMODE((path.parent / f"party-{u}.state").stat().st_mode) == 0o600
        answered = json.loads(bytes.fromhex(state["entries"]["answered"]))
        assert list(answered.values()) == [4, 4]  # round 4's advertise, in each run's session
        trained = json.loads(bytes.fromhex(state["entries"]["trained"]))
        # run 1: 0, 1 refused before training, 5 and 6 too; run 2: 2 refused (its model trained
        # on)
        assert [int(pair.split(":")[0]) for pair in trained] == [2, 3, 4, 3, 4]
        assert bytes.fromhex(state["entries"]["spent"]) == b"5"  # 3 rounds, then 2 more


def test_the_sparse_rounds_ran_on_the_graph_the_nodes_drew(lied_to: dict[str, Any]) -> None:
    for events in (lied_to["events"], lied_to["rerun"]):  # one draw a run, before round 0
        assert [e["round"] for e in events if e["event"] == "layout"] == [0]  # the batches too
        drawn = [(e["stage"], e["answered"]) for e in events if e["event"] == "stage"]
        assert [d for d in drawn if d[0] in ("commit", "reveal", "draw")] == [
            ("commit", USERS),
            ("reveal", USERS),
            ("draw", USERS),
        ]


def test_a_second_run_on_the_same_supernodes_is_refused_what_the_first_answered(
    lied_to: dict[str, Any],
) -> None:
    """Finding 4: round 2 carries the model the nodes trained on in round 2 of the first run."""
    refused = {
        (e["round"], e["user"], e["detail"].split(":")[0])
        for e in lied_to["rerun"]
        if e["event"] == "node_refused" and e["stage"] == "advertise"
    }
    assert {(2, u, "model") for u in range(USERS)} <= refused
    rounds = [bool(e["aggregated"]) for e in lied_to["rerun"] if e["event"] == "round"]
    assert rounds == [False, False, False, True] + [False] * 3  # only round 3 (a new model)
    assert lied_to["summary"]["rerun"] == {"rounds_aggregated": 1, "rounds_aborted": 6}
