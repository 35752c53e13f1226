"""Issue #50, finding 6: a server that sends different models to the parties of one round.

Pasquini et al. (CCS 2022): the server sends the victim the real model and every other party a
model crafted so that their updates vanish; secure aggregation then returns the victim's update
alone, whatever the number of parties. Run on the real client and server (complete graph, n =
10, the consistency check on): without a model digest (the old protocol) the server's aggregate
is the victim's update exactly; with each party's digest of the model it trained on bound into
its pairwise masks and into the set it signs, the victim's masks no longer cancel against the
others', the victim refuses to unmask (the signatures it is shown are on another model), and
the aggregate the server computes from everything it received is noise.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.signing import SigningKey
from fedprivacy.secagg import SecAggClient, SecAggParameters, SecAggServer
from fedprivacy.secagg.consistency import checks_for
from fedprivacy.secagg.errors import ConsistencyError

N, D, VICTIM = 10, 16, 0
REAL, CRAFTED = hashlib.sha256(b"model").digest(), hashlib.sha256(b"crafted").digest()


class Masked:
    """A round of ``n`` signed clients driven up to the consistency stage; the victim gets the
    real model, every other client the crafted one (``bind``: each masks with its digest)."""

    def __init__(self, n: int, x: np.ndarray, *, bind: bool) -> None:
        codec = FixedPointCodec.for_sum(1.0, n, 32)
        self.params = SecAggParameters.create(os.urandom(16), 0, range(n), D, codec)
        self.checks = checks_for({u: SigningKey.generate() for u in range(n)})
        self.clients = {
            u: SecAggClient(self.params, u, consistency=self.checks[u]) for u in range(n)
        }
        self.server = server = SecAggServer(self.params)
        server.model = CRAFTED if bind else b""  # what it tells the others it sent
        for c in self.clients.values():
            server.receive(c.advertise_keys())
        rosters = server.finish_keys()
        for u, c in self.clients.items():
            server.receive(c.share_keys(rosters[u]))
        deliveries = server.finish_shares()
        for u, c in self.clients.items():  # the others' crafted model zeroes their updates
            model = (REAL if u == VICTIM else CRAFTED) if bind else b""
            update = x if u == VICTIM else np.zeros(D)
            server.receive(c.masked_input(deliveries[u], update, model=model))
        server.finish_inputs()
        self.asked = server.start_consistency(self.checks[0].roster)


def _round(bind: bool) -> tuple[np.ndarray, np.ndarray, set[int]]:
    """The victim's update, the server's aggregate, and who refused to unmask."""
    x = np.random.default_rng(6).uniform(-1, 1, D)
    r = Masked(N, x, bind=bind)
    for u, request in r.asked.items():
        try:
            r.server.receive(r.clients[u].sign_survivors(request))
        except ConsistencyError:  # the victim signed its own model: the server drops it
            assert bind and u == VICTIM
    refused = set()
    for u, request in r.server.finish_consistency().items():
        try:
            r.server.receive(r.clients[u].unmask(request))
        except ConsistencyError:
            refused.add(u)
    result = r.server.finish_unmask()
    return x, np.asarray(result.total, dtype=np.float64), refused


def test_without_model_digests_the_server_reads_the_victims_update() -> None:
    x, total, refused = _round(bind=False)
    assert not refused
    assert np.max(np.abs(total - x)) < N / FixedPointCodec.for_sum(1.0, N, 32).scale


def test_bound_to_the_model_the_aggregate_reveals_nothing_of_the_victim() -> None:
    x, total, refused = _round(bind=True)
    # the victim was not asked to unmask (its signature is on another model), the others were
    assert not refused
    assert np.median(np.abs(total - x)) > 1.0  # the uncancelled masks: noise over the range


def test_the_victim_refuses_an_unmask_request_signed_on_another_model() -> None:
    r = Masked(4, np.zeros(D), bind=True)
    signatures = {u: r.clients[u].sign_survivors(r.asked[u]) for u in range(4)}
    for u in range(1, 4):
        r.server.receive(signatures[u])
    forwarded = r.server.finish_consistency()[1]  # the others' signatures, shown to the victim
    with pytest.raises(ConsistencyError, match="signature of user 1 is invalid"):
        r.clients[VICTIM].unmask(replace(forwarded, header=replace(forwarded.header, recipient=0)))
