"""Issue #50, findings 1, 3 and 7: a server that lies about keys, participants or nonces.

Finding 1, key substitution: the server hands the victim a key roster whose "neighbours" are
key pairs of its own. The victim seals its shares of ``b_w`` (and ``s_sk_w``) to the server and
masks with pairs the server can compute, so its input comes out unmasked: no unmask request is
sent, so the survivor-list check never runs. The attack runs on the real ``SecAggClient``, from
the bytes the victim sends; without node authentication it recovers ``x_w`` exactly (fresh keys
and reused keys alike), with it the victim refuses the roster before sealing anything.

Finding 3, phantom participants: a round whose participants are not all in the node's own
roster is refused before the node advertises anything.

Finding 7: a node signs a hello nonce of the fixed length only, and a signature of one kind of
statement never verifies as another.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fedprivacy.crypto.aead import open_sealed, seal
from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.keys import KeyPair, agree, generate_keypair
from fedprivacy.crypto.prg import MaskExpander, reduce
from fedprivacy.crypto.shamir import combine_shares, split_secret
from fedprivacy.crypto.signing import SigningKey, Statement
from fedprivacy.errors import AuthenticationError
from fedprivacy.flower.messaging.identity import NONCE_BYTES, hello_payload, signed_hello
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg import SecAggClient, SecAggParameters, SecAggServer
from fedprivacy.secagg.consistency import ConsistencyCheck, checks_for
from fedprivacy.secagg.derivation import (
    keys_statement,
    pairwise_mask_key,
    self_mask_key,
    share_associated_data,
    share_encryption_key,
)
from fedprivacy.secagg.errors import UnsignedKeyError
from fedprivacy.secagg.key_epoch import KeyEpoch
from fedprivacy.secagg.messages import (
    SERVER,
    Header,
    KeyRoster,
    MessageKind,
    ShareDelivery,
    ShareKeys,
    decode_message,
    decode_share_plaintext,
    encode_message,
    encode_share_plaintext,
)
from fedprivacy.secagg.party import pairwise_sign
from fedprivacy.secagg.signed_keys import sign_keys, verify_keys

N, D, VICTIM = 10, 8, 0


def _params(round_index: int = 0, session: bytes | None = None) -> SecAggParameters:
    codec = FixedPointCodec.for_sum(1.0, N, 32)
    return SecAggParameters.create(session or bytes(16), round_index, range(N), D, codec)


class Substitution:
    """The lying server against one victim: every other key of the victim's roster is its own."""

    def __init__(self, params: SecAggParameters, victim: SecAggClient) -> None:
        self.params, self.victim = params, victim
        self.fake: dict[int, tuple[KeyPair, KeyPair]] = {
            v: (generate_keypair(), generate_keypair()) for v in params.neighbours[VICTIM]
        }
        self.sent: list[bytes] = []  # every byte the victim sent the server

    def header(self, kind: MessageKind) -> Header:
        p = self.params
        return Header(kind, p.session_id, p.round_index, SERVER, VICTIM)

    def run(self, update: np.ndarray) -> None:
        """Drive the victim through the round on forged messages (raises where it refuses)."""
        if not self.victim._reusing:
            self.sent.append(encode_message(self.victim.advertise_keys()))
        own = self.victim._enc.public_bytes, self.victim._mask.public_bytes
        entries = [(VICTIM, *own, b"")]
        entries += [(v, c.public_bytes, s.public_bytes, b"") for v, (c, s) in self.fake.items()]
        roster = KeyRoster(self.header(MessageKind.KEY_ROSTER), tuple(sorted(entries)))
        self.sent.append(encode_message(self.victim.share_keys(encode_message(roster))))
        delivery = ShareDelivery(self.header(MessageKind.SHARE_DELIVERY), self.forged_shares(own))
        masked = self.victim.masked_input(encode_message(delivery), update)
        self.sent.append(encode_message(masked))

    def forged_shares(self, own: tuple[bytes, bytes]) -> tuple[tuple[int, bytes], ...]:
        """Shares "from" the fake neighbours, sealed with the fake keys (any secret will do)."""
        p, x = self.params, self.params.share_point(VICTIM)
        points = [p.share_point(u) for u in range(N)]
        out = []
        for v, (c, _) in sorted(self.fake.items()):
            share = split_secret(os.urandom(32), points, p.threshold)[x]
            key = share_encryption_key(agree(c.private, own[0]), p, v, VICTIM)
            plain = encode_share_plaintext(v, VICTIM, share, None)
            out.append((v, seal(key, plain, share_associated_data(p, v, VICTIM))))
        return tuple(out)

    def recover(self) -> np.ndarray:
        """x_w from the victim's bytes: open its shares of b_w, rebuild every mask."""
        p = self.params
        messages = [decode_message(data) for data in self.sent]
        shares = next(m for m in messages if isinstance(m, ShareKeys))
        masked = messages[-1]
        victim_c, victim_s = self.victim._enc.public_bytes, self.victim._mask.public_bytes
        seed_shares = []
        for v, ct in shares.ciphertexts:
            key = share_encryption_key(agree(self.fake[v][0].private, victim_c), p, VICTIM, v)
            plain = open_sealed(key, ct, share_associated_data(p, VICTIM, v))
            seed_shares.append(decode_share_plaintext(plain)[2])
        seed = combine_shares(seed_shares[: p.threshold], p.threshold)
        expander = MaskExpander(p.vector_length, p.codec.bits)
        acc = masked.vector.astype(expander.dtype, copy=True)  # type: ignore[union-attr]
        expander.subtract_from(acc, self_mask_key(seed, p, VICTIM))
        for v, (_, s) in self.fake.items():
            key = pairwise_mask_key(agree(s.private, victim_s), p, VICTIM, v)
            expander.combine(acc, key, -pairwise_sign(VICTIM, v))
        reduce(acc, p.codec.bits)
        return np.asarray(p.codec.decode_sum(acc, 1), dtype=np.float64)


def _victim(params: SecAggParameters, *, check: bool, reuse: bool) -> SecAggClient:
    checks = checks_for({u: SigningKey.generate() for u in range(N)}) if check else {}
    epoch = KeyEpoch.start(params.session_id, VICTIM, max_rounds=5) if reuse else None
    return SecAggClient(params, VICTIM, consistency=checks.get(VICTIM), epoch=epoch)


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh-keys", "key-epoch"])
def test_without_node_authentication_key_substitution_reads_the_input(reuse: bool) -> None:
    """Documents the attack: the old behaviour, and still that of an unauthenticated node."""
    params = _params()
    attack = Substitution(params, _victim(params, check=False, reuse=reuse))
    update = np.random.default_rng(50).uniform(-1, 1, D)
    attack.run(update)
    assert np.max(np.abs(attack.recover() - update)) < 1 / params.codec.scale


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh-keys", "key-epoch"])
def test_signed_keys_the_victim_refuses_the_roster_before_sealing(reuse: bool) -> None:
    params = _params()
    attack = Substitution(params, _victim(params, check=True, reuse=reuse))
    with pytest.raises(UnsignedKeyError, match="not signed"):
        attack.run(np.zeros(D))
    # everything the server received is the advertised keys (nothing for a reused epoch)
    assert [decode_message(d).header.kind for d in attack.sent] == (
        [] if reuse else [MessageKind.ADVERTISE_KEYS]
    )


def test_a_signature_under_the_servers_own_key_is_refused() -> None:
    """The server signs the fake keys with a key of its own: not the roster's key of v."""
    params = _params()
    checks = checks_for({u: SigningKey.generate() for u in range(N)})
    victim = SecAggClient(params, VICTIM, consistency=checks[VICTIM])
    advert = victim.advertise_keys()
    forger = ConsistencyCheck(SigningKey.generate(), checks[VICTIM].roster)
    entries = [(VICTIM, advert.encryption_key, advert.masking_key, advert.signature)]
    for v in range(1, N):
        c, s = generate_keypair().public_bytes, generate_keypair().public_bytes
        entries.append((v, c, s, sign_keys(forger, params, v, c, s, epoch=False)))
    header = Header(MessageKind.KEY_ROSTER, params.session_id, 0, SERVER, VICTIM)
    with pytest.raises(UnsignedKeyError, match="user 1's signature does not verify"):
        victim.share_keys(KeyRoster(header, tuple(entries)))


def test_keys_signed_for_one_round_are_refused_in_another() -> None:
    """A server that rebuilt s_sk_v in round 0 cannot offer v's round-0 keys in round 1."""
    session = os.urandom(16)
    checks = checks_for({u: SigningKey.generate() for u in range(N)})
    r0, r1 = _params(0, session), _params(1, session)
    old = {u: SecAggClient(r0, u, consistency=checks[u]).advertise_keys() for u in range(1, N)}
    victim = SecAggClient(r1, VICTIM, consistency=checks[VICTIM])
    mine = victim.advertise_keys()
    entries = [(VICTIM, mine.encryption_key, mine.masking_key, mine.signature)]
    entries += [(u, a.encryption_key, a.masking_key, a.signature) for u, a in old.items()]
    header = Header(MessageKind.KEY_ROSTER, session, 1, SERVER, VICTIM)
    with pytest.raises(UnsignedKeyError, match="do not carry its signature"):
        victim.share_keys(KeyRoster(header, tuple(entries)))


def test_an_epochs_signature_binds_the_session_not_the_round() -> None:
    """Reused keys travel in every round's roster with the one signature of their epoch."""
    session = os.urandom(16)
    checks = checks_for({u: SigningKey.generate() for u in range(N)})
    epochs = {u: KeyEpoch.start(session, u, max_rounds=3) for u in range(N)}
    registered: dict[int, tuple[bytes, bytes, bytes]] = {}
    for r in range(2):
        params = _params(r, session)
        clients = {
            u: SecAggClient(params, u, consistency=checks[u], epoch=e) for u, e in epochs.items()
        }
        server = SecAggServer(params, registered=registered)
        for c in clients.values():
            if not registered:  # round 0: the keys are advertised (and signed) once
                server.receive(encode_message(c.advertise_keys()))
        rosters = server.finish_keys()
        for u, c in clients.items():  # every client verifies every signature
            server.receive(encode_message(c.share_keys(encode_message(rosters[u]))))
        registered = server.reused_keys()
        assert sorted(registered) == list(range(N))
        assert all(entry[2] for entry in registered.values())
    c_pk, s_pk, signature = registered[3]
    verify_keys(checks[0].roster, _params(5, session), 3, c_pk, s_pk, signature)
    with pytest.raises(UnsignedKeyError):  # in another session the epoch's signature fails
        verify_keys(checks[0].roster, _params(0, os.urandom(16)), 3, c_pk, s_pk, signature)


def test_phantom_participants_are_refused_before_anything_is_sent() -> None:
    """Finding 3: the server lists parties of its own (4 phantoms beside 5 honest nodes)."""
    checks = checks_for({u: SigningKey.generate() for u in range(5)})  # the real federation
    codec = FixedPointCodec.for_sum(1.0, 9, 32)
    params = SecAggParameters.create(bytes(16), 0, range(9), D, codec)  # 5..8 are phantoms
    for u in range(5):
        with pytest.raises(UnsignedKeyError, match=r"participants \[5, 6, 7, 8\]"):
            SecAggClient(params, u, consistency=checks[u])


def test_a_hello_nonce_of_another_length_is_never_signed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Finding 7: the server cannot make the node sign bytes of its choosing."""
    key = SigningKey.generate()
    path = tmp_path / "node.pem"
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(
        key.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    policy = PartyPolicy(signing_key=str(path))
    params = _params()
    chosen = keys_statement(params, 1, bytes(32), bytes(range(32)), False)  # the server's pick
    for nonce in (chosen, b"", os.urandom(NONCE_BYTES + 1)):
        with pytest.raises(AuthenticationError, match=f"{NONCE_BYTES} bytes"):
            signed_hello(1, policy, {"nonce": nonce})
    nonce = os.urandom(NONCE_BYTES)
    reply = signed_hello(1, policy, {"nonce": nonce})
    roster = checks_for({1: key})[1].roster
    roster.verify(1, Statement.HELLO, hello_payload(nonce, 1), reply["signature"])
    for kind in (Statement.KEYS, Statement.SURVIVORS):  # one context per kind of statement
        with pytest.raises(AuthenticationError):
            roster.verify(1, kind, hello_payload(nonce, 1), reply["signature"])
