"""The example Flower app with fedprivacy: on Flower's simulation engine, and the same in process.

``examples/digits-private`` is ``examples/digits-fedavg`` (a plain Flower app: its own CNN, its
own data loading, Flower's FedAvg) with the mod and the server workflow; the test runs it with
``flwr run`` on a simulation SuperLink for 2 rounds with SecAgg and distributed DP, then the
same app's ClientApp in this process (:class:`ClientAppTransport`), and compares the reports.
"""

from __future__ import annotations

import difflib
import importlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import tomli_w

pytestmark = pytest.mark.deployment  # starts processes (pyproject.toml: markers)

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "examples" / "digits-fedavg"
PRIVATE = ROOT / "examples" / "digits-private"
NODES = 6

pytest.importorskip("flwr")


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ModuleType]]:
    """The private app's modules, imported from its directory as Flower imports them."""
    monkeypatch.syspath_prepend(str(PRIVATE))
    for name in [m for m in sys.modules if m == "digits" or m.startswith("digits.")]:
        monkeypatch.delitem(sys.modules, name)
    yield {m: importlib.import_module(f"digits.{m}") for m in ("task", "client_app", "server_app")}
    for name in [m for m in sys.modules if m == "digits" or m.startswith("digits.")]:
        del sys.modules[name]


def _run_config(app: Path) -> dict[str, Any]:
    import tomllib

    config: dict[str, Any] = tomllib.loads((app / "pyproject.toml").read_text())
    return dict(config["tool"]["flwr"]["app"]["config"])


def _simulate(tmp_path: Path) -> dict[str, Any]:
    """``flwr run`` the private app on a simulation SuperLink with 6 virtual SuperNodes.

    With node authentication, as docs/flower-app.md runs it: ``fedprivacy flower keys``'s
    keys, roster and policies, the policies read by the virtual nodes from
    ``$FEDPRIVACY_POLICY_DIR``, the roster named in the run config.
    """
    from fedprivacy.flower.deploy.local_deployment import LocalDeployment
    from fedprivacy.flower.nodes.operator import write_federation
    from fedprivacy.policy import POLICY_DIR_ENV

    out = tmp_path / "out"
    roster, policies = write_federation(tmp_path / "keys", NODES)
    overrides = tmp_path / "run-config.toml"
    overrides.write_text(
        tomli_w.dumps({"out": str(out), "num-server-rounds": 2, "roster": str(roster)})
    )
    with LocalDeployment(tmp_path / "deployment", tls=False) as deployment:
        deployment.env[POLICY_DIR_ENV] = str(policies)
        deployment.start_superlink(simulation=True)
        deployment.write_flower_config(NODES)
        run = deployment.flwr_run(PRIVATE, overrides)
        assert run.wait(300) == 0, deployment.log_path("flwr-run").read_text()[-3000:]
        deadline = time.monotonic() + 120
        while not (out / "final_model.pt").exists() and time.monotonic() < deadline:
            deployment.track(1.0)
            time.sleep(0.5)
    assert (out / "final_model.pt").exists(), deployment.log_path("flwr-run").read_text()[-3000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    events = (out / "events.jsonl").read_text().splitlines()
    return {**summary, "events": [json.loads(line) for line in events]}


def _in_process(example: dict[str, ModuleType], tmp_path: Path) -> dict[str, Any]:
    from flwr.app import ArrayRecord

    from fedprivacy.flower.dropin.app_transport import ClientAppTransport
    from fedprivacy.flower.dropin.mod import MOD_WIRE
    from fedprivacy.flower.dropin.private_fedavg import PrivateFedAvg, PrivateFedAvgConfig
    from fedprivacy.flower.nodes.operator import write_federation
    from fedprivacy.policy import POLICY_KEY

    roster, policies = write_federation(tmp_path / "keys-in-process", NODES)
    run_config = {**_run_config(PRIVATE), "num-server-rounds": 2, "roster": str(roster)}
    nodes = {
        u: {
            "partition-id": u,
            "num-partitions": NODES,
            POLICY_KEY: str(policies / f"node-{u}.toml"),
        }
        for u in range(NODES)
    }
    transport = ClientAppTransport(example["client_app"].app, nodes, MOD_WIRE, run_config)
    result = PrivateFedAvg(PrivateFedAvgConfig.from_run_config(run_config)).run(
        transport,
        ArrayRecord(example["task"].Net().state_dict()),
        train_config={"lr": run_config["lr"]},
        evaluate_fn=example["server_app"].global_evaluate,
    )
    return {**result.to_dict(), "events": result.events}


def _positions(summary: dict[str, Any], key: str) -> list[list[int]]:
    """Each round's ``key`` users as their places in the batches the run's nodes drew."""
    from fedprivacy.flower.fedavg.reference import observed_layout

    layout = observed_layout(summary["events"])
    assert layout is not None
    return [sorted(layout.position[u] for u in r[key]) for r in summary["rounds"]]


def _shape(value: Any) -> Any:
    """The structure of a JSON value: keys and types, not the numbers."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def test_the_example_app_runs_on_the_simulation_engine_like_in_process(
    tmp_path: Path, example: dict[str, ModuleType]
) -> None:
    deployed = _simulate(tmp_path)
    local = _in_process(example, tmp_path)
    unequal = {"roster": {}, "events": []}  # Flower's node ids; each run's own events
    assert _shape({**deployed, **unequal}) == _shape({**local, **unequal})
    assert sorted(deployed["roster"]) == [str(u) for u in range(NODES)]  # Flower's node ids
    config = deployed["config"]
    assert config["secagg"] and config["dp"] == "distributed" and config["rounds"] == 2
    assert [r["noise_multiplier"] for r in deployed["rounds"]] == [
        r["noise_multiplier"] for r in local["rounds"]
    ]
    # each run's nodes drew their own batches; the same seed picks the same batch positions
    for key in ("selected", "aggregated"):
        assert _positions(deployed, key) == _positions(local, key)
    assert all(len(r["aggregated"]) == 4 for r in deployed["rounds"])
    privacy, expected = deployed["privacy"], local["privacy"]
    for key in ("t_weak", "t_strong", "exposed_users", "epsilon", "epsilon_server", "mechanism"):
        assert privacy[key] == expected[key]
    assert privacy["epsilon"] is not None and privacy["t_weak"]["upper"] >= 2
    assert set(deployed["evaluate_metrics_serverapp"]) == {"1", "2"}
    # every node was authenticated: the report carries no warning that keys went unsigned
    assert privacy["caveats"] == expected["caveats"]
    assert not any("NO NODE AUTHENTICATION" in c for c in privacy["caveats"])


def changed_lines() -> list[str]:
    """The lines the private app adds or removes, against the plain Flower app."""
    out = []
    for path in sorted(PLAIN.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts:
            continue
        other = PRIVATE / path.relative_to(PLAIN)
        diff = difflib.unified_diff(
            path.read_text().splitlines(), other.read_text().splitlines(), lineterm="", n=0
        )
        out += [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    return out


def test_adding_fedprivacy_to_the_app_changes_at_most_25_lines() -> None:
    lines = changed_lines()
    assert 0 < len(lines) <= 25
    assert sorted(p.name for p in PLAIN.rglob("*.py")) == sorted(
        p.name for p in PRIVATE.rglob("*.py")
    )
