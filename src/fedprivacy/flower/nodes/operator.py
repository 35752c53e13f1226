"""What ``deploy`` writes as the operator of every local node: its policy and the roster.

On a real federation each node's operator writes these on the node's own machine
(:mod:`fedprivacy.policy`, README "A node's policy on another machine"); a local deployment is
the operator of all of its nodes and writes them into the run directory, each policy file 0600.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fedprivacy.crypto.signing import Roster
from fedprivacy.files import atomic_write_text
from fedprivacy.flower.nodes.node_auth import NodeKeys, generate_node_keys
from fedprivacy.policy import PartyPolicy

__all__ = ["write_federation", "write_policies", "write_roster"]


def write_roster(keys: dict[int, NodeKeys], path: Path) -> Path | None:
    """The federation's public keys (user -> key), as the operator who admits the nodes has."""
    if not keys:
        return None
    roster = Roster({u: k.public.read_text() for u, k in keys.items()})
    atomic_write_text(path, roster.to_toml())
    return path


def _with_key(policy: PartyPolicy, key: NodeKeys | None, roster: Path | None) -> PartyPolicy:
    """``policy`` naming the node's key and the roster; without them, allowing unsigned rounds.

    A deployment without node keys is its operator's choice (``--no-tls``, ``--simulation``).
    """
    if key is None or roster is None:
        return policy.with_overrides(allow_unauthenticated=True)
    return policy.with_overrides(
        signing_key=str(key.private.resolve()), roster=str(roster.resolve())
    )


def write_policies(
    policy_of: Callable[[int], PartyPolicy],
    folder: Path,
    nodes: int,
    keys: dict[int, NodeKeys],
    roster: Path | None,
    key_rounds: int = 1,
) -> Path:
    """Each node's policy file, as its operator would write it (``folder/node-U.toml``, 0600).

    ``policy_of(u)`` is what node ``u``'s operator accepts; with node authentication the file
    also names the node's own key and the federation's roster (unless the policy names its
    own), without it it allows rounds without (the operator chose so); ``key_rounds`` is how
    many rounds each node masks with one pair of SecAgg keys.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for u in range(nodes):
        policy = policy_of(u)
        if key_rounds != 1:
            policy = policy.with_overrides(key_rounds=key_rounds)
        if not (policy.signing_key and policy.roster):  # else the operator's own
            policy = _with_key(policy, keys.get(u), roster)
        path = folder / f"node-{u}.toml"
        atomic_write_text(path, policy.to_toml())
        path.chmod(0o600)
    return folder


def write_federation(
    folder: Path,
    users: int,
    policy_of: Callable[[int], PartyPolicy] = lambda _: PartyPolicy(),
) -> tuple[Path, Path]:
    """Node keys, the roster and each node's policy (``policy_of``, with its key) in ``folder``.

    For nodes that all run on this machine (Flower's simulation runtime, which reads
    ``$FEDPRIVACY_POLICY_DIR/node-U.toml``, or a ClientApp in process): ``folder/node-keys``
    (``node-U`` 0600, ``node-U.pub``, ``roster.toml``) and ``folder/policies``; by default
    each policy is the safe defaults.

    Returns
    -------
    tuple of Path
        The roster and the folder of policies.

    Examples
    --------
    >>> import tempfile
    >>> roster, policies = write_federation(Path(tempfile.mkdtemp()), 3)
    >>> roster.name, sorted(p.name for p in policies.iterdir())
    ('roster.toml', ['node-0.toml', 'node-1.toml', 'node-2.toml'])
    """
    keys = generate_node_keys(folder / "node-keys", range(users))
    roster = write_roster(keys, folder / "node-keys" / "roster.toml")
    assert roster is not None
    policies = write_policies(policy_of, folder / "policies", users, keys, roster)
    return roster, policies
