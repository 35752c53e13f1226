"""Issue #28, finding 4: selective delivery of the unmask request. Now the clients refuse it.

Complete graph, n = 10, victim 0. The server shows A = {0, 1, 2, 3, 4} the set S1 = A and
B = {5, ..., 9} the set S2 = {0, 5, ..., 9}. Every holder reveals one share per owner: the
members of A reveal b of S1 and the mask keys of 5..9, the members of B reveal b of S2 and the
mask keys of 1..4. With t = 5 the server then holds b_0 (from 1..9) and the mask key of every
other user (5 shares each): it strips every mask off y_0.

With the consistency check each client signs the one set it is shown and unmasks only a set
signed by a strict majority (6 of 10) of its members: A and B can each produce only 5
signatures, so every client refuses, whatever the server sends, and nothing is revealed. With
the default threshold (t = 6) the sets must have 6 members: S1 = {0, ..., 5} for A.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.keys import agree, keypair_from_private_bytes
from fedprivacy.crypto.prg import MaskExpander, reduce
from fedprivacy.crypto.shamir import Share, combine_shares
from fedprivacy.crypto.signing import SigningKey, Statement
from fedprivacy.errors import AuthenticationError
from fedprivacy.secagg import SecAggClient, SecAggError, SecAggParameters, SecAggServer
from fedprivacy.secagg.consistency import checks_for, consistency_quorum
from fedprivacy.secagg.derivation import pairwise_mask_key, self_mask_key, survivors_statement
from fedprivacy.secagg.errors import ConsistencyError
from fedprivacy.secagg.messages import (
    SERVER,
    AdvertiseKeys,
    ConsistencyRequest,
    Header,
    MaskedInput,
    MessageKind,
    ShareKind,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
    encode_message,
)
from fedprivacy.secagg.party import pairwise_sign
from fedprivacy.secagg.server_view import ReceivedState, server_view
from fedprivacy.secagg.snapshot import ClientStage
from fedprivacy.secagg.state import dump_client

N, D, VICTIM = 10, 8, 0
A = frozenset(range(5))
B = frozenset(range(5, 10))
S1 = A
S2 = frozenset({0} | B)
Signatures = tuple[tuple[int, bytes], ...]


class Round:
    """A real round up to the masked inputs; keeps every byte the server received."""

    def __init__(self, threshold: int | None, *, check: bool) -> None:
        codec = FixedPointCodec.for_sum(1.0, N, 32)
        self.params = SecAggParameters.create(
            os.urandom(16), 0, range(N), D, codec, threshold=threshold
        )
        self.checks = checks_for({u: SigningKey.generate() for u in range(N)}) if check else {}
        self.clients = {
            u: SecAggClient(self.params, u, consistency=self.checks.get(u)) for u in range(N)
        }
        self.server = SecAggServer(self.params)
        rng = np.random.default_rng(28)
        self.updates = {u: rng.uniform(-1, 1, D) for u in range(N)}
        self.received: dict[int, list[bytes]] = {u: [] for u in range(N)}
        self.deliver(lambda u, c: c.advertise_keys())
        rosters = self.server.finish_keys()
        self.deliver(lambda u, c: c.share_keys(rosters[u]))
        deliveries = self.server.finish_shares()
        self.deliver(lambda u, c: c.masked_input(deliveries[u], self.updates[u]))
        self.server.finish_inputs()  # the honest S (everyone); the attacker sends its own

    def deliver(self, step) -> None:  # type: ignore[no-untyped-def]
        for u, c in self.clients.items():
            data = encode_message(step(u, c))
            self.received[u].append(data)
            self.server.receive(data)

    def header(self, kind: MessageKind, u: int) -> Header:
        return Header(kind, self.params.session_id, self.params.round_index, SERVER, u)

    def ask_to_sign(self, u: int, chosen: frozenset[int]) -> bytes:
        request = ConsistencyRequest(
            self.header(MessageKind.CONSISTENCY_REQUEST, u), tuple(sorted(chosen))
        )
        reply = self.clients[u].sign_survivors(encode_message(request))
        return reply.signature

    def ask_to_unmask(self, u: int, chosen: frozenset[int], signatures: Signatures = ()) -> bool:
        """Send an unmask request; keep the response if the client answers."""
        request = UnmaskRequest(
            self.header(MessageKind.UNMASK_REQUEST, u), tuple(sorted(chosen)), signatures
        )
        try:
            response = self.clients[u].unmask(encode_message(request))
        except SecAggError:
            return False
        self.received[u].append(encode_message(response))
        return True

    def revealed(self) -> list[tuple[int, ShareKind, bytes]]:
        out = []
        for msgs in self.received.values():
            for data in msgs[3:]:
                response = decode_message(data)
                assert isinstance(response, UnmaskResponse)
                out += list(response.shares)
        return out

    def learnable(self) -> tuple[frozenset[int], ...]:
        """Every sum of inputs the server can compute from everything it received."""
        everyone = frozenset(range(N))
        revealed = [(owner, kind) for owner, kind, _ in self.revealed()]
        state = ReceivedState.from_revealed(
            everyone, everyone, self.params.neighbours, revealed, self.params.threshold
        )
        return server_view(state).components

    def recover_victim_input(self) -> np.ndarray | None:
        """The attacker: x_0 from the bytes received, or None if some secret is missing."""
        p, t = self.params, self.params.threshold
        pieces: dict[tuple[int, ShareKind], list[Share]] = {}
        for owner, kind, raw in self.revealed():
            pieces.setdefault((owner, kind), []).append(Share.from_bytes(raw))

        def secret(owner: int, kind: ShareKind) -> bytes | None:
            shares = pieces.get((owner, kind), [])
            return combine_shares(shares[:t], t) if len(shares) >= t else None

        seed = secret(VICTIM, ShareKind.SELF_MASK_SEED)
        keys = decode_message(self.received[VICTIM][0])
        masked = decode_message(self.received[VICTIM][2])
        assert isinstance(keys, AdvertiseKeys) and isinstance(masked, MaskedInput)
        if seed is None:
            return None
        expander = MaskExpander(p.vector_length, p.codec.bits)
        acc = masked.vector.astype(expander.dtype, copy=True)
        expander.subtract_from(acc, self_mask_key(seed, p, VICTIM))
        for v in sorted(p.neighbours[VICTIM]):
            key_bytes = secret(v, ShareKind.MASK_KEY)
            if key_bytes is None:
                return None
            agreement = agree(keypair_from_private_bytes(key_bytes).private, keys.masking_key)
            key = pairwise_mask_key(agreement, p, VICTIM, v)
            expander.combine(acc, key, -pairwise_sign(VICTIM, v))
        reduce(acc, p.codec.bits)
        return np.asarray(p.codec.decode_sum(acc, 1), dtype=np.float64)


def attack_sets(threshold: int) -> tuple[frozenset[int], frozenset[int]]:
    """The two sets of the attack: each has at least ``threshold`` members."""
    return (S1 if threshold == 5 else S1 | {5}), S2


def shown(u: int, threshold: int = 5) -> frozenset[int]:
    """The set the attacker shows ``u``."""
    first, second = attack_sets(threshold)
    return first if u in A else second


def test_without_the_check_selective_delivery_recovers_x_0_exactly() -> None:
    """The old behaviour (t = 5, the old default): documents the attack; keeps passing."""
    r = Round(threshold=5, check=False)
    assert all(r.ask_to_unmask(u, shown(u)) for u in range(N))  # no client refuses
    x_0 = r.recover_victim_input()
    assert x_0 is not None
    # exact up to the stochastic rounding of the encoding (1 / scale, about 2e-8 here)
    assert np.max(np.abs(x_0 - r.updates[VICTIM])) < 1 / r.params.codec.scale
    assert frozenset({VICTIM}) in r.learnable()
    # with the server's own single-set check skipped, the holders' answers are what leaks
    assert {(o, k) for o, k, _ in r.revealed()} >= {(v, ShareKind.MASK_KEY) for v in range(1, N)}


@pytest.mark.parametrize("threshold", [5, None], ids=["t=5", "default-t=6"])
def test_with_the_check_every_client_refuses_and_nothing_leaks(threshold: int | None) -> None:
    r = Round(threshold=threshold, check=True)
    t = r.params.threshold
    assert consistency_quorum(r.params) == 6 and t == (threshold or 6)
    first, second = attack_sets(t)
    signatures = {u: r.ask_to_sign(u, shown(u, t)) for u in range(N)}  # each signs what it sees
    by_set = {
        chosen: tuple((u, signatures[u]) for u in sorted(chosen) if shown(u, t) == chosen)
        for chosen in (first, second)
    }
    # A quorum of t = 5 would not stop it: both sets carry 5 valid signatures of members.
    roster = r.checks[0].roster
    for chosen, sigs in by_set.items():
        assert len(sigs) == 5
        for u, sig in sigs:
            roster.verify(u, Statement.SURVIVORS, survivors_statement(r.params, chosen), sig)
    # The other set cannot be signed any more, not even by re-asking.
    for u in range(N):
        with pytest.raises(ConsistencyError, match="already signed"):
            r.ask_to_sign(u, second if u in A else first)
    everything = by_set[first] + by_set[second]
    before = {u: dump_client(c) for u, c in r.clients.items()}
    for u, chosen, sigs in itertools.product(
        range(N), (first, second), (by_set[first], by_set[second], everything, ())
    ):
        assert not r.ask_to_unmask(u, chosen, sigs), (u, sorted(chosen))
    for u, c in r.clients.items():
        assert c.stage is ClientStage.MASKED and dump_client(c) == before[u]  # state unchanged
    assert r.revealed() == []
    assert r.recover_victim_input() is None
    assert r.learnable() == ()


def test_with_the_check_the_majority_set_is_the_only_one_unmasked() -> None:
    """Six clients shown S = {0..5}, four shown {0, 6..9}: only the six may unmask, S only."""
    r = Round(threshold=None, check=True)
    big, small = frozenset(range(6)), frozenset({0, 5, 6, 7, 8, 9})
    groups = {u: big if u < 6 else small for u in range(N)}
    signatures = {u: r.ask_to_sign(u, groups[u]) for u in range(N)}
    of_big = tuple((u, signatures[u]) for u in sorted(big))
    of_small = tuple((u, signatures[u]) for u in range(6, N))
    for u in range(6, N):
        for chosen, sigs in ((small, of_small), (big, of_big), (small, of_big + of_small)):
            assert not r.ask_to_unmask(u, chosen, sigs)
    assert all(r.ask_to_unmask(u, big, of_big) for u in range(6))
    # what the six revealed: mask keys of 6..9 and b of 0..5, each b from only 5 holders
    assert all(part == big for part in r.learnable())
    assert r.recover_victim_input() is None


def test_a_signature_from_another_set_does_not_verify() -> None:
    r = Round(threshold=5, check=True)
    sig = r.ask_to_sign(3, S1)
    roster = r.checks[3].roster
    roster.verify(3, Statement.SURVIVORS, survivors_statement(r.params, S1), sig)
    with pytest.raises(AuthenticationError):
        roster.verify(3, Statement.SURVIVORS, survivors_statement(r.params, S2), sig)
