"""The Flower App: a ServerApp that runs the pipeline's round loop, a ClientApp per node.

Both are on Flower's Message API. The ServerApp (``server_app``, ``@server_app.main()``) waits for
the SuperNodes, asks each which user it is (the roster), and runs
:func:`fedprivacy.flower.deploy.run.run_deployed` with
:class:`~fedprivacy.flower.messaging.grid.GridTransport`: every stage of every round is one push and
pull of messages. The ClientApp (``client_app``, ``@client_app.query("fedprivacy")``) answers each
message with :meth:`fedprivacy.flower.nodes.node.Node.handle`, keeping the node's protocol state in
``context.state`` (a ``ConfigRecord`` of bytes that the SuperNode keeps on the node's machine).

Run configuration (``[tool.flwr.app.config]`` of the app, see :func:`app_pyproject`):

=================  ==========================================================================
``task``           ``fedavg`` (users as nodes) or ``uldp`` (silos as nodes,
                   :mod:`fedprivacy.flower.uldp.cross_silo`)
``train-config``   the :class:`~fedprivacy.fl.training_config.TrainConfig` as TOML
``uldp-config``    the :class:`~fedprivacy.uldp.config.UldpConfig` as TOML (``task = "uldp"``)
``data-dir``       the ServerApp's data directory (the test set; default ``$FEDPRIVACY_DATA``)
``run-dir``        where the ServerApp writes the run directory (on the SuperLink's machine)
``supernodes``     how many SuperNodes to wait for
``node-wait``      the most seconds to wait for them
``stage-timeout``  the most seconds a stage waits for the nodes' replies
``pause-at``       fault injection: ``"R:STAGE"`` (see
:class:`~fedprivacy.flower.deploy.run.StagePause`) ``roster``         the federation's public keys
(:class:`~fedprivacy.crypto.signing.Roster`
                   file): a node is admitted only with a signed claim to its user
``forge``          fault injection, a lying server: ``"NAME=VALUE,..."`` parameters the server
                   proposes instead of the configuration's (every party must refuse them)
``overlap-rounds`` three exchanges a secure round: each round's ``unmask`` with the next round's
                   ``advertise`` (:mod:`fedprivacy.flower.fedavg.overlap`)
=================  ==========================================================================

A SuperNode says which user it is with ``--node-config "partition-id=U"`` (or
``fedprivacy-user=U``), a silo with ``fedprivacy-silo=S`` (and its data with ``data-dir=DIR``,
default ``$FEDPRIVACY_DATA``; on the simulation runtime a virtual node's ``partition-id`` is its
silo); ``fedprivacy-fault="replay@R"`` makes it replay a message in round ``R`` (tests of the
server's typed rejections).
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flwr.app import ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedprivacy._registry import Registry
from fedprivacy.crypto.signing import Roster
from fedprivacy.errors import FedPrivacyError
from fedprivacy.files import atomic_write_json
from fedprivacy.flower.dropin.private_result import RosterError
from fedprivacy.flower.messaging.grid import RECORD, GridTransport, discover_roster, to_record
from fedprivacy.flower.messaging.stages import Record, error_reply
from fedprivacy.flower.nodes.node import Node
from fedprivacy.flower.nodes.stage_handler import StageHandler
from fedprivacy.plugins import load_plugins
from fedprivacy.policy import PartyPolicy

if TYPE_CHECKING:
    from fedprivacy.flower.deploy.run import StagePause

__all__ = ["answer_request", "app_pyproject", "client_app", "server_app"]

STATE = "fedprivacy-state"
_LOG = logging.getLogger("fedprivacy.node")

server_app = ServerApp()
client_app = ClientApp()
load_plugins(log=_LOG)  # this process's own registrations (its operator's FEDPRIVACY_PLUGINS)


def _user(node_config: Any, keys: tuple[str, ...]) -> int:
    for key in keys:
        if key in node_config:
            return int(node_config[key])
    raise ValueError(f"the SuperNode needs --node-config '{keys[-1]}=U' (its fedprivacy id)")


def _node(node_config: Any, stage: object) -> StageHandler:
    """The node that answers ``stage``: a silo for the cross-silo stages, else a user.

    Its policy is its operator's (:meth:`PartyPolicy.for_node`), read on this machine.
    """
    fault = str(node_config.get("fedprivacy-fault", ""))
    if isinstance(stage, str) and stage.startswith("silo-"):
        from fedprivacy.flower.uldp.silo_node import SiloNode

        silo = _user(node_config, ("fedprivacy-silo", "partition-id"))
        data_dir = str(node_config.get("data-dir", "")) or None
        return SiloNode(silo, fault, data_dir, PartyPolicy.for_node(node_config, silo))
    if "fedprivacy-silo" in node_config:  # a silo answers hello with its silo id
        silo = int(node_config["fedprivacy-silo"])
        return Node(silo, fault, PartyPolicy.for_node(node_config, silo))
    user = _user(node_config, ("fedprivacy-user", "partition-id"))
    return Node(user, fault, PartyPolicy.for_node(node_config, user))


def answer_request(
    node_config: Mapping[str, Any], request: Record, state: dict[str, bytes]
) -> Record:
    """The reply of the node that ``node_config`` describes; ``state`` updated in place.

    A node whose own configuration is wrong (a missing or invalid policy file) refuses with the
    typed error, logged on the node, instead of crashing its ClientApp.

    Examples
    --------
    >>> answer_request({"partition-id": 3, "fedprivacy-policy": "/no/such.toml"},
    ...                {"stage": "hello"}, {})["error"]
    'ParameterError'
    """
    try:
        node = _node(node_config, request.get("stage"))
    except FedPrivacyError as exc:
        _LOG.warning("cannot serve: %s: %s", type(exc).__name__, exc)
        return error_reply(exc)
    return node.handle(request, state)


@client_app.query("fedprivacy")
def answer(msg: Message, context: Context) -> Message:
    """Answer one stage's request with this node's :class:`~fedprivacy.flower.nodes.node.Node`."""
    request = dict(msg.content.config_records[RECORD])
    records = context.state.config_records
    state: dict[str, bytes] = dict(records[STATE]) if STATE in records else {}  # type: ignore[arg-type]
    reply = answer_request(context.node_config, request, state)
    records[STATE] = ConfigRecord(dict(state))
    return Message(to_record(reply), reply_to=msg)


def _fedavg(
    cfg: Any, transport: GridTransport, run_dir: Path, pause: StagePause, keys: Roster | None
) -> None:
    from fedprivacy.fl.training_config import TrainConfig
    from fedprivacy.flower.deploy.run import run_deployed

    config = TrainConfig.from_mapping(tomllib.loads(str(cfg["train-config"])))
    forge = str(cfg.get("forge", ""))
    run_deployed(
        config,
        transport,
        run_dir,
        roster=transport.roster,
        pause=pause,
        forge=forge,
        signers=keys,
        overlap=bool(cfg.get("overlap-rounds", False)),
    )


def _uldp(
    cfg: Any, transport: GridTransport, run_dir: Path, pause: StagePause, keys: Roster | None
) -> None:
    from fedprivacy.flower.uldp.cross_silo import run_cross_silo
    from fedprivacy.uldp.config import UldpConfig

    config = UldpConfig.from_mapping(tomllib.loads(str(cfg["uldp-config"])))
    data_dir = str(cfg.get("data-dir", "")) or None
    run_cross_silo(
        config.with_overrides(data_dir=data_dir),
        transport,
        run_dir,
        roster=transport.roster,
        pause=pause,
        forge=str(cfg.get("forge", "")),
    )


#: What the ServerApp runs for the run configuration's ``task``.
TASKS: Registry[Callable[[Any, GridTransport, Path, StagePause, Roster | None], None]] = Registry(
    "task"
)
TASKS.register("fedavg", _fedavg)
TASKS.register("uldp", _uldp)


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Discover the nodes, run the configured task and write the run directory."""
    cfg = context.run_config
    task = str(cfg.get("task", "fedavg"))
    run_task = TASKS.lookup(task)
    run_dir = Path(str(cfg["run-dir"]))
    timeout = float(cfg["stage-timeout"])
    keys = Roster.from_file(str(cfg["roster"])) if str(cfg.get("roster", "")) else None
    expect, wait = int(cfg["supernodes"]), float(cfg["node-wait"])
    roster, refused = discover_roster(grid, expect, wait=wait, timeout=timeout, keys=keys)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / "identity.json", {"admitted": roster, "refused": refused})
    RosterError.check(roster, expect, wait, refused)  # never a run on part of the federation
    from fedprivacy.flower.deploy.run import StagePause

    pause = StagePause(str(cfg.get("pause-at", "")), run_dir / "resume")
    run_task(cfg, GridTransport(grid, roster, timeout), run_dir, pause, keys)


def app_pyproject(name: str = "fedprivacy-flower") -> str:
    """The ``pyproject.toml`` of a Flower App directory that runs this app (``flwr run DIR``).

    The app's code is the installed ``fedprivacy`` package, so the directory holds only this
    file; every SuperLink and SuperNode machine needs ``pip install fedprivacy[flower]``.

    Examples
    --------
    >>> "fedprivacy.flower.deploy.apps:server_app" in app_pyproject()
    True
    """
    return f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "1.0.0"
description = "fedprivacy on Flower: the round loop, SecAgg and the privacy report"
license = "Apache-2.0"
dependencies = []

[tool.flwr.app]
publisher = "fedprivacy"

[tool.flwr.app.components]
serverapp = "fedprivacy.flower.deploy.apps:server_app"
clientapp = "fedprivacy.flower.deploy.apps:client_app"

[tool.flwr.app.config]
task = "fedavg"
train-config = ""
uldp-config = ""
data-dir = ""
run-dir = ""
supernodes = 1
node-wait = 60.0
stage-timeout = 60.0
pause-at = ""
forge = ""
overlap-rounds = false
roster = ""
"""
