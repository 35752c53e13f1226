"""Issue #15: a server choosing S = {w} + the non-neighbours of w learned x_w. Now it cannot.

Twenty users on the SecAgg+ graph of degree 10. In ``S = {w} + non-neighbours(w)`` (10 users,
at least t = 6) user w has no neighbour, so once the server holds b_w and the mask keys of w's
neighbours (all outside S, so their holders reveal them) it strips every mask off y_w.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.keys import agree, keypair_from_private_bytes
from fedprivacy.crypto.prg import MaskExpander, reduce
from fedprivacy.crypto.shamir import Share, combine_shares
from fedprivacy.secagg import (
    DisconnectedSetError,
    ProtocolViolationError,
    SecAggClient,
    SecAggParameters,
    SecAggServer,
)
from fedprivacy.secagg.derivation import pairwise_mask_key, self_mask_key
from fedprivacy.secagg.messages import (
    SERVER,
    AdvertiseKeys,
    Header,
    MaskedInput,
    MessageKind,
    ShareKind,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
    encode_message,
)
from fedprivacy.secagg.server import ServerStage
from fedprivacy.secagg.snapshot import ClientStage

N, DEGREE, D = 20, 10, 8


class Round:
    """A round driven by hand up to the masked inputs; keeps the bytes the server received."""

    def __init__(self) -> None:
        codec = FixedPointCodec.for_sum(1.0, N, 32)
        self.params = SecAggParameters.create(
            os.urandom(16), 0, range(N), D, codec, degree=DEGREE, graph_seed=b"issue-15"
        )
        self.server = SecAggServer(self.params)
        self.clients = {u: SecAggClient(self.params, u) for u in range(N)}
        rng = np.random.default_rng(15)
        self.updates = {u: rng.uniform(-1, 1, D) for u in range(N)}
        self.received: dict[int, list[bytes]] = {u: [] for u in range(N)}
        self.deliver(lambda u, c: c.advertise_keys())
        rosters = self.server.finish_keys()
        self.deliver(lambda u, c: c.share_keys(rosters[u]))
        deliveries = self.server.finish_shares()
        self.deliver(lambda u, c: c.masked_input(deliveries[u], self.updates[u]))
        w = 0
        self.victim = w
        self.chosen = frozenset({w} | (set(range(N)) - self.params.neighbours[w] - {w}))

    def deliver(self, step) -> None:  # type: ignore[no-untyped-def]
        for u, c in self.clients.items():
            data = encode_message(step(u, c))
            self.received[u].append(data)
            self.server.receive(data)

    def malicious_requests(self) -> dict[int, bytes]:
        """What a server skipping its own check would send: the same S to everyone."""
        p = self.params
        return {
            u: encode_message(
                UnmaskRequest(
                    Header(MessageKind.UNMASK_REQUEST, p.session_id, p.round_index, SERVER, u),
                    tuple(sorted(self.chosen)),
                )
            )
            for u in range(N)
        }


def recover_victim_input(
    params: SecAggParameters, received: dict[int, list[bytes]], victim: int
) -> np.ndarray | None:
    """The attacker: x_w from the bytes the server received, or None if the shares are missing.

    Reconstructs b_w and the mask key of every neighbour of w from the unmask responses, then
    removes the self mask and every pairwise mask from y_w.
    """
    keys = {u: decode_message(msgs[0]) for u, msgs in received.items()}
    masked = decode_message(received[victim][2])
    assert isinstance(masked, MaskedInput)
    pieces: dict[tuple[int, ShareKind], list[Share]] = {}
    for msgs in received.values():
        for data in msgs[3:]:
            response = decode_message(data)
            assert isinstance(response, UnmaskResponse)
            for owner, kind, raw in response.shares:
                pieces.setdefault((owner, kind), []).append(Share.from_bytes(raw))
    t = params.threshold

    def secret(owner: int, kind: ShareKind) -> bytes | None:
        shares = pieces.get((owner, kind), [])
        return combine_shares(shares[:t], t) if len(shares) >= t else None

    seed = secret(victim, ShareKind.SELF_MASK_SEED)
    if seed is None:
        return None
    expander = MaskExpander(params.vector_length, params.codec.bits)
    acc = masked.vector.astype(expander.dtype, copy=True)
    expander.subtract_from(acc, self_mask_key(seed, params, victim))
    victim_keys = keys[victim]
    assert isinstance(victim_keys, AdvertiseKeys)
    for v in sorted(params.neighbours[victim]):
        raw = secret(v, ShareKind.MASK_KEY)
        if raw is None:
            return None
        agreement = agree(keypair_from_private_bytes(raw).private, victim_keys.masking_key)
        key = pairwise_mask_key(agreement, params, victim, v)
        if victim < v:
            expander.subtract_from(acc, key)
        else:
            expander.add_into(acc, key)
    reduce(acc, params.codec.bits)
    return np.asarray(params.codec.decode_sum(acc, 1), dtype=np.float64)


def test_the_attack_set_is_disconnected_and_large_enough() -> None:
    r = Round()
    assert r.params.threshold == 6 and len(r.chosen) == 10 >= r.params.threshold
    assert sorted(len(c) for c in r.params.components(r.chosen)) == [1, 9]


def test_on_the_old_behaviour_the_attacker_recovers_x_w(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the connectivity checks (both removed) the same bytes give x_w away."""
    monkeypatch.setattr(SecAggParameters, "components", lambda self, users: [frozenset(users)])
    r = Round()
    requests = r.server.finish_inputs(lambda submitted: r.chosen)
    r.deliver(lambda u, c: c.unmask(requests[u]))
    result = r.server.finish_unmask()
    assert set(result.aggregated) == r.chosen
    x_w = recover_victim_input(r.params, r.received, r.victim)
    assert x_w is not None
    # exact up to the stochastic rounding of the encoding (1 / scale, about 2e-8 here)
    assert np.max(np.abs(x_w - r.updates[r.victim])) < 1 / r.params.codec.scale
    # the server's view, computed from what it received, exposes the leak
    assert frozenset({r.victim}) in r.server.view().components


def test_honest_server_refuses_to_finish() -> None:
    r = Round()
    with pytest.raises(DisconnectedSetError, match="2 components of sizes 9, 1"):
        r.server.finish_inputs(lambda submitted: r.chosen)
    assert r.server.stage is ServerStage.ABORTED
    assert r.server.view().components == ()
    assert recover_victim_input(r.params, r.received, r.victim) is None


def test_every_client_refuses_a_server_that_skips_its_check() -> None:
    r = Round()
    for u, data in r.malicious_requests().items():
        with pytest.raises(ProtocolViolationError, match="2 components of sizes 9, 1"):
            r.clients[u].unmask(data)
        assert r.clients[u].stage is ClientStage.MASKED  # nothing revealed, nothing changed
    # no share of b_w (nor any other) ever left a client
    assert all(len(msgs) == 3 for msgs in r.received.values())
    assert recover_victim_input(r.params, r.received, r.victim) is None
    assert r.server.received_state().seeds == frozenset()
