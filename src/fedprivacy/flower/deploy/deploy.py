"""``fedprivacy flower deploy``: fedprivacy's own jobs on a :class:`LocalDeployment`.

:func:`deploy` writes TLS material into the run directory (:mod:`fedprivacy.flower.deploy.tls`), the
app directory and Flower's configuration, starts the SuperLink and SuperNodes
(:mod:`fedprivacy.flower.deploy.local_deployment`), runs with ``flwr run``, reports progress from
the ServerApp's event log, optionally injects faults (kill a SuperNode before a stage), then
compares with the in-process pipeline (:mod:`fedprivacy.flower.fedavg.reference`). What it checks
and writes before any process starts is :mod:`fedprivacy.flower.deploy.deploy_setup`.

The same app runs on SuperNodes on other machines: start ``flower-superlink`` with the
certificate of its public name (``generate_tls_materials(hosts=(...))``) and, on each machine,
``flower-supernode --superlink HOST:PORT --root-certificates ca.crt --node-config
"partition-id=U"``; then ``flwr run`` the app directory (``fedprivacy flower app DIR``).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import tomli_w

from fedprivacy._validation import require_int
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.deploy.deploy_setup import PreparedRun, check_deploy_options, prepare_run_dir
from fedprivacy.flower.deploy.deploy_tasks import DeployTask, deploy_task
from fedprivacy.flower.deploy.local_deployment import DeploymentError, LocalDeployment
from fedprivacy.flower.faults.fault_plan import FaultPlan, node_fault
from fedprivacy.policy import POLICY_DIR_ENV, POLICY_KEY
from fedprivacy.uldp.config import UldpConfig

__all__ = ["FaultPlan", "deploy", "terminate_as_interrupt"]


def _follow(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    if not path.exists():
        return [], offset
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    lines = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
    return lines, offset + end


def _start_nodes(
    dep: LocalDeployment,
    task: DeployTask,
    files: PreparedRun,
    supernodes: int,
    faults: FaultPlan,
    *,
    data_dir: str | None,
    simulation: bool,
    node_auth: bool,
) -> None:
    """Start the SuperLink and every SuperNode (none with ``simulation``), each with its policy."""
    dep.env[POLICY_DIR_ENV] = str(files.policies.resolve())  # the simulation's virtual nodes
    if data_dir:  # the ServerApp and the ClientApps (also Ray's virtual nodes) read it
        dep.env["FEDPRIVACY_DATA"] = str(Path(data_dir).resolve())
    dep.start_superlink(simulation=simulation, node_auth=node_auth)
    dep.write_flower_config(supernodes if simulation else None)
    if node_auth and not simulation:
        dep.register_supernodes(files.keys[u] for u in range(supernodes))
    for u in range(0 if simulation else supernodes):
        fault = node_fault(faults, u)
        policy = (files.policies / f"node-{u}.toml").resolve()
        node_config = f'{task.node_config(u)} {POLICY_KEY}="{policy}"'
        dep.start_supernode(u, fault=fault, keys=files.keys.get(u), node_config=node_config)


def _on_event(
    dep: LocalDeployment,
    e: dict[str, Any],
    faults: FaultPlan,
    on_event: Callable[[dict[str, Any]], None] | None,
) -> None:
    """Pass on one event of the ServerApp's log; at the pause, kill the SuperNode and resume."""
    if on_event is not None:
        on_event(e)
    if e.get("event") == "paused" and faults.kill is not None:
        victim = faults.kill[0]
        victim = max(e["asked"]) if victim is None else victim
        dep.kill(f"supernode-{victim}")
        if on_event is not None:
            on_event({"round": e["round"], "stage": e["stage"], "event": "killed", "user": victim})
        (dep.run_dir / "resume").touch()


def _watch(
    dep: LocalDeployment,
    runner: subprocess.Popen[bytes],
    faults: FaultPlan,
    timeout: float,
    on_event: Callable[[dict[str, Any]], None] | None,
    run_dir: Path,
) -> None:
    """Follow the event log in ``run_dir`` until its ``summary.json`` appears.

    ``flwr run --stream`` may end before the ServerApp does (its log stream can drop under
    load): the events are then followed for :data:`GRACE_SECONDS` more after the last one.
    """
    offset, deadline, quiet_since = 0, time.monotonic() + timeout, None
    while not (run_dir / "summary.json").exists():
        dep.track(every=1.0)  # the sessions of Ray's agents, while they can be seen
        events, offset = _follow(run_dir / "events.jsonl", offset)
        for e in events:
            _on_event(dep, e, faults, on_event)
        now = time.monotonic()
        if runner.poll() is not None:
            quiet_since = now if events or quiet_since is None else quiet_since
            if now - quiet_since > GRACE_SECONDS:
                raise DeploymentError(
                    "the run ended without a summary:\n"
                    + _log_tail(dep, "flwr-run")
                    + _log_tail(dep, "superlink")
                )
        if now > deadline:
            raise DeploymentError(f"the run did not finish within {timeout:.0f} s")
        time.sleep(0.2)
    events, _ = _follow(run_dir / "events.jsonl", offset)
    for e in events:
        _on_event(dep, e, faults, on_event)


def _rerun(
    dep: LocalDeployment,
    files: PreparedRun,
    faults: FaultPlan,
    timeout: float,
    on_event: Callable[[dict[str, Any]], None] | None,
) -> None:
    """The same app and configuration again, on the same SuperNodes, into ``RUN/rerun``."""
    out = dep.run_dir / "rerun"
    out.mkdir(exist_ok=True)
    run_config = tomllib.loads(files.run_config.read_text())
    run_config.update({"run-dir": str(out.resolve()), "pause-at": ""})
    config_path = out / "run-config.toml"
    atomic_write_text(config_path, tomli_w.dumps(run_config))
    runner = dep.flwr_run(files.app_dir, config_path, name="flwr-rerun")
    _watch(dep, runner, faults, timeout, on_event, out)


#: How long events are followed after ``flwr run`` ends without a summary.
GRACE_SECONDS = 60.0


def _log_tail(dep: LocalDeployment, name: str, lines: int = 15) -> str:
    """The last ``lines`` lines of process ``name``'s log, headed by its path."""
    path = dep.log_path(name)
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    tail = "\n".join("  " + line for line in text.splitlines()[-lines:])
    return f"{path} ends with:\n{tail}\n"


def deploy(
    config: TrainConfig | UldpConfig,
    supernodes: int,
    run_dir: Path,
    *,
    data_dir: str | None = None,
    tls: bool = True,
    stage_timeout: float = 60.0,
    faults: FaultPlan | None = None,
    simulation: bool = False,
    node_auth: bool | None = None,
    overlap_rounds: bool = False,
    key_rounds: int = 1,
    timeout: float = 1800.0,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run ``config`` on a local deployment of ``supernodes`` SuperNodes; the summary.

    Parameters
    ----------
    config : TrainConfig or UldpConfig
        FedAvg: its ``users`` must equal ``supernodes`` (one user per SuperNode) and its
        ``dropout`` must be 0 (availability is what the nodes do). ULDP-FL (a ``-w`` method):
        one silo per SuperNode (:mod:`fedprivacy.flower.uldp.cross_silo`).
    supernodes : int
        SuperNodes to start, users (or silos) ``0 .. supernodes - 1``.
    data_dir : str, optional
        ULDP-FL: the data directory of the ServerApp and of every silo (default
        ``$FEDPRIVACY_DATA``).
    run_dir : pathlib.Path
        The run directory (see :mod:`fedprivacy.flower.deploy.run`), plus ``tls/``, ``logs/``,
        ``app/`` and ``flwr-home/``.
    tls : bool
        TLS between SuperNodes, ``flwr`` and the SuperLink.
    stage_timeout : float
        Seconds a stage waits for replies before counting the silent nodes as dropouts.
    faults : FaultPlan, optional
        Faults to inject (deployment only).
    simulation : bool
        Run the same app with ``flwr run`` on Flower's simulation runtime (Ray, virtual
        SuperNodes in this machine's processes) instead of real SuperNodes; no TLS.
    node_auth : bool, optional
        SuperNode authentication (on by default with TLS, off with ``--simulation`` or
        ``--insecure``, where the SuperLink cannot authenticate nodes): a key pair per
        node (``OUT/node-keys``), each public key registered with the SuperLink, which admits no
        other node (:mod:`fedprivacy.flower.nodes.node_auth`); each node signs its claim to its
        user with the same key, checked by the ServerApp against ``OUT/node-keys/roster.toml``
        (:mod:`fedprivacy.flower.messaging.identity`).
    overlap_rounds : bool
        FedAvg with SecAgg: three exchanges a round, each round's ``unmask`` with the next
        round's ``advertise`` (:mod:`fedprivacy.flower.fedavg.overlap`).
    key_rounds : int
        FedAvg with SecAgg: each node's policy masks up to this many rounds with one pair of
        keys (:mod:`fedprivacy.flower.nodes.node_keys`); the server then skips ``advertise`` for the
        nodes whose keys it holds (two exchanges a round with ``overlap_rounds``).
    timeout : float
        The most seconds the whole run may take.
    on_event : callable, optional
        Called with each event of the ServerApp's log as it appears.

    Returns
    -------
    dict
        ``summary.json`` plus ``tls``, ``run_dir`` and ``max_abs_error_vs_simulation`` (and
        ``rerun``: its rounds aggregated and aborted, with ``faults.rerun``).
    """
    from fedprivacy.flower.deploy.apps import app_pyproject

    task = deploy_task(config, data_dir)
    faults, node_auth, tls = check_deploy_options(
        task, supernodes, faults, tls=tls, simulation=simulation, node_auth=node_auth
    )
    if overlap_rounds:
        task.check_overlap()
    if key_rounds != 1:
        require_int("--key-rounds", key_rounds, minimum=1)
        task.check_key_rounds()
    task.preflight()
    files = prepare_run_dir(
        task,
        run_dir,
        supernodes,
        faults,
        pyproject=app_pyproject(),
        stage_timeout=stage_timeout,
        node_auth=node_auth,
        overlap_rounds=overlap_rounds,
        key_rounds=key_rounds,
    )
    with LocalDeployment(run_dir, tls=tls, nodes=supernodes) as dep:
        _start_nodes(
            dep,
            task,
            files,
            supernodes,
            faults,
            data_dir=data_dir,
            simulation=simulation,
            node_auth=node_auth,
        )
        runner = dep.flwr_run(files.app_dir, files.run_config)
        _watch(dep, runner, faults, timeout, on_event, run_dir)
        if faults.rerun:
            _rerun(dep, files, faults, timeout, on_event)
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    summary.update(
        tls=tls,
        node_auth=node_auth,
        engine="simulation (Ray)" if simulation else "deployment",
        run_dir=str(run_dir),
        **task.compare(run_dir),
    )
    if faults.rerun:
        rerun = json.loads((run_dir / "rerun" / "summary.json").read_text())
        summary["rerun"] = {k: rerun[k] for k in ("rounds_aggregated", "rounds_aborted")}
    atomic_write_json(run_dir / "summary.json", summary)
    return summary


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` inside the block, so the deployment is stopped."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
