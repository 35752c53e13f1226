"""The masks of a round: what one masked input shows, and the sum the server recovers.

Against the honest-but-curious server: a single masked input is the encoding plus a
pseudo-random self mask and pairwise masks, so it is not the encoding; the masks cancel only
in the sum, and a user left out is removed with the pairwise keys its neighbours reveal.
"""

from __future__ import annotations

import numpy as np

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.secagg.masking import mask, unmask_sum
from fedprivacy.secagg.params import SecAggParameters

USERS = range(4)
KEYS = {(u, v): bytes([16 * u + v]) * 32 for u in USERS for v in USERS if u < v}
SEEDS = {u: bytes([200 + u]) * 32 for u in USERS}


def _round() -> tuple[SecAggParameters, dict[int, np.ndarray], dict[int, np.ndarray]]:
    params = SecAggParameters.create(bytes(16), 0, USERS, 3, FixedPointCodec.for_sum(1, 4, 32))
    rng = np.random.default_rng(0)
    values = {u: rng.uniform(-0.5, 0.5, params.dimension) for u in USERS}
    encoded = {u: params.codec.encode(values[u], np.random.default_rng(u)) for u in USERS}
    masked = {
        u: mask(
            params,
            encoded[u],
            SEEDS[u],
            u,
            {v: KEYS[min(u, v), max(u, v)] for v in USERS if v != u},
        )
        for u in USERS
    }
    return params, values, masked


def test_one_masked_input_is_not_its_encoding_but_the_masks_cancel_in_the_sum() -> None:
    params, values, masked = _round()
    encoded = params.codec.encode(values[0], np.random.default_rng(0))
    assert np.mean(masked[0] == encoded.astype(masked[0].dtype)) < 0.01
    total = params.codec.decode_sum(unmask_sum(params, masked, SEEDS, {}, {}), len(USERS))
    np.testing.assert_allclose(total, sum(values.values()), atol=1e-6)


def test_a_user_left_out_is_removed_with_its_neighbours_pair_keys() -> None:
    params, values, masked = _round()
    kept = {u: masked[u] for u in (0, 1, 2)}
    left_out = {(u, 3): KEYS[u, 3] for u in kept}
    total = params.codec.decode_sum(unmask_sum(params, kept, SEEDS, left_out, {}), len(kept))
    np.testing.assert_allclose(total, values[0] + values[1] + values[2], atol=1e-6)
    # without those keys the sum is masked noise, not the three users' sum
    wrong = params.codec.decode_sum(unmask_sum(params, kept, SEEDS, {}, {}), len(kept))
    assert not np.allclose(wrong, values[0] + values[1] + values[2], atol=1e-2)
