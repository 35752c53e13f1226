"""What the server sees of one user: a masked input that is uniform whatever the input."""

from __future__ import annotations

import os

import numpy as np
from scipy import stats

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.secagg import SecAggClient, SecAggParameters, SecAggServer
from fedprivacy.secagg.messages import MaskedInput

BITS, D, ROUNDS = 16, 2000, 12


def masked_inputs_of_user_0(value: float) -> np.ndarray:
    """User 0's masked vectors, as received by the server, over fresh rounds."""
    codec = FixedPointCodec.for_sum(1.0, 3, BITS)
    seen = []
    for r in range(ROUNDS):
        params = SecAggParameters.create(os.urandom(16), r, [0, 1, 2], D, codec)
        server = SecAggServer(params)
        clients = {u: SecAggClient(params, u) for u in range(3)}
        for c in clients.values():
            server.receive(c.advertise_keys())
        rosters = server.finish_keys()
        for u, c in clients.items():
            server.receive(c.share_keys(rosters[u]))
        deliveries = server.finish_shares()
        message = clients[0].masked_input(deliveries[0], np.full(D, value))
        assert isinstance(message, MaskedInput)
        seen.append(message.vector.astype(np.int64))
    return np.concatenate(seen)


def chi_square_p(values: np.ndarray, buckets: int) -> float:
    counts = np.bincount(values, minlength=buckets)
    return float(stats.chisquare(counts).pvalue)


def test_masked_input_is_uniform_for_any_input() -> None:
    zeros = masked_inputs_of_user_0(0.0)
    extreme = masked_inputs_of_user_0(1.0)  # the largest encodable value, a constant vector
    for sample in (zeros, extreme):
        assert sample.max() < 2**BITS
        # top byte and low byte of Z_{2^16} are each uniform on 256 values
        assert chi_square_p(sample >> 8, 256) > 1e-6
        assert chi_square_p(sample & 0xFF, 256) > 1e-6
    # and the two views cannot be told apart
    assert stats.ks_2samp(zeros, extreme).pvalue > 1e-6
    # the unmasked encodings would be trivially distinguishable: the test has power
    codec = FixedPointCodec.for_sum(1.0, 3, BITS)
    plain = codec.encode(np.full(D, 1.0), np.random.default_rng(0)).astype(np.int64)
    assert chi_square_p(plain >> 8, 256) < 1e-6
