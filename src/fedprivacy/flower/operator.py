"""What ``deploy`` writes as the operator of every local node: its policy and the roster.

On a real federation each node's operator writes these on the node's own machine
(:mod:`fedprivacy.policy`, README "A node's policy on another machine"); a local deployment is
the operator of all of its nodes and writes them into the run directory, each policy file 0600.
"""

from __future__ import annotations

from pathlib import Path

from fedprivacy.crypto.signing import Roster
from fedprivacy.files import atomic_write_text
from fedprivacy.flower.deploy_tasks import DeployTask
from fedprivacy.flower.node_auth import NodeKeys

__all__ = ["write_policies", "write_roster"]


def write_roster(keys: dict[int, NodeKeys], path: Path) -> Path | None:
    """The federation's public keys (user -> key), as the operator who admits the nodes has."""
    if not keys:
        return None
    roster = Roster({u: k.public.read_text() for u, k in keys.items()})
    atomic_write_text(path, roster.to_toml())
    return path


def write_policies(
    task: DeployTask,
    folder: Path,
    nodes: int,
    keys: dict[int, NodeKeys],
    roster: Path | None,
    key_rounds: int = 1,
) -> Path:
    """Each node's policy file, as its operator would write it (``folder/node-U.toml``, 0600).

    With node authentication it names the node's own key and the federation's roster;
    ``key_rounds`` is how many rounds each node masks with one pair of SecAgg keys.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for u in range(nodes):
        policy = task.policy(u)
        if key_rounds != 1:
            policy = policy.with_overrides(key_rounds=key_rounds)
        if u in keys and roster is not None:
            own = {"signing_key": str(keys[u].private.resolve()), "roster": str(roster.resolve())}
            policy = policy.with_overrides(**own)
        path = folder / f"node-{u}.toml"
        atomic_write_text(path, policy.to_toml())
        path.chmod(0o600)
    return folder
