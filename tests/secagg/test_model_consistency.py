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


def _round(bind: bool) -> tuple[np.ndarray, np.ndarray, set[int]]:
    """The victim's update, the server's aggregate, and who refused to unmask."""
    params = SecAggParameters.create(
        os.urandom(16), 0, range(N), D, FixedPointCodec.for_sum(1.0, N, 32)
    )
    checks = checks_for({u: SigningKey.generate() for u in range(N)})
    clients = {u: SecAggClient(params, u, consistency=checks[u]) for u in range(N)}
    server = SecAggServer(params)
    server.model = CRAFTED if bind else b""  # what it tells the others it sent
    x = np.random.default_rng(6).uniform(-1, 1, D)
    for c in clients.values():
        server.receive(c.advertise_keys())
    rosters = server.finish_keys()
    for u, c in clients.items():
        server.receive(c.share_keys(rosters[u]))
    deliveries = server.finish_shares()
    for u, c in clients.items():  # the others' crafted model zeroes their updates
        model = (REAL if u == VICTIM else CRAFTED) if bind else b""
        update = x if u == VICTIM else np.zeros(D)
        server.receive(c.masked_input(deliveries[u], update, model=model))
    server.finish_inputs()
    for u, request in server.start_consistency(checks[0].roster).items():
        try:
            server.receive(clients[u].sign_survivors(request))
        except ConsistencyError:  # the victim signed its own model: the server drops it
            assert bind and u == VICTIM
    refused = set()
    for u, request in server.finish_consistency().items():
        try:
            server.receive(clients[u].unmask(request))
        except ConsistencyError:
            refused.add(u)
    result = server.finish_unmask()
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
    params = SecAggParameters.create(
        os.urandom(16), 0, range(4), D, FixedPointCodec.for_sum(1.0, 4, 32)
    )
    checks = checks_for({u: SigningKey.generate() for u in range(4)})
    clients = {u: SecAggClient(params, u, consistency=checks[u]) for u in range(4)}
    server = SecAggServer(params)
    server.model = CRAFTED
    for c in clients.values():
        server.receive(c.advertise_keys())
    rosters = server.finish_keys()
    for u, c in clients.items():
        server.receive(c.share_keys(rosters[u]))
    deliveries = server.finish_shares()
    for u, c in clients.items():
        model = REAL if u == VICTIM else CRAFTED
        server.receive(c.masked_input(deliveries[u], np.zeros(D), model=model))
    server.finish_inputs()
    requests = server.start_consistency(checks[0].roster)
    signatures = {u: clients[u].sign_survivors(requests[u]) for u in range(4)}
    for u in range(1, 4):
        server.receive(signatures[u])
    unmask = server.finish_consistency()
    forwarded = unmask[1]  # the others' signatures, shown to the victim
    with pytest.raises(ConsistencyError, match="signature of user 1 is invalid"):
        clients[VICTIM].unmask(replace(forwarded, header=replace(forwarded.header, recipient=0)))
