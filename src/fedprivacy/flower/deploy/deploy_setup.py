"""What ``flower deploy`` checks and writes before it starts any process.

:func:`fedprivacy.flower.deploy.deploy.deploy` calls it.

:func:`check_deploy_options` refuses the combinations of options a local deployment cannot run
and settles TLS and SuperNode authentication; :func:`prepare_run_dir` writes, as the operator of
every local node, the node keys and the roster, each node's policy, the app directory and the
app's run configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tomli_w

from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_text
from fedprivacy.flower.deploy.deploy_tasks import DeployTask
from fedprivacy.flower.faults.fault_plan import FaultPlan
from fedprivacy.flower.faults.forge import parse_forge
from fedprivacy.flower.nodes.node_auth import NodeKeys, generate_node_keys
from fedprivacy.flower.nodes.operator import write_policies, write_roster

__all__ = ["PreparedRun", "check_deploy_options", "prepare_run_dir"]


@dataclass(frozen=True)
class PreparedRun:
    """The files of a run directory that the deployment's processes are started with.

    Attributes
    ----------
    keys : dict of int to NodeKeys
        Each node's key pair (empty without SuperNode authentication).
    policies : pathlib.Path
        The folder of the node policies (``node-U.toml``).
    app_dir : pathlib.Path
        The Flower App directory ``flwr run`` runs.
    run_config : pathlib.Path
        The app's run configuration (``run-config.toml``).
    """

    keys: dict[int, NodeKeys]
    policies: Path
    app_dir: Path
    run_config: Path


def check_deploy_options(
    task: DeployTask,
    supernodes: int,
    faults: FaultPlan | None,
    *,
    tls: bool,
    simulation: bool,
    node_auth: bool | None,
) -> tuple[FaultPlan, bool, bool]:
    """Refuse what a local deployment cannot run; the fault plan, node authentication and TLS.

    Parameters
    ----------
    task : DeployTask
        What the deployment runs.
    supernodes : int
        SuperNodes asked for: must be the task's.
    faults : FaultPlan, optional
        Faults to inject (none by default); a real deployment only.
    tls : bool
        TLS asked for (always off with ``simulation``).
    simulation : bool
        Flower's simulation runtime instead of real SuperNodes.
    node_auth : bool, optional
        SuperNode authentication asked for (default: with TLS on a real deployment).

    Returns
    -------
    tuple of (FaultPlan, bool, bool)
        The fault plan, whether nodes authenticate, whether TLS is on.

    Raises
    ------
    ParameterError
        Naming the option that cannot be honoured, or a forged parameter the task refuses.
    """
    if task.supernodes != supernodes:
        raise ParameterError(
            "supernodes", f"the run needs {task.supernodes} SuperNodes, not {supernodes}"
        )
    faults = faults or FaultPlan()
    if simulation and (faults.kill is not None or faults.replay or faults.badshare or faults.forge):
        raise ParameterError("--simulation", "fault injection needs a real deployment")
    if simulation and node_auth:
        raise ParameterError("--node-auth", "SuperNode authentication needs a real deployment")
    node_auth = (tls and not simulation) if node_auth is None else node_auth
    if node_auth and not tls:
        raise ParameterError("--node-auth", "SuperNode authentication needs TLS (drop --no-tls)")
    tls = tls and not simulation
    task.check_node_auth(node_auth)
    parse_forge(faults.forge, task.forges)
    return faults, node_auth, tls


def prepare_run_dir(
    task: DeployTask,
    run_dir: Path,
    supernodes: int,
    faults: FaultPlan,
    *,
    pyproject: str,
    stage_timeout: float,
    node_auth: bool,
    overlap_rounds: bool = False,
    key_rounds: int = 1,
) -> PreparedRun:
    """Write what the deployment is started with into ``run_dir`` (stale outputs removed).

    Parameters
    ----------
    task : DeployTask
        What the deployment runs.
    run_dir : pathlib.Path
        The run directory (created).
    supernodes : int
        SuperNodes of the run, users (or silos) ``0 .. supernodes - 1``.
    faults : FaultPlan
        Faults to inject: the pause before a kill and the forge go into the run configuration.
    pyproject : str
        The app directory's ``pyproject.toml``
        (:func:`~fedprivacy.flower.deploy.apps.app_pyproject`).
    stage_timeout : float
        Seconds a stage waits for replies.
    node_auth : bool
        Generate a key pair per node and the federation's roster.
    overlap_rounds : bool
        Overlap the secure rounds (three exchanges a round).
    key_rounds : int
        The rounds each node's policy lets one pair of SecAgg keys mask.

    Returns
    -------
    PreparedRun
        The node keys, the policy folder, the app directory and the run configuration.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("resume", "summary.json", "events.jsonl"):
        (run_dir / stale).unlink(missing_ok=True)
    keys = generate_node_keys(run_dir / "node-keys", range(supernodes)) if node_auth else {}
    roster = write_roster(keys, run_dir / "node-keys" / "roster.toml")
    policies = write_policies(
        task.policy, run_dir / "policies", supernodes, keys, roster, key_rounds
    )
    app_dir = run_dir / "app"
    app_dir.mkdir(exist_ok=True)
    atomic_write_text(app_dir / "pyproject.toml", pyproject)
    pause = "" if faults.kill is None else f"{faults.kill[1]}:{faults.kill[2].value}"
    run_config = run_dir / "run-config.toml"
    atomic_write_text(
        run_config,
        tomli_w.dumps(
            {
                **task.run_config(),
                "run-dir": str(run_dir.resolve()),
                "supernodes": supernodes,
                "stage-timeout": float(stage_timeout),
                "node-wait": 120.0 + 2.0 * supernodes,  # each SuperNode's start-up, on 2 cores
                "pause-at": pause,
                "forge": faults.forge,
                "overlap-rounds": bool(overlap_rounds),
                "roster": "" if roster is None else str(roster.resolve()),
            }
        ),
    )
    return PreparedRun(keys, policies, app_dir, run_config)
