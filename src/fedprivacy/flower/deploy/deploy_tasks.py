"""What ``flower deploy`` runs: FedAvg on user nodes, or ULDP-FL on silos.

:func:`fedprivacy.flower.deploy.deploy.deploy` runs the task.

A :class:`DeployTask` says how many SuperNodes a configuration needs, what the app's run
configuration carries, each SuperNode's ``--node-config``, and how the run directory is compared
with the in-process computation afterwards. :func:`deploy_task` picks the task of a
configuration's type (:data:`TASKS`).

Examples
--------
>>> from fedprivacy.fl.training_config import TrainConfig
>>> task = deploy_task(TrainConfig(users=6))
>>> (task.name, task.supernodes, task.node_config(2))
('fedavg', 6, 'partition-id=2')
>>> from fedprivacy.uldp.config import UldpConfig
>>> task = deploy_task(UldpConfig(method="ULDP-AVG-w"))
>>> (task.name, task.supernodes, task.node_config(3))
('uldp', 4, 'fedprivacy-silo=3')
>>> deploy_task("fedavg")  # type: ignore[arg-type]
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: config: cannot deploy a str
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedprivacy._registry import Registry
from fedprivacy.config_sections import DEFAULT_NOISE_MODE
from fedprivacy.errors import ParameterError
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.policy import PartyPolicy
from fedprivacy.uldp.config import UldpConfig

__all__ = ["TASKS", "DeployTask", "FedAvgTask", "UldpTask", "deploy_task"]


class DeployTask(ABC):
    """One kind of deployed run (see the module docstring)."""

    name: str

    @property
    @abstractmethod
    def supernodes(self) -> int:
        """SuperNodes the run needs."""

    @abstractmethod
    def run_config(self) -> dict[str, Any]:
        """The task's entries of the app's run configuration."""

    @abstractmethod
    def node_config(self, node: int) -> str:
        """``--node-config`` of SuperNode ``node``."""

    @abstractmethod
    def policy(self, node: int) -> PartyPolicy:
        """The policy :func:`~fedprivacy.flower.deploy.deploy.deploy` writes for node ``node``.

        ``deploy`` acts as the operator of every local node: it writes each node's own policy
        (:mod:`fedprivacy.policy`) from the command line's options, on the node's side; the
        server never sends it.
        """

    @abstractmethod
    def compare(self, run_dir: Path) -> dict[str, Any]:
        """The comparison with the in-process computation (merged into the summary)."""

    def check_node_auth(self, node_auth: bool) -> None:  # noqa: B027 (optional hook)
        """Refuse, before any process starts, a task that needs node authentication without it."""

    def check_overlap(self) -> None:
        """Refuse overlapped rounds where the task has no secure rounds to overlap."""
        raise ParameterError("--overlap-rounds", "overlaps FedAvg's secure rounds only")

    def check_key_rounds(self) -> None:
        """Refuse reused SecAgg keys where the task runs no SecAgg rounds."""
        raise ParameterError("--key-rounds", "reuses the keys of FedAvg's secure rounds only")

    def preflight(self) -> None:  # noqa: B027 (an optional hook: nothing by default)
        """Checks that need the data, run just before any process starts (none by default)."""

    @property
    @abstractmethod
    def forges(self) -> tuple[str, ...]:
        """The parameters a lying server can forge in this task (fault injection)."""


class FedAvgTask(DeployTask):
    """FedAvg (and SecAgg, DP) with one user per SuperNode."""

    name = "fedavg"

    def __init__(self, config: TrainConfig) -> None:
        if config.canaries:
            raise ParameterError(
                "canaries", "are inserted in process (fedprivacy train), not in a deployment"
            )
        self.config = config

    def check_node_auth(self, node_auth: bool) -> None:
        """The exact noise mode needs the nodes' consistency check, which node keys give."""
        if self.config.noise_mode != DEFAULT_NOISE_MODE and not node_auth:
            raise ParameterError(
                "--noise-mode",
                f"{self.config.noise_mode} needs node authentication (each node's consistency "
                "check): drop --no-tls and --simulation",
            )

    def check_key_rounds(self) -> None:
        """Reused keys need secure rounds."""
        if not self.config.secagg:
            raise ParameterError("--key-rounds", "reuses the keys of secure rounds: add --secagg")

    def check_overlap(self) -> None:
        """Overlapped rounds need secure ones, and no guard (which needs each round's outcome)."""
        if not self.config.secagg:
            raise ParameterError("--overlap-rounds", "overlaps secure rounds: add --secagg")
        if self.config.guard is not None:
            raise ParameterError(
                "--overlap-rounds",
                "selects round t+1 before round t is unmasked, which the privacy guard "
                "(guard in the configuration) cannot allow",
            )

    @property
    def supernodes(self) -> int:
        """One per user."""
        return self.config.users

    def run_config(self) -> dict[str, Any]:
        """The training configuration."""
        return {"task": self.name, "train-config": self.config.to_toml()}

    def node_config(self, node: int) -> str:
        """The node's user."""
        return f"partition-id={node}"

    @property
    def forges(self) -> tuple[str, ...]:
        """See :data:`fedprivacy.flower.faults.lying_server.FEDAVG_FORGES`."""
        from fedprivacy.flower.faults.lying_server import FEDAVG_FORGES

        return FEDAVG_FORGES

    def policy(self, node: int) -> PartyPolicy:
        """What a user's operator who agrees with this configuration writes."""
        from fedprivacy.flower.nodes.node_policy import training_policy

        return training_policy(self.config)

    def compare(self, run_dir: Path) -> dict[str, Any]:
        """Every aggregate against the in-process pipeline.

        :mod:`fedprivacy.flower.fedavg.reference` recomputes it.
        """
        import numpy as np

        from fedprivacy.flower.fedavg.reference import (
            max_abs_error,
            observed_dropouts,
            observed_layout,
            simulate,
        )

        events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines() if x]
        trace = np.load(run_dir / "availability.npy")
        with np.load(run_dir / "aggregates.npz") as z:
            deployed = {int(k.removeprefix("round_")): z[k] for k in z.files}
        layout = observed_layout(events)
        simulated = simulate(self.config, list(trace), observed_dropouts(events), layout)
        # None: no round aggregated, nothing to compare
        err = max_abs_error(deployed, simulated) if deployed else None
        return {"max_abs_error_vs_simulation": err}


class UldpTask(DeployTask):
    """Cross-silo ULDP-FL with the private weighting protocol, one silo per SuperNode.

    ``data_dir`` is given to the ServerApp (run configuration) and to every silo (node
    configuration); ``None`` leaves both to ``$FEDPRIVACY_DATA``.
    """

    name = "uldp"

    def __init__(self, config: UldpConfig, data_dir: str | None = None) -> None:
        from fedprivacy.uldp.deployment import check_deployable

        self.config = check_deployable(config)
        self.data_dir = str(Path(data_dir).resolve()) if data_dir else None

    @property
    def supernodes(self) -> int:
        """One per silo."""
        return self.config.num_silos

    def run_config(self) -> dict[str, Any]:
        """The ULDP-FL configuration and the data directory."""
        return {
            "task": self.name,
            "uldp-config": self.config.to_toml(),
            "data-dir": self.data_dir or "",
        }

    def node_config(self, node: int) -> str:
        """The node's silo and data directory."""
        out = f"fedprivacy-silo={node}"
        return out if not self.data_dir else f'{out} data-dir="{self.data_dir}"'

    def preflight(self) -> None:
        """Every user must hold a record, and at most N_max: Protocol 1 weights them.

        Raises
        ------
        ParameterError
            See :func:`fedprivacy.uldp.deployment.check_allocation`.
        """
        from fedprivacy.uldp.deployment import check_allocation

        check_allocation(self.config.with_overrides(data_dir=self.data_dir))

    @property
    def forges(self) -> tuple[str, ...]:
        """See :data:`fedprivacy.flower.faults.silo_forge.SILO_FORGES`."""
        from fedprivacy.flower.faults.silo_forge import SILO_FORGES

        return SILO_FORGES

    def policy(self, node: int) -> PartyPolicy:
        """What a silo's operator who agrees with this configuration writes."""
        from fedprivacy.flower.uldp.silo_policy import silo_policy

        return silo_policy(self.config)

    def compare(self, run_dir: Path) -> dict[str, Any]:
        """Every aggregate against the in-process plaintext sum (the silos' noise apart)."""
        from fedprivacy.flower.uldp.cross_silo_reference import compare_cross_silo

        return compare_cross_silo(run_dir, self.data_dir)


#: The task of each configuration type, by the type's name.
TASKS: Registry[Callable[..., DeployTask]] = Registry("config", "cannot deploy a {name}")
TASKS.register(TrainConfig.__name__, FedAvgTask)
TASKS.register(UldpConfig.__name__, UldpTask)


def deploy_task(config: TrainConfig | UldpConfig, data_dir: str | None = None) -> DeployTask:
    """The :class:`DeployTask` of ``config`` (``data_dir`` for a ULDP-FL run).

    Raises
    ------
    ParameterError
        If the configuration's type has no task.
    """
    factory = TASKS.lookup(type(config).__name__)
    return factory(config, data_dir) if isinstance(config, UldpConfig) else factory(config)
