"""Issue #50, finding 1 for Protocol 1 (cross-silo): a server that substitutes the silos' keys.

The server hands silo 0 a key roster whose key for silo 1 is its own. Silo 0 then seals the
shared seed ``R`` (which derives the masks and the multiplicative blinds of every later step)
to the server. Without node authentication the server opens it, from the bytes silo 0 sent; with
it silo 0 refuses the roster before it agrees on any key or seals anything.
"""

from __future__ import annotations

import dataclasses

import pytest

from fedprivacy.crypto.aead import open_sealed
from fedprivacy.crypto.keys import agree, generate_keypair
from fedprivacy.crypto.paillier import PaillierPrivateKey
from fedprivacy.crypto.paillier import generate_keypair as paillier_keypair
from fedprivacy.crypto.signing import SigningKey
from fedprivacy.secagg.consistency import checks_for
from fedprivacy.secagg.errors import UnsignedKeyError
from fedprivacy.secagg.private_weighting.messages import DhRoster, SeedShares, encode_message
from fedprivacy.secagg.private_weighting.randomness import (
    seed_associated_data,
    seed_encryption_key,
)

from .test_private_weighting_rejections import BITS, Session


@pytest.fixture(scope="module")
def key() -> PaillierPrivateKey:
    return paillier_keypair(BITS, insecure_small_key=True)


def _substituted(roster: DhRoster, own: bytes) -> DhRoster:
    """Silo 0's roster with the server's own key in place of silo 1's (its signature kept)."""
    keys = tuple((s, own if s == 1 else pk, sig) for s, pk, sig in roster.keys)
    return dataclasses.replace(roster, keys=keys)


def test_without_node_authentication_the_server_opens_the_shared_seed(
    key: PaillierPrivateKey,
) -> None:
    sess = Session(key)
    sess.keys()
    server_key = generate_keypair()
    forged = _substituted(sess.server.finish_keys()[0], server_key.public_bytes)
    shares = sess.silos[0].on_roster(encode_message(forged))
    assert isinstance(shares, SeedShares)
    silo_0 = sess.silos[0]._keypair.public_bytes
    session = sess.params.session_id
    sealed = dict(shares.ciphertexts)[1]
    agreement = agree(server_key.private, silo_0)
    seed = open_sealed(
        seed_encryption_key(agreement, session, 1), sealed, seed_associated_data(session, 0, 1)
    )
    assert seed == sess.silos[0]._seed  # R, from the bytes silo 0 sent


def test_signed_keys_a_silo_refuses_the_substituted_roster(key: PaillierPrivateKey) -> None:
    sess = Session(key)
    checks = checks_for({s: SigningKey.generate() for s in range(len(sess.silos))})
    announcements = sess.server.start_setup()
    for s, silo in enumerate(sess.silos):
        sess.server.receive(encode_message(silo.on_paillier_key(announcements[s], checks[s])))
    honest = sess.server.finish_keys()
    forged = _substituted(honest[0], generate_keypair().public_bytes)
    with pytest.raises(UnsignedKeyError, match="the key of silo 1 does not carry its signature"):
        sess.silos[0].on_roster(encode_message(forged), checks[0].roster)
    assert sess.silos[0]._seed is None  # nothing sealed
    # the honest roster, every key signed, passes every silo's check
    for s, silo in enumerate(sess.silos[1:], start=1):
        assert silo.on_roster(encode_message(honest[s]), checks[s].roster) is None
