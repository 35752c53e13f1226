"""Signatures under a party's long-term key: ECDSA P-256 with SHA-256 (``cryptography``).

The keys are the SuperNode authentication keys (:mod:`fedprivacy.flower.nodes.node_auth`, OpenSSH
format), so a deployment needs no second key per node: the same key that admits a node to the
SuperLink signs its claims (its user id, its SecAgg public keys, the survivor list of a round).
:class:`Roster` maps each user to its public key; it is distributed by the federation's operator
with the nodes' policies, never by the server.

**One context per kind of statement.** A key signs only through :meth:`SigningKey.sign`, which
takes a :class:`Statement` and signs ``"fedprivacy/signature/v1" | kind | payload`` (encoded
unambiguously), and a signature verifies only under the kind it was made for: a signed ``hello``
can never pass as signed keys or a signed survivor list, whatever bytes the server chose for
the nonce (adversary: a server that asks a node to sign bytes of its choosing).

Examples
--------
>>> key = SigningKey.generate()
>>> roster = Roster({3: key.public_openssh()})
>>> signature = key.sign(Statement.SURVIVORS, b"round 7: users 1, 2, 3")
>>> roster.verify(3, Statement.SURVIVORS, b"round 7: users 1, 2, 3", signature)
>>> roster.verify(3, Statement.SURVIVORS, b"round 7: users 1, 2", signature)
Traceback (most recent call last):
...
fedprivacy.errors.AuthenticationError: user 3's signature does not verify
>>> roster.verify(3, Statement.HELLO, b"round 7: users 1, 2, 3", signature)
Traceback (most recent call last):
...
fedprivacy.errors.AuthenticationError: user 3's signature does not verify
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fedprivacy.crypto.keys import encode_context
from fedprivacy.errors import AuthenticationError, InvalidKeyError

__all__ = ["Roster", "SigningKey", "Statement", "load_public_key"]

_ALGORITHM = ec.ECDSA(hashes.SHA256())
_DOMAIN = "fedprivacy/signature/v1"


class Statement(Enum):
    """The kinds of statement a node key signs; each is its own signing context."""

    HELLO = "hello"  # a node's claim to a user id, over the server's fresh nonce
    KEYS = "secagg-keys"  # a node's SecAgg public keys for a round or a key epoch
    SURVIVORS = "survivors"  # the aggregated set of a round (the consistency check)


def _signed_bytes(kind: Statement, payload: bytes) -> bytes:
    """The bytes actually signed: the domain, the statement's kind, then the payload."""
    return encode_context(_DOMAIN, kind.value, payload)


def load_public_key(text: str) -> ec.EllipticCurvePublicKey:
    """A P-256 public key from its OpenSSH line (``ecdsa-sha2-nistp256 AAAA...``).

    Raises
    ------
    InvalidKeyError
        If the text is not an OpenSSH P-256 public key.
    """
    try:
        key = serialization.load_ssh_public_key(text.strip().encode())
    except (ValueError, TypeError) as exc:
        raise InvalidKeyError(f"not an OpenSSH public key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise InvalidKeyError("the key is not an ECDSA P-256 key")
    return key


@dataclass(frozen=True)
class SigningKey:
    """A party's private signing key (never leaves its machine)."""

    private: ec.EllipticCurvePrivateKey

    @classmethod
    def generate(cls) -> SigningKey:
        """A fresh P-256 key from the OS's randomness."""
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_file(cls, path: str | Path) -> SigningKey:
        """The OpenSSH (or PEM PKCS#8) private key at ``path``.

        Raises
        ------
        InvalidKeyError
            If the file is missing or holds no P-256 private key.
        """
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise InvalidKeyError(f"cannot read the signing key {path}: {exc}") from None
        loaders = (serialization.load_ssh_private_key, serialization.load_pem_private_key)
        for load in loaders:
            try:
                key = load(data, None)
            except (ValueError, TypeError):
                continue
            if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1":
                return cls(key)
        raise InvalidKeyError(f"{path} holds no ECDSA P-256 private key")

    def sign(self, kind: Statement, payload: bytes) -> bytes:
        """The DER-encoded ECDSA signature of ``payload`` as a statement of ``kind``."""
        return self.private.sign(_signed_bytes(kind, payload), _ALGORITHM)

    def public_openssh(self) -> str:
        """The public key as its OpenSSH line."""
        public = self.private.public_key()
        return public.public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        ).decode()


@dataclass(frozen=True)
class Roster:
    """The federation's public keys: user id -> OpenSSH public key line.

    Written by the operator who admits the nodes (the same keys registered with the SuperLink),
    read by every party from its own machine.
    """

    keys: Mapping[int, str]
    _loaded: dict[int, ec.EllipticCurvePublicKey] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for user, text in self.keys.items():
            self._loaded[int(user)] = load_public_key(text)

    @classmethod
    def from_file(cls, path: str | Path) -> Roster:
        """Read a roster file: TOML ``[keys]`` with ``"USER" = "ecdsa-sha2-nistp256 ..."``.

        Raises
        ------
        InvalidKeyError
            If the file is missing, not TOML or holds a bad key.
        """
        try:
            data = tomllib.loads(Path(path).read_text())
            keys = {int(u): str(k) for u, k in dict(data["keys"]).items()}
        except (OSError, tomllib.TOMLDecodeError, KeyError, ValueError, TypeError) as exc:
            raise InvalidKeyError(f"cannot read the roster {path}: {exc}") from None
        return cls(keys)

    def to_toml(self) -> str:
        """The roster file's text (see :meth:`from_file`)."""
        lines = ["[keys]"] + [f'"{u}" = "{self.keys[u].strip()}"' for u in sorted(self.keys)]
        return "\n".join(lines) + "\n"

    def __contains__(self, user: object) -> bool:
        return user in self._loaded

    def verify(self, user: int, kind: Statement, payload: bytes, signature: bytes) -> None:
        """Check ``signature`` on ``payload``, a statement of ``kind``, under ``user``'s key.

        Raises
        ------
        AuthenticationError
            If ``user`` is not in the roster or the signature does not verify.
        """
        key = self._loaded.get(int(user))
        if key is None:
            raise AuthenticationError(f"user {user} is not in the roster")
        try:
            key.verify(signature, _signed_bytes(kind, payload), _ALGORITHM)
        except InvalidSignature:
            raise AuthenticationError(f"user {user}'s signature does not verify") from None
