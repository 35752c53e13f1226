"""The exact noise mode (add then remove), judged from what the server receives.

Every party adds ``c = ceil(n / t)`` removable components; the survivors remove what the sum
does not need. Under 0-30 % dropouts the released noise must be exactly the ``n`` kept
components (so its variance is the target: a chi-square test, which the over-provisioned mode
fails at 30 %), the excess vectors must give the server nothing better than the released sum,
and a party must refuse the mode without the consistency check (a server showing different
survivor sets could otherwise make the parties keep too little).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest
from scipy import stats

import fedprivacy.dp.party_noise as party_noise_module
from fedprivacy.crypto.signing import SigningKey
from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.errors import ParameterError
from fedprivacy.fl.secure_aggregation import SecureAggregator, SecureRoundPlan
from fedprivacy.secagg import SecAggClient, SecAggError
from fedprivacy.secagg.consistency import checks_for
from fedprivacy.secagg.driver import RoundOutcome, Stage, run_round
from fedprivacy.secagg.errors import MalformedMessageError
from fedprivacy.secagg.messages import (
    SERVER,
    Header,
    MessageKind,
    UnmaskRequest,
    decode_message,
    encode_message,
)
from fedprivacy.secagg.server import SecAggServer
from fedprivacy.secagg.snapshot import ClientStage
from fedprivacy.secagg.state import dump_client, load_client

Z, CLIP, N, DIM, SEED = 1.0, 1.0, 20, 4000, 3
STAGES = (Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS, Stage.MASKED_INPUT)


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[np.ndarray]]:
    """Every noise vector drawn, in order (the driver's clients draw in user order)."""
    vectors: list[np.ndarray] = []
    real = party_noise_module.draw_party_noise

    def record(variance, dimension):  # type: ignore[no-untyped-def]
        noise = real(variance, dimension)
        vectors.append(np.asarray(noise, dtype=np.float64))
        return noise

    monkeypatch.setattr(party_noise_module, "draw_party_noise", record)
    yield vectors


def _plan(mode: str) -> tuple[SecureAggregator, SecureRoundPlan]:
    agg = SecureAggregator(CLIP, N, 32, SEED, party_noise=PartyNoise(Z, CLIP, mode))
    return agg, agg.plan_round(0, range(N), DIM)


def _round(plan: SecureRoundPlan, dropouts: dict[int, Stage]) -> tuple[RoundOutcome, SecAggServer]:
    servers: list[SecAggServer] = []
    assert plan.noise is not None
    outcome = run_round(
        plan.params,
        {u: np.zeros(DIM) for u in range(N)},
        dropouts=dropouts,
        noise=plan.noise.draw,
        signing_keys={u: SigningKey.generate() for u in range(N)},
        observer=servers.append,
    )
    return outcome, servers[0]


def _dropouts(count: int) -> dict[int, Stage]:
    """``count`` users who leave before contributing, spread over the first three stages."""
    return {u: STAGES[u % 3] for u in range(count)}


def _grid(outcome: RoundOutcome, agg: SecureAggregator) -> np.ndarray:
    """The released sum in grid units (all updates are zero: it is the noise)."""
    return np.round(outcome.result.total * agg.codec.scale)


def _chi2_pvalue(grid: np.ndarray, variance: float) -> float:
    """Two-sided p-value of ``sum x^2 / variance ~ chi2(d)``."""
    cdf = stats.chi2.cdf(float(np.sum(grid**2)) / variance, grid.size)
    return float(min(cdf, 1 - cdf) * 2)


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.2, 0.3])
def test_the_released_noise_is_exactly_the_target_whoever_dropped(
    fraction: float, drawn: list[np.ndarray]
) -> None:
    agg, plan = _plan("exact")
    assert plan.noise is not None
    draw = plan.noise.draw
    assert (draw.components, draw.kept_total) == (2, N)  # ceil(20 / 11) components each
    dropouts = _dropouts(round(fraction * N))
    outcome, _ = _round(plan, dropouts)
    survivors = outcome.result.aggregated
    assert survivors == tuple(u for u in range(N) if u not in dropouts)
    assert outcome.result.excess_removed == survivors
    # exactly the components the survivors kept, k_i of each, n in all
    grid = _grid(outcome, agg)
    parties = [drawn[i : i + draw.components] for i in range(0, len(drawn), draw.components)]
    assert len(parties) == len(survivors)  # those who left before the masked input drew none
    kept = [draw.kept(survivors, u) for u in survivors]
    assert sum(kept) == N
    expected = sum(sum(p[:k]) for p, k in zip(parties, kept, strict=True))
    assert np.array_equal(grid, expected)
    # so its variance is the target: chi-square at the accounted variance n v
    target = N * float(draw.variance)
    assert _chi2_pvalue(grid, target) > 1e-6
    assert draw.variance * N >= (Z * plan.noise.sensitivity) ** 2  # the target, rounded up
    finished = agg.finish_round(plan, outcome.result, 0)
    assert finished.noise_multiplier == plan.noise.noise_multiplier(N)


def test_the_over_provisioned_mode_fails_the_same_test_at_30_percent_dropouts() -> None:
    """What the chi-square test above can detect: s / t times the target (14 / 11 here)."""
    agg, plan = _plan("over-provisioned")
    assert plan.noise is not None
    outcome, _ = _round(plan, _dropouts(6))
    grid = _grid(outcome, agg)
    target = N * float(plan.noise.variance) * plan.params.threshold / N  # (z Delta)^2, rounded
    assert _chi2_pvalue(grid, target) < 1e-6
    accounted = len(outcome.result.aggregated) * float(plan.noise.variance)
    assert _chi2_pvalue(grid, accounted) > 1e-6  # the accountant's figure is the real one


def test_a_survivor_that_leaves_before_unmasking_leaves_its_excess_in_and_is_accounted() -> None:
    agg, plan = _plan("exact")
    assert plan.noise is not None
    draw = plan.noise.draw
    dropouts = {**_dropouts(4), 19: Stage.UNMASK}  # 19 submitted, then left
    outcome, _ = _round(plan, dropouts)
    result = outcome.result
    assert 19 in result.aggregated and 19 not in result.excess_removed
    draws = draw.in_sum(result.aggregated, result.excess_removed)
    assert draws == N + draw.components - draw.kept(result.aggregated, 19) > N
    assert _chi2_pvalue(_grid(outcome, agg), draws * float(draw.variance)) > 1e-6
    finished = agg.finish_round(plan, result, 0)
    assert finished.noise_multiplier == plan.noise.noise_multiplier(draws)


def test_everything_the_server_received_gives_no_better_estimate_than_the_released_sum() -> None:
    """The server holds the unmasked sum before removal and every excess vector.

    Its best linear estimate of the data from all of them (least squares over the coordinates)
    still carries the target variance: the excess is independent of the kept components.
    """
    agg, plan = _plan("exact")
    assert plan.noise is not None
    outcome, server = _round(plan, _dropouts(6))
    excess = np.stack([_signed(v, agg) for v in server.excess.values()])
    assert len(excess) == len(outcome.result.aggregated)
    released = _grid(outcome, agg)
    before_removal = released + excess.sum(axis=0)
    beta, *_ = np.linalg.lstsq(excess.T, before_removal, rcond=None)
    residual = before_removal - excess.T @ beta
    target = (Z * plan.noise.sensitivity) ** 2
    assert float(np.mean(residual**2)) >= target * (1 - 6 * np.sqrt(2 / DIM))
    # the excess is uncorrelated with the released noise
    assert abs(float(np.corrcoef(excess.sum(axis=0), released)[0, 1])) < 6 / np.sqrt(DIM)


def _signed(vector: np.ndarray, agg: SecureAggregator) -> np.ndarray:
    """A field vector as signed grid integers."""
    half = 1 << (agg.codec.bits - 1)
    v = vector.astype(np.int64)
    return np.where(v >= half, v - (1 << agg.codec.bits), v).astype(np.float64)


def test_a_party_refuses_the_exact_mode_without_the_consistency_check() -> None:
    """Against a server that could show different survivor sets to different parties."""
    _, plan = _plan("exact")
    assert plan.noise is not None
    with pytest.raises(ParameterError, match="consistency check"):
        run_round(plan.params, {u: np.zeros(DIM) for u in range(N)}, noise=plan.noise.draw)


class Stepped:
    """A real round of 8 parties in the exact mode, stepped by hand up to the aggregated set:
    users 0 and 1 leave before their masked input."""

    def __init__(self) -> None:
        agg = SecureAggregator(CLIP, 8, 32, SEED, party_noise=PartyNoise(Z, CLIP, "exact"))
        self.plan = agg.plan_round(0, range(8), 50)
        assert self.plan.noise is not None
        self.checks = checks_for({u: SigningKey.generate() for u in range(8)})
        params = self.plan.params
        self.clients = {u: SecAggClient(params, u, consistency=self.checks[u]) for u in range(8)}
        self.server = SecAggServer(params)
        for c in self.clients.values():
            self.server.receive(c.advertise_keys())
        rosters = self.server.finish_keys()
        for u, c in self.clients.items():
            self.server.receive(c.share_keys(rosters[u]))
        deliveries = self.server.finish_shares()
        for u in range(2, 8):
            client = self.clients[u]
            noise = self.plan.noise.draw
            self.server.receive(client.masked_input(deliveries[u], np.zeros(50), noise=noise))
        self.server.finish_inputs()
        asked = self.server.start_consistency(self.checks[2].roster)
        self.signatures = {u: self.clients[u].sign_survivors(asked[u]) for u in asked}
        for response in self.signatures.values():
            self.server.receive(response)
        self.requests = self.server.finish_consistency()

    def request(self, user: int, aggregated: tuple[int, ...]) -> bytes:
        header = Header(MessageKind.UNMASK_REQUEST, self.plan.params.session_id, 0, SERVER, user)
        signed = tuple((u, s.signature) for u, s in sorted(self.signatures.items()))
        return encode_message(UnmaskRequest(header, aggregated, signed))


def test_a_server_that_lies_about_the_survivors_gets_no_excess() -> None:
    """The server tells user 2 that all 8 survived (2 would keep one component instead of two).
    User 2 signed the real set: it refuses and reveals nothing."""
    r = Stepped()
    assert sorted(r.signatures) == [2, 3, 4, 5, 6, 7]
    with pytest.raises(SecAggError):
        r.clients[2].unmask(r.request(2, tuple(range(8))))
    assert r.clients[2].stage is ClientStage.MASKED  # nothing revealed, no excess sent


def test_the_excess_survives_the_state_and_the_wire_and_a_bad_one_is_a_typed_error() -> None:
    r = Stepped()
    # a node's state between stages carries the components: the restored client removes the same
    state = dump_client(r.clients[3])
    restored = load_client(r.plan.params, state, user=3, consistency=r.checks[3])
    with pytest.raises(MalformedMessageError):
        load_client(r.plan.params, state[:-1], user=3, consistency=r.checks[3])
    reply = r.clients[3].unmask(r.requests[3])
    again = restored.unmask(r.requests[3])
    assert again.excess is not None and reply.excess is not None
    assert np.array_equal(again.excess, reply.excess)
    assert reply.excess is not None and reply.excess.shape == (r.plan.params.vector_length,)
    data = encode_message(reply)
    assert decode_message(data) == reply
    with pytest.raises(MalformedMessageError):
        decode_message(data[:-1])
    short = dataclasses.replace(reply, excess=reply.excess[:-1])
    with pytest.raises(MalformedMessageError, match="excess of 3"):
        r.server.receive(encode_message(short))
    stranger = dataclasses.replace(reply, header=dataclasses.replace(reply.header, sender=1))
    with pytest.raises(SecAggError):  # 1 left before its input: not asked, no excess
        r.server.receive(encode_message(stranger))
    r.server.receive(data)
    assert list(r.server.excess) == [3]
