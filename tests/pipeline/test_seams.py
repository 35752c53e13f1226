"""One mechanism class, registered once, runs in FedAvg, ULDP-FL and the deployed FedAvg round.

The toy mechanism scales every update to L2 norm exactly ``clip`` (normalisation instead of
clipping) and, where the parties add noise themselves, has each of them add
``PARTY_STD`` in all (its noise hook,
:attr:`~fedprivacy.fl.mechanism.Mechanism.party_noise`: discrete Gaussians on the grid where
secure aggregation carries the updates, ``PARTY_STD / sqrt(parties)`` each where the parties add
theirs in the clear). It is one subclass of
:class:`~fedprivacy.fl.mechanism.Mechanism` and one registration in
:data:`~fedprivacy.fl.mechanism.MECHANISMS`; nothing else in the package knows it. Each test
checks that the algorithm really applied it (the updates it aggregated have norm ``clip``, the
noise has the hook's size), not only that the run finished: FedAvg in process and deployed,
ULDP-AVG, ULDP-NAIVE, ULDP-GROUP-k, the cross-silo deployment and the drop-in ``PrivateFedAvg``
(``test_seams_deployed.py``: on real Flower processes, as an operator's plugin).

So does one aggregator class (the last tests): in-process FedAvg, the server of a deployed
plaintext FedAvg round and ULDP-FL's sum over silos aggregate with it.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
from numpy.typing import NDArray
from torch.utils.data import TensorDataset

from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.fl.aggregation import AggregateOutcome, FloatAggregator
from fedprivacy.fl.aggregators import AGGREGATORS
from fedprivacy.fl.mechanism import MECHANISMS, Mechanism
from fedprivacy.fl.minibatches import epoch_orders
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.fl.training_config import TrainConfig, build_training
from fedprivacy.flower.dropin.in_process import run_private_fedavg
from fedprivacy.flower.dropin.private_config import PrivateFedAvgConfig
from fedprivacy.flower.fedavg.reference import simulate
from fedprivacy.flower.fedavg.training import DeployedTraining, LiveNodes
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.nodes.node import Node, training_for
from fedprivacy.flower.nodes.node_policy import training_policy
from fedprivacy.flower.uldp.cross_silo import run_cross_silo
from fedprivacy.flower.uldp.cross_silo_reference import compare_cross_silo
from fedprivacy.flower.uldp.silo_node import SiloNode
from fedprivacy.flower.uldp.silo_policy import silo_policy
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.deployment import deployed_mechanism, silo_deltas, silo_side
from fedprivacy.uldp.families import FAMILIES
from fedprivacy.uldp.families.base import epoch_keys
from fedprivacy.uldp.federation import Federation, build_federation
from fedprivacy.uldp.group_dp import clipped_per_sample_sum
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.rounds import RoundHyper
from fedprivacy.uldp.run import run_uldp
from fedprivacy.uldp.run_setup import (
    allocate,
    initial_model,
    load_dataset,
    round_hyper,
    run_seeds,
)

NAME = "test-normalise"
CLIP = 1.15  # ULDP: about half the per-user updates are shorter, half longer
PARTY_STD = 0.002  # the toy's noise hook: what the parties' noises sum to, per coordinate


@dataclass
class Normalise(Mechanism):
    """Every update scaled to L2 norm exactly ``clip``; no noise."""

    name: ClassVar[str] = NAME
    clip: float = CLIP

    @classmethod
    def from_options(cls, noise_multiplier: float | None, clip: float | None) -> Mechanism:
        """Only a clip."""
        return cls(CLIP if clip is None else clip)

    def clip_factors(self, norms: torch.Tensor) -> torch.Tensor:
        """``clip / norm``."""
        return self.clip / norms.clamp_min(1e-30)

    @property
    def party_noise(self) -> PartyNoise:
        """``PARTY_STD`` in all: discrete on SecAgg's grid, else ``PARTY_STD / sqrt(n)`` each."""
        return PartyNoise(PARTY_STD / self.clip, self.clip)

    def release(self, mean: NDArray[np.float64], aggregated: int) -> NDArray[np.float64]:
        """The aggregate as it is."""
        return mean


@pytest.fixture(autouse=True)
def _registered() -> Iterator[None]:
    with MECHANISMS.restoring():
        MECHANISMS.register(NAME, Normalise)
        yield


def _fedavg_config(**changes: object) -> TrainConfig:
    base = TrainConfig(users=6, per_round=4, rounds=2, dp=NAME, clip=CLIP, seed=3)
    return base.with_overrides(trainer="loop", eval_every=2, **changes)


def test_fedavg_aggregates_the_normalised_updates() -> None:
    """In process with SecAgg: the updates normalised, the parties' grid noise the hook's size."""
    training = build_training(_fedavg_config(secagg=True))
    seen: list[NDArray[np.float32]] = []
    residuals: list[float] = []

    def record(r: int, outcome: AggregateOutcome, deltas: dict[int, NDArray[np.float32]]) -> None:
        seen.extend(deltas.values())
        plain = np.mean([d.astype(np.float64) for d in deltas.values()], axis=0)
        # the noise on the mean: the parties' discrete Gaussians over the aggregated count
        assert outcome.noise_multiplier is not None
        expected = outcome.noise_multiplier * CLIP / len(outcome.aggregated)
        residuals.append(float(np.std(outcome.mean_update - plain)) / expected)

    training.on_aggregate = record
    training.run(2)
    norms = [float(np.linalg.norm(d.astype(np.float64))) for d in seen]
    assert len(norms) == 8
    np.testing.assert_allclose(norms, CLIP, rtol=1e-6)
    assert residuals == pytest.approx([1.0, 1.0], rel=0.1)


def test_the_deployed_rounds_apply_it_on_the_nodes() -> None:
    """The deployment's round logic (nodes behind a transport, SecAgg) equals the pipeline."""
    config = _fedavg_config(secagg=True, scheme="multiround", target_privacy=2)
    policy = training_policy(config).with_overrides(allow_unauthenticated=True)  # no node keys
    transport = InProcessTransport({u: Node(u, policy=policy) for u in range(6)})
    deployed = build_training(
        config,
        training_class=DeployedTraining,
        availability=LiveNodes(6, transport.users),
        transport=transport,
        config_toml=config.to_toml(),
    )
    deployed.run(2)
    trace, layout = deployed.availability.trace, deployed.aggregator.layout  # the nodes' batches
    means = simulate(config, trace, {}, layout)
    assert sorted(deployed.aggregates) == sorted(means) == [0, 1]
    # round 0 from the same model: the nodes' noise is fresh OS randomness on both sides, two
    # independent draws of at least PARTY_STD / 4 on the mean of 4 (more: over-provisioned)
    noise = float(np.std(deployed.aggregates[0] - means[0]))
    floor = math.sqrt(2) * PARTY_STD / 4
    plain = simulate(replace(config, dp="none", clip=None), trace, {}, layout)
    print(noise, floor, float(np.std(plain[0] - means[0])))
    assert 0.9 * floor < noise < 3 * floor
    assert float(np.std(plain[0] - means[0])) > 5 * noise  # the toy normalised the updates


@pytest.fixture(scope="module")
def federation() -> tuple[UldpConfig, Federation]:
    cfg = UldpConfig(
        dataset="creditcard-synthetic",
        method="ULDP-AVG",
        users=20,
        silos=3,
        clip=CLIP,
        local_lr=0.01,
    )
    cfg = cfg.resolved()
    ds = load_dataset(cfg)
    alloc = allocate(cfg, ds, np.random.default_rng(run_seeds(cfg)[0]))
    return cfg, build_federation(ds, alloc)


def _loop_presum(fed: Federation, cfg: UldpConfig, flat: torch.Tensor) -> torch.Tensor:
    """ULDP-AVG's sum of weighted, normalised per-user updates with the per-user loops."""
    family = FAMILIES["avg"]
    hyper = round_hyper(cfg)
    keys = family.draw_keys(hyper, fed, np.random.default_rng(7))  # type: ignore[attr-defined]
    weights = fed.weights(False)
    total = torch.zeros(flat.numel(), dtype=torch.float64)
    for silo in range(fed.num_silos):
        sl = fed.silo_slice(silo)
        data = (fed.x[sl], fed.y[sl], fed.user_offsets[silo])
        silo_keys = keys[:, fed.record_index[sl]]
        model = fed.task.build_model()
        vectors = family.loop_vectors(  # type: ignore[attr-defined]
            model, fed.task.loss, flat, data, silo_keys, hyper.local
        )
        for j, user in enumerate(fed.silo_users[silo]):
            v = vectors[j].to(torch.float64)
            total += float(weights[silo, user]) * CLIP * v / torch.linalg.vector_norm(v)
    return total.to(torch.float32)


def test_uldp_sums_the_normalised_per_user_updates(
    federation: tuple[UldpConfig, Federation],
) -> None:
    cfg, fed = federation
    flat = flatten_parameters(fed.task.build_model(1))
    mechanism = UldpConfig(**{**cfg.to_dict(), "dp": NAME}).mechanism()
    runner = MethodRunner("ULDP-AVG", fed, round_hyper(cfg), mechanism=mechanism)
    assert isinstance(runner.mechanism, Normalise)
    got = runner.presum(flat, np.random.default_rng(7))
    expected = _loop_presum(fed, cfg, flat)
    scale = float(expected.abs().max())  # float32 per-user training against float64 sums
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5 * scale)
    out = runner.run_round(flat, np.random.default_rng(7))
    # the noise hook: each silo adds PARTY_STD / sqrt(3), their sum PARTY_STD per coordinate
    std = float((out.noisy_sum - out.presum).double().std())
    assert std == pytest.approx(PARTY_STD, rel=0.25)
    # no noise multiplier: nothing to account, epsilon infinite against everyone
    assert runner.accounting.epsilons(1, np.ones(fed.num_users, np.int64)) == (math.inf,) * 2
    default = MethodRunner("ULDP-AVG", fed, round_hyper(cfg))
    assert not torch.allclose(default.presum(flat, np.random.default_rng(7)), got)


def test_uldp_naive_normalises_each_silos_delta_and_adds_its_party_noise(
    federation: tuple[UldpConfig, Federation],
) -> None:
    """ULDP-NAIVE: the mechanism's clip factors on the silo deltas, its noise per silo."""
    cfg, fed = federation
    flat = flatten_parameters(fed.task.build_model(1))
    hyper = round_hyper(cfg)
    mechanism = UldpConfig(**{**cfg.to_dict(), "method": "ULDP-NAIVE", "dp": NAME}).mechanism()
    runner = MethodRunner("ULDP-NAIVE", fed, hyper, mechanism=mechanism)
    assert runner.mechanism is mechanism and isinstance(mechanism, Normalise)
    out = runner.run_round(flat, np.random.default_rng(7), np.random.default_rng(8))
    # the silo deltas, trained again from the same keys, each scaled to norm CLIP by hand
    keys = epoch_keys(hyper, fed, np.random.default_rng(7))
    orders = epoch_orders(keys[:, fed.record_index], fed.silo_offsets, hyper.local.epochs)
    deltas = runner.trainer.train(flat, fed.x, fed.y, fed.silo_offsets, orders, hyper.local)
    norms = torch.linalg.vector_norm(deltas.double(), dim=1, keepdim=True)
    torch.testing.assert_close(out.presum.double(), (CLIP * deltas / norms).sum(dim=0))
    # the noise hook: each of the 3 silos adds PARTY_STD / sqrt(3) times the sensitivity 2 |S| = 6
    std = float((out.noisy_sum - out.presum).double().std())
    assert std == pytest.approx(6 * PARTY_STD, rel=0.25)
    # the default mechanism (distributed, sigma 5) adds its own noise instead of the toy's
    default = MethodRunner("ULDP-NAIVE", fed, hyper)
    again = default.run_round(flat, np.random.default_rng(7), np.random.default_rng(8))
    assert float((again.noisy_sum - again.presum).double().std()) > 100 * std


def test_uldp_group_runs_its_dp_sgd_with_it(federation: tuple[UldpConfig, Federation]) -> None:
    """ULDP-GROUP-k: each record's gradient normalised by the toy, each silo's noise its hook.

    One DP-SGD step a silo over all its kept records (the batch holds them all), so a silo's
    delta is ``-lr (sum_i f_i g_i + noise) / n_s``: the toy's normalised gradients, by hand,
    and a noise of ``PARTY_STD`` per coordinate on the silo's sum.
    """
    cfg, fed = federation
    flat = flatten_parameters(fed.task.build_model(1))
    hyper = round_hyper(cfg)
    hyper = replace(hyper, local=replace(hyper.local, epochs=1, batch_size=10**6))
    mechanism = UldpConfig(**{**cfg.to_dict(), "method": "ULDP-GROUP-2", "dp": NAME}).mechanism()
    runner = MethodRunner("ULDP-GROUP-2", fed, hyper, mechanism=mechanism)
    assert runner.mechanism is mechanism and isinstance(mechanism, Normalise)
    out = runner.run_round(flat, np.random.default_rng(7))
    kept, lr = runner.group_fed, hyper.local.lr
    assert kept is not None and runner.model is not None
    expected = torch.zeros_like(flat, dtype=torch.float64)
    variance = 0.0
    for silo in range(kept.num_silos):
        sl = kept.silo_slice(silo)
        n = sl.stop - sl.start
        summed = clipped_per_sample_sum(
            runner.model, kept.task.loss, flat, kept.x[sl], kept.y[sl], mechanism
        )
        expected -= lr * summed.double() / n
        variance += (lr * PARTY_STD / n) ** 2
    residual = out.presum.double() - expected
    assert float(residual.pow(2).mean().sqrt()) == pytest.approx(math.sqrt(variance), rel=0.3)
    # the default mechanism (distributed: L2 clip at C, sigma 5) moves the model otherwise
    default = MethodRunner("ULDP-GROUP-2", fed, hyper)
    again = default.run_round(flat, np.random.default_rng(7))
    assert float((again.presum.double() - expected).abs().max()) > 10 * math.sqrt(variance)


def test_the_cross_silo_deployment_clips_and_noises_with_it(tmp_path: Path) -> None:
    """Protocol 1 over the in-process transport: each silo's clip factors and noise are the toy's.

    Four Heart Disease silos whose policies set a negligible noise floor, so the noise in every
    aggregate is the toy's hook (four silos adding ``PARTY_STD / 2`` each); the in-process
    reference replays the same rounds with the same mechanism.
    """
    data = Path(os.environ.get("FEDPRIVACY_DATA") or Path(__file__).parents[3] / "shared/data")
    if not (data / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {data} (set FEDPRIVACY_DATA)")
    config = UldpConfig(
        dataset="heart_disease",
        method="ULDP-AVG-w",
        users=60,
        rounds=3,
        noise_multiplier=1e-6,
        dp=NAME,
        secure_key_bits=1024,
        insecure_test_keys=True,
        data_dir=str(data),
    )
    assert isinstance(deployed_mechanism(config.resolved()), Normalise)
    policy = silo_policy(config).with_overrides(allow_unauthenticated=True)  # no node keys
    transport = InProcessTransport({s: SiloNode(s, "", str(data), policy) for s in range(4)})
    summary = run_cross_silo(config, transport, tmp_path)
    assert summary["rounds_aggregated"] == 3
    stats = compare_cross_silo(tmp_path, str(data))
    assert stats["noise_std_expected"] == pytest.approx(PARTY_STD) and stats["samples"] == 42
    # 42 draws: their RMS lies within 35 % of the std except with probability < 1e-4
    assert 0.65 * PARTY_STD < stats["deviation_std"] < 1.35 * PARTY_STD
    # the toy has no noise multiplier: nothing to account, and the report says so
    assert summary["privacy"]["epsilon"] is None


def test_the_drop_in_nodes_clip_with_it(caplog: pytest.LogCaptureFixture) -> None:
    """``PrivateFedAvg`` with secure aggregation: every node scales its update by the toy.

    The nodes' updates are summed under masks, so the check is each node's own account of what
    it contributed: every update normalised to the clip, the short ones scaled up (which no
    L2 clip does).
    """
    generator = torch.Generator().manual_seed(0)
    datasets = [
        TensorDataset(torch.randn(20, 3, generator=generator), torch.randint(0, 2, (20,)))
        for _ in range(6)
    ]
    config = PrivateFedAvgConfig(users=6, per_round=4, rounds=2, dp=NAME, clip=0.05)
    with caplog.at_level(logging.INFO, logger="fedprivacy"):
        result = run_private_fedavg(torch.nn.Linear(3, 2), datasets, config, lr=0.1)
    assert [len(r.aggregated) for r in result.rounds] == [4, 4]
    norms = [
        tuple(float(x) for x in m.group(1, 2))
        for m in (_CONTRIBUTED.search(r.getMessage()) for r in caplog.records)
        if m is not None
    ]
    assert len(norms) == 8 and all(after == pytest.approx(0.05, rel=1e-3) for _, after in norms)
    assert any(before < 0.05 for before, _ in norms)  # scaled up: the toy's factor, not a clip


@dataclass
class Inflate(Mechanism):
    """A lying server's mechanism: every update scaled up tenfold (a sensitivity of 10 clips)."""

    name: ClassVar[str] = "test-inflate"
    clip: float = CLIP

    @classmethod
    def from_options(cls, noise_multiplier: float | None, clip: float | None) -> Mechanism:
        """Only a clip."""
        return cls(CLIP if clip is None else clip)

    def clip_factors(self, norms: torch.Tensor) -> torch.Tensor:
        """Ten, whatever the norm."""
        return torch.full_like(norms, 10.0)

    @property
    def party_noise(self) -> PartyNoise:
        """Noise multiplier 1 at its clip (what matters here is the clip factor)."""
        return PartyNoise(1.0, self.clip)

    def release(self, mean: NDArray[np.float64], aggregated: int) -> NDArray[np.float64]:
        """The aggregate as it is."""
        return mean


def test_a_mechanism_the_server_names_never_raises_a_partys_sensitivity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Against a lying server: its mechanism scales within each party's own clip, never past it.

    A drop-in node and a cross-silo silo are asked to apply a mechanism that multiplies every
    update by ten; what each contributes stays within the clip its own policy bounds.
    """
    MECHANISMS.register(Inflate.name, Inflate)
    generator = torch.Generator().manual_seed(0)
    datasets = [
        TensorDataset(torch.randn(20, 3, generator=generator), torch.randint(0, 2, (20,)))
        for _ in range(6)
    ]
    config = PrivateFedAvgConfig(users=6, per_round=4, rounds=1, dp=Inflate.name, clip=0.05)
    with caplog.at_level(logging.INFO, logger="fedprivacy"):
        run_private_fedavg(torch.nn.Linear(3, 2), datasets, config, lr=0.1)
    after = [
        float(m.group(2))
        for m in (_CONTRIBUTED.search(r.getMessage()) for r in caplog.records)
        if m is not None
    ]
    assert len(after) == 4 and max(after) <= 0.05
    data = Path(os.environ.get("FEDPRIVACY_DATA") or Path(__file__).parents[3] / "shared/data")
    if not (data / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {data} (set FEDPRIVACY_DATA)")
    uldp = UldpConfig(
        dataset="heart_disease", method="ULDP-AVG-w", users=20, dp=Inflate.name, clip=0.1
    )
    side = silo_side(uldp.resolved().to_toml(), str(data))
    flat = flatten_parameters(side.runner.model).numpy()
    rows = silo_deltas(side, 0, flat, keys_seed=1)
    assert rows.any() and np.linalg.norm(rows, axis=1).max() <= 0.1 * (1 + 1e-12)


_CONTRIBUTED = re.compile(r"contributed an update of norm (\S+) \(clipped to (\S+),")


# --------------------------------------------------------------------------- aggregators
#
# The toy aggregator halves the float aggregate (its weighted sum and its mean update) and keeps
# every outcome it produced. A configuration names its aggregator with ``secagg`` and
# ``encoding`` only (``plaintext``, ``float`` or ``secagg``: FedAvg with ``encoding = "float"``,
# ULDP-FL without ``secagg``), so the toy takes the ``float`` entry for the length of a test:
# one class, one registration, and in-process FedAvg, the deployed FedAvg server and ULDP-FL's
# sum over silos pick it up unchanged.

HALF = 0.5  # a power of two: halving is exact, so the checks can be bit for bit


class HalvedFloat(FloatAggregator):
    """The float aggregate halved; keeps what it produced."""

    def __init__(self, clip: float, per_round: int, bits: int, seed: int) -> None:
        super().__init__(clip, per_round, bits, seed)
        self.produced: list[AggregateOutcome] = []

    def aggregate(
        self,
        round_index: int,
        deltas: Mapping[int, NDArray[np.floating]],
        weights: Mapping[int, float],
        *,
        batch_size: int = 1,
        rng: np.random.Generator | None = None,
    ) -> AggregateOutcome:
        """The float outcome, its sum and mean update times :data:`HALF`."""
        outcome = super().aggregate(round_index, deltas, weights, batch_size=batch_size, rng=rng)
        if outcome.mean_update is not None and outcome.weighted_sum is not None:
            outcome = replace(
                outcome,
                mean_update=HALF * outcome.mean_update,
                weighted_sum=HALF * outcome.weighted_sum,
            )
        self.produced.append(outcome)
        return outcome


@contextmanager
def _halved_float() -> Iterator[None]:
    """:class:`HalvedFloat` registered as ``float``; the registry restored on exit."""
    with AGGREGATORS.restoring():
        AGGREGATORS.unregister("float")
        AGGREGATORS.register("float", HalvedFloat)
        try:
            yield
        finally:
            training_for.cache_clear()  # the nodes' trainings built with the toy


def _plain_config() -> TrainConfig:
    base = TrainConfig(users=6, per_round=4, rounds=2, seed=3, encoding="float")
    return base.with_overrides(trainer="loop", eval_every=2)


def _first_mean(config: TrainConfig) -> NDArray[np.float64]:
    """Round 0's mean update of an in-process run of ``config`` (the registry as it is)."""
    means: list[NDArray[np.float64]] = []

    def keep(r: int, outcome: AggregateOutcome, deltas: dict[int, NDArray[np.float32]]) -> None:
        assert outcome.mean_update is not None
        means.append(outcome.mean_update)

    build_training(config, on_aggregate=keep).run(1)
    return means[0]


def test_fedavg_applies_a_registered_aggregator() -> None:
    config = _plain_config()
    plain = _first_mean(config)  # the built-in float aggregator
    seen: list[AggregateOutcome] = []
    with _halved_float():
        training = build_training(
            config, on_aggregate=lambda r, outcome, deltas: seen.append(outcome)
        )
        start = training.global_flat.clone()
        training.run(1)
        moved = training.global_flat - start
        training.run(2)
    toy = training.aggregator
    assert isinstance(toy, HalvedFloat)
    assert len(toy.produced) == 2 and all(a is b for a, b in zip(seen, toy.produced, strict=True))
    first = toy.produced[0].mean_update
    assert first is not None
    np.testing.assert_array_equal(first, HALF * plain)  # round 0: same model, same users
    expected = start + torch.from_numpy(first.astype(np.float32))
    assert torch.equal(start + moved, expected)  # the engine applied the toy's aggregate
    assert type(build_training(config).aggregator) is FloatAggregator  # restored


def test_the_deployed_server_aggregates_with_a_registered_aggregator() -> None:
    """Plaintext deployment: the nodes train, the server calls the registered aggregator."""
    config = _plain_config()
    with _halved_float():
        policy = training_policy(config).with_overrides(allow_unauthenticated=True)  # no node keys
        transport = InProcessTransport({u: Node(u, policy=policy) for u in range(6)})
        deployed = build_training(
            config,
            training_class=DeployedTraining,
            availability=LiveNodes(6, transport.users),
            transport=transport,
            config_toml=config.to_toml(),
        )
        deployed.run(2)
        trace = deployed.availability.trace
        pipeline = simulate(config, trace, {})  # the in-process pipeline, with the toy too
    toy = deployed.aggregator
    assert isinstance(toy, HalvedFloat) and len(toy.produced) == 2
    assert sorted(deployed.aggregates) == sorted(pipeline) == [0, 1]
    for r, outcome in enumerate(toy.produced):
        assert outcome.mean_update is not None
        assert np.array_equal(deployed.aggregates[r], outcome.mean_update)
        assert np.array_equal(deployed.aggregates[r], pipeline[r])
    plain = simulate(config, trace, {})  # the built-in float aggregator
    np.testing.assert_array_equal(deployed.aggregates[0], HALF * plain[0])


@pytest.mark.parametrize("method", ["ULDP-AVG", "DEFAULT"])
def test_uldp_sums_its_silos_with_a_registered_aggregator(method: str) -> None:
    """Per-user (ULDP-AVG) and silo-level (DEFAULT) rounds: the server's sum is the toy's."""
    cfg = UldpConfig(
        dataset="creditcard-synthetic", method=method, users=20, silos=3, rounds=1, seed=2
    )
    plain = run_uldp(cfg)
    with _halved_float():
        halved = run_uldp(cfg)
        runner = MethodRunner(method, *_federation_of(cfg))
    assert isinstance(runner.aggregator, HalvedFloat)
    _, _, start = initial_model(cfg.resolved(), load_dataset(cfg.resolved()))
    moved, halved_moved = plain.final_params - start, halved.final_params - start
    assert float(moved.abs().max()) > 1e-3  # the round did move the model
    # x_1 = x_0 + step * sum: the toy's x_1 moved half as far as the built-in's
    torch.testing.assert_close(halved_moved, HALF * moved, rtol=1e-5, atol=1e-7)
    assert type(MethodRunner(method, *_federation_of(cfg)).aggregator) is FloatAggregator


def _federation_of(cfg: UldpConfig) -> tuple[Federation, RoundHyper]:
    resolved = cfg.resolved()
    ds = load_dataset(resolved)
    alloc = allocate(resolved, ds, np.random.default_rng(run_seeds(resolved)[0]))
    return build_federation(ds, alloc), round_hyper(resolved)
