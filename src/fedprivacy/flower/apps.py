"""The Flower App: a ServerApp that runs the pipeline's round loop, a ClientApp per node.

Both are on Flower's Message API. The ServerApp (``server_app``, ``@server_app.main()``) waits for
the SuperNodes, asks each which user it is (the roster), and runs
:func:`fedprivacy.flower.run.run_deployed` with :class:`~fedprivacy.flower.grid.GridTransport`:
every stage of every round is one ``grid.send_and_receive``. The ClientApp (``client_app``,
``@client_app.query("fedprivacy")``) answers each message with
:meth:`fedprivacy.flower.node.Node.handle`, keeping the node's protocol state in
``context.state`` (a ``ConfigRecord`` of bytes that the SuperNode keeps on the node's machine).

Run configuration (``[tool.flwr.app.config]`` of the app, see :func:`app_pyproject`):

=================  ==========================================================================
``train-config``   the :class:`~fedprivacy.experiments.training_config.TrainConfig` as TOML
``run-dir``        where the ServerApp writes the run directory (on the SuperLink's machine)
``supernodes``     how many SuperNodes to wait for
``node-wait``      the most seconds to wait for them
``stage-timeout``  the most seconds a stage waits for the nodes' replies
``pause-at``       fault injection: ``"R:STAGE"`` (see :class:`~fedprivacy.flower.run.StagePause`)
=================  ==========================================================================

A SuperNode says which user it is with ``--node-config "partition-id=U"`` (or
``fedprivacy-user=U``); ``fedprivacy-fault="replay@R"`` makes it replay a message in round ``R``
(tests of the server's typed rejections).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedprivacy.flower.grid import RECORD, GridTransport, discover_roster, to_record
from fedprivacy.flower.node import Node

__all__ = ["app_pyproject", "client_app", "server_app"]

STATE = "fedprivacy-state"

server_app = ServerApp()
client_app = ClientApp()


def _user(node_config: Any) -> int:
    for key in ("fedprivacy-user", "partition-id"):
        if key in node_config:
            return int(node_config[key])
    raise ValueError("the SuperNode needs --node-config 'partition-id=U' (its fedprivacy user)")


@client_app.query("fedprivacy")
def answer(msg: Message, context: Context) -> Message:
    """Answer one stage's request with this node's :class:`~fedprivacy.flower.node.Node`."""
    node = Node(_user(context.node_config), str(context.node_config.get("fedprivacy-fault", "")))
    records = context.state.config_records
    state: dict[str, bytes] = dict(records[STATE]) if STATE in records else {}  # type: ignore[arg-type]
    reply = node.handle(dict(msg.content.config_records[RECORD]), state)
    records[STATE] = ConfigRecord(dict(state))
    return Message(to_record(reply), reply_to=msg)


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Discover the nodes, run the configured rounds and write the run directory."""
    from fedprivacy.experiments.training_config import TrainConfig
    from fedprivacy.flower.run import StagePause, run_deployed

    cfg = context.run_config
    run_dir = Path(str(cfg["run-dir"]))
    config = TrainConfig.from_mapping(tomllib.loads(str(cfg["train-config"])))
    timeout = float(cfg["stage-timeout"])
    roster = discover_roster(
        grid, int(cfg["supernodes"]), wait=float(cfg["node-wait"]), timeout=timeout
    )
    run_deployed(
        config,
        GridTransport(grid, roster, timeout),
        run_dir,
        roster=roster,
        pause=StagePause(str(cfg.get("pause-at", "")), run_dir / "resume"),
    )


def app_pyproject(name: str = "fedprivacy-flower") -> str:
    """The ``pyproject.toml`` of a Flower App directory that runs this app (``flwr run DIR``).

    The app's code is the installed ``fedprivacy`` package, so the directory holds only this
    file; every SuperLink and SuperNode machine needs ``pip install fedprivacy[flower]``.

    Examples
    --------
    >>> "fedprivacy.flower.apps:server_app" in app_pyproject()
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
serverapp = "fedprivacy.flower.apps:server_app"
clientapp = "fedprivacy.flower.apps:client_app"

[tool.flwr.app.config]
train-config = ""
run-dir = ""
supernodes = 1
node-wait = 60.0
stage-timeout = 60.0
pause-at = ""
"""
