"""SuperNode key pairs: OpenSSH ECDSA P-256, private keys 0600, a fresh pair per node."""

from __future__ import annotations

import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    load_ssh_private_key,
    load_ssh_public_key,
)

from fedprivacy.flower.nodes.node_auth import generate_node_keys


def test_each_node_gets_its_own_p256_pair_in_openssh_format(tmp_path: Path) -> None:
    keys = generate_node_keys(tmp_path / "keys", range(3))
    publics = set()
    for pair in keys.values():
        private = load_ssh_private_key(pair.private.read_bytes(), password=None)
        public = load_ssh_public_key(pair.public.read_bytes())
        assert isinstance(private, ec.EllipticCurvePrivateKey)
        assert isinstance(private.curve, ec.SECP256R1)
        assert private.public_key().public_numbers() == public.public_numbers()
        assert stat.S_IMODE(pair.private.stat().st_mode) == 0o600
        publics.add(pair.public.read_text())
    assert len(publics) == 3
