"""Distributed DP inside SecAgg, judged from what the server receives and can combine.

Every party adds discrete Gaussian noise on the grid before masking. With dropouts before every
stage of the protocol the unmasked sum must be exactly the parties' encodings plus the noise of
the parties really aggregated, that noise must have at least the variance the accountant uses,
and no sum the server can compute from everything it received, in one round or across rounds,
may hold less.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

import fedprivacy.dp.party_noise as party_noise_module
import fedprivacy.fl.secure_aggregation as secure_aggregation
from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import rounding_rng
from fedprivacy.fl.aggregators import make_aggregator
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.secagg.driver import Stage, run_round
from fedprivacy.secagg.errors import RoundAbortedError
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.server import SecAggServer

Z, CLIP, K, DIM, SEED = 1.0, 1.0, 12, 3000, 7
# one user drops before each stage of the protocol
DROPS = {0: Stage.ADVERTISE_KEYS, 1: Stage.SHARE_KEYS, 2: Stage.MASKED_INPUT, 3: Stage.UNMASK}


@pytest.fixture
def recorded_noise(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[int]]]:
    """Every noise vector a party draws, in the order drawn (parties draw in user order)."""
    drawn: list[list[int]] = []
    real = party_noise_module.draw_party_noise

    def record(variance, dimension):  # type: ignore[no-untyped-def]
        noise = real(variance, dimension)
        drawn.append(noise)
        return noise

    monkeypatch.setattr(party_noise_module, "draw_party_noise", record)
    yield drawn


def _updates(rng: np.random.Generator) -> dict[int, np.ndarray]:
    raw = rng.normal(size=(K, DIM))
    raw *= (CLIP / np.linalg.norm(raw, axis=1))[:, None]  # L2 norm exactly C
    return {u: raw[u] for u in range(K)}


def test_the_unmasked_sum_is_exact_apart_from_noise_of_at_least_the_accounted_variance(
    recorded_noise: list[list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secure_aggregation, "sample_dropouts", lambda users, rate, rng: dict(DROPS))
    agg = SecureAggregator(CLIP, K, 32, SEED, protocol_dropout=0.5, party_noise=PartyNoise(Z, CLIP))
    updates = _updates(np.random.default_rng(0))
    outcome = agg.aggregate(5, updates, dict.fromkeys(updates, 1.0), rng=np.random.default_rng(1))
    survivors = sorted(set(updates) - {0, 1, 2})  # user 3 submitted, then left before unmasking
    assert outcome.aggregated == tuple(survivors)
    assert outcome.total_weight == len(survivors)
    # users 0 and 1 never reached the masking stage; 2 dropped before it: 9 parties drew noise
    assert len(recorded_noise) == len(survivors)
    codec = agg.codec
    assert outcome.weighted_sum is not None
    grid_sum = outcome.weighted_sum * codec.scale  # exact: integers below 2^53, scale 2^e
    assert np.array_equal(grid_sum, np.round(grid_sum))
    data = sum(codec.quantize(updates[u], rounding_rng(SEED, 5, u)) for u in survivors)
    noise = np.sum(np.array(recorded_noise, dtype=np.float64), axis=0)
    assert np.array_equal(grid_sum - data, noise)  # exact apart from the parties' noise
    # the noise has at least the variance the accountant uses (chi-square, 6 sigma)
    assert outcome.noise_multiplier is not None
    threshold = SecAggParameters.create(
        b"x" * 16, 5, list(updates), DIM, codec, weighted=False
    ).threshold
    rn = PartyNoise(Z, CLIP).round_noise(codec, CLIP, threshold, DIM)
    assert outcome.noise_multiplier == rn.noise_multiplier(len(survivors)) >= Z
    accounted = (outcome.noise_multiplier * rn.sensitivity) ** 2
    sample = float(np.mean(noise**2))
    tolerance = 6 * math.sqrt(2 / DIM)
    assert sample >= accounted * (1 - tolerance)
    # and not wildly more than the parties were asked to add
    assert sample <= len(survivors) * float(rn.variance) * (1 + tolerance)
    assert outcome.wrap_log_probability is not None and outcome.wrap_log_probability < -50


def test_every_sum_the_server_can_compute_holds_the_target_noise() -> None:
    """From everything it received (masked inputs, shares), per learnable component."""
    plan = PartyNoise(Z, CLIP)
    codec = plan.codec(CLIP, K, 32)
    users = list(range(K))
    params = SecAggParameters.create(b"s" * 16, 0, users, 50, codec, weighted=False)
    rn = plan.round_noise(codec, CLIP, params.threshold, 50)
    servers: list[SecAggServer] = []
    run_round(
        params,
        {u: np.zeros(50) for u in users},
        dropouts=dict(DROPS),
        noise=rn.draw,
        observer=servers.append,
    )
    view = servers[0].view()
    assert view.components  # the round completed: the server learns the aggregate
    target = (Z * rn.sensitivity) ** 2
    for component in view.components:
        assert len(component) * float(rn.variance) >= target * (1 - 1e-12)
    # a round that aborts (too many drops before the inputs) lets the server compute nothing
    servers.clear()
    with pytest.raises(RoundAbortedError):
        run_round(
            params,
            {u: np.zeros(50) for u in users},
            dropouts=dict.fromkeys(range(7), Stage.MASKED_INPUT),
            noise=rn.draw,
            observer=servers.append,
        )
    assert servers[0].view().components == ()


def test_differencing_two_rounds_does_not_strip_the_noise() -> None:
    """The multi-round attack: rounds {0..5} and {0..4} differ by user 5 alone.

    Without DP the difference of the two unmasked sums is user 5's update up to rounding; with
    distributed DP the error of that reconstruction has at least the accounted variance of one
    round (both rounds' noises are fresh and independent).
    """
    updates = _updates(np.random.default_rng(3))
    for noisy in (False, True):
        agg = make_aggregator(
            True,
            clip=CLIP,
            per_round=6,
            bits=32,
            seed=SEED,
            party_noise=PartyNoise(Z, CLIP) if noisy else None,
        )
        sums = []
        for r, members in enumerate((range(6), range(5))):
            chosen = {u: updates[u] for u in members}
            out = agg.aggregate(r, chosen, dict.fromkeys(chosen, 1.0))
            assert out.weighted_sum is not None
            sums.append(out.weighted_sum)
        error = (sums[0] - sums[1] - updates[5]) * agg.codec.scale  # grid units
        if not noisy:
            assert np.max(np.abs(error)) <= 11  # 11 stochastic roundings, < 1 unit each
            continue
        rn = PartyNoise(Z, CLIP).round_noise(agg.codec, CLIP, 3, DIM)
        accounted = (Z * rn.sensitivity) ** 2
        assert float(np.mean(error**2)) >= accounted * (1 - 6 * math.sqrt(2 / DIM))


def test_distributed_noise_needs_equal_weights_and_the_secure_path() -> None:
    agg = SecureAggregator(CLIP, 4, 32, 0, party_noise=PartyNoise(Z, CLIP))
    updates = {u: np.zeros(3) for u in range(4)}
    with pytest.raises(ParameterError, match="weights"):
        agg.aggregate(0, updates, {0: 0.5, 1: 1.0, 2: 1.0, 3: 1.0})
    with pytest.raises(ParameterError, match="dp"):
        make_aggregator(False, clip=1.0, per_round=4, bits=32, seed=0, party_noise=PartyNoise(1, 1))


def test_a_grid_too_coarse_for_the_model_is_refused_before_any_round(capsys) -> None:  # type: ignore[no-untyped-def]
    from fedprivacy.cli.main import main

    args = ["train", "-N", "8", "-K", "4", "-R", "2", "--secagg", "--dp", "distributed"]
    assert main([*args, "--noise-multiplier", "1", "--bits", "16", "-q"]) == 2
    err = capsys.readouterr().err
    assert "--bits:" in err and "too coarse" in err and "Traceback" not in err
