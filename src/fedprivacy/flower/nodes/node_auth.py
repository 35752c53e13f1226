"""SuperNode authentication keys: which nodes may join the SuperLink at all.

TLS proves the SuperLink to the nodes; with ``flower-superlink --enable-supernode-auth`` the
SuperLink also admits only SuperNodes whose public key was registered
(``flwr supernode register KEY.pub <connection>``), each node proving its key
(``flower-supernode --auth-supernode-private-key ... --auth-supernode-public-key ...``). Flower
reads OpenSSH-format ECDSA keys; :func:`generate_node_keys` makes one P-256 pair per node from the
OS's randomness, private keys written 0600.

Examples
--------
>>> import tempfile
>>> keys = generate_node_keys(tempfile.mkdtemp(), [0, 1])
>>> sorted(keys), keys[0].public.read_text().startswith("ecdsa-sha2-nistp256 ")
([0, 1], True)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fedprivacy.files import atomic_write_bytes

__all__ = ["NodeKeys", "generate_node_keys"]


@dataclass(frozen=True)
class NodeKeys:
    """One SuperNode's key pair (OpenSSH format).

    Attributes
    ----------
    private, public : pathlib.Path
        ``node-U`` (0600) and ``node-U.pub``.
    """

    private: Path
    public: Path


def generate_node_keys(
    out_dir: str | os.PathLike[str], users: Iterable[int]
) -> dict[int, NodeKeys]:
    """A fresh ECDSA P-256 key pair per user in ``out_dir``.

    Parameters
    ----------
    out_dir : path
        Created if missing.
    users : iterable of int
        The users (SuperNodes) that get a key.

    Returns
    -------
    dict of int to NodeKeys
        The files of each user's keys.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    keys: dict[int, NodeKeys] = {}
    for user in users:
        key = ec.generate_private_key(ec.SECP256R1())
        private = out / f"node-{int(user)}"
        public = out / f"node-{int(user)}.pub"
        atomic_write_bytes(
            private,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            ),
            private=True,
        )
        atomic_write_bytes(
            public,
            key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
            + b"\n",
        )
        keys[int(user)] = NodeKeys(private, public)
    return keys
