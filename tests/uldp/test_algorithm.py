"""ULDP-FL through the round loop: the same runs, user selection schemes, per-user epsilon."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.participation.availability import AlwaysAvailable
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.sampling import PoissonSampler
from fedprivacy.pipeline import FederatedRun
from fedprivacy.report import LedgerEpsilons, Method, privacy_report
from fedprivacy.uldp.algorithm import UldpAlgorithm, server_view, uldp_selector
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.method_names import METHODS
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.rounds import RoundHyper
from fedprivacy.uldp.run import run_uldp

C = 0.05
HYPER = RoundHyper(
    LocalTrainingSpec(2, 4, 0.2), global_lr=1.0, clip=C, noise_multiplier=5.0, sampling_rate=0.5
)
#: every method whose aggregate has a per-round user-level sensitivity (GROUP-k: per record)
PRIVATE = [m for m in METHODS if m.startswith(("ULDP-NAIVE", "ULDP-AVG", "ULDP-SGD"))]


def _loop_round(method: str, fed: Federation, flat: torch.Tensor) -> UldpAlgorithm:
    """One round of ``method`` through the loop, with fixed generators."""
    runner = MethodRunner(method, fed, HYPER)
    model = fed.task.build_model(0)
    train_rng = np.random.default_rng(11)
    algo = UldpAlgorithm.simulated(runner, model, flat, train_rng, np.random.default_rng(12))
    sampler = (
        PoissonSampler(fed.num_users, HYPER.sampling_rate)
        if runner.spec.sampled
        else uldp_selector(UldpConfig(method="ULDP-AVG", users=fed.num_users))
    )
    FederatedRun(
        sampler, AlwaysAvailable(fed.num_users), algo, selection_rng=lambda _t: train_rng
    ).run(1)
    return algo


@pytest.mark.parametrize("method", PRIVATE)
def test_user_level_sensitivity_holds_through_the_loop(heart_fed: Federation, method: str) -> None:
    """Removing one user's records moves the round's pre-noise sum by at most its sensitivity.

    The loop's selector draws the sample from the same generator in both federations (it is
    per user id), so only the removed user's contribution differs; the bound is ``C`` for
    ULDP-AVG / ULDP-SGD and ``2 |S| C`` for the corrected ULDP-NAIVE.
    """
    fed = heart_fed
    flat = flatten_parameters(fed.task.build_model(0))
    base = _loop_round(method, fed, flat).last_output
    assert base is not None
    bound = 2 * fed.num_silos * C if method == "ULDP-NAIVE" else C
    present = (fed.histogram() > 0).sum(axis=0)
    if base.sampled is not None:
        present = np.where(base.sampled, present, -1)
    users = [int(u) for u in np.argsort(-present, kind="stable")[:3]]
    moves = []
    for u in users:
        other = _loop_round(method, fed.without_user(u), flat).last_output
        assert other is not None
        moves.append(float(torch.linalg.vector_norm(base.presum - other.presum)))
    assert max(moves) <= bound * (1 + 1e-5)
    assert max(moves) > 0.1 * C  # the users do count


def test_the_loop_reproduces_the_runner_drawing_its_own_sample(heart_fed: Federation) -> None:
    """Poisson sampling by the loop's selector = the family's own ``rng.random(U) < q`` draw."""
    flat = flatten_parameters(heart_fed.task.build_model(0))
    via_loop = _loop_round("ULDP-AVG-ws", heart_fed, flat)
    runner = MethodRunner("ULDP-AVG-ws", heart_fed, HYPER)
    direct = runner.run_round(flat, np.random.default_rng(11), np.random.default_rng(12))
    assert via_loop.last_output is not None
    assert torch.equal(via_loop.flat, direct.flat)
    assert via_loop.last_output.sampled is not None and direct.sampled is not None
    np.testing.assert_array_equal(via_loop.last_output.sampled, direct.sampled)


def _independent_epsilon(count: int, z: float, delta: float) -> float:
    if count == 0:
        return 0.0
    return PrivacyAccountant("rdp").compose_gaussian(z, count, 1.0).epsilon(delta)


@pytest.mark.parametrize("scheme", ["poisson", "multiround"])
def test_per_user_epsilon_equals_an_accountant_run_on_the_ledger_counts(
    data_dir: Path, scheme: str
) -> None:
    extra = {"per_round": 10, "target_privacy": 5} if scheme == "multiround" else {}
    cfg = UldpConfig(
        dataset="heart_disease",
        method="ULDP-AVG-ws",
        users=40,
        rounds=6,
        scheme=scheme,
        data_dir=str(data_dir),
        **extra,  # type: ignore[arg-type]
    )
    res = run_uldp(cfg)
    view = res.server_view
    assert view is not None and res.participation is not None
    report = res.privacy_report()
    counts = res.participation.sum(axis=0)
    if scheme == "multiround":
        assert int(counts.sum()) == cfg.rounds * 10  # K users in every round
    eps = np.array([_independent_epsilon(int(c), cfg.noise_multiplier, cfg.delta) for c in counts])
    spread = report.per_user_epsilon
    assert spread is not None
    assert spread["min"] == pytest.approx(eps.min())
    assert spread["median"] == pytest.approx(float(np.median(eps)))
    assert spread["max"] == pytest.approx(eps.max()) == res.final.get("epsilon_server")
    if scheme == "multiround":
        # the server chose the sample: no amplification, the most-selected user's epsilon
        assert res.final.get("epsilon") == res.final.get("epsilon_server")
        assert view["t_weak"]["upper"] >= 5  # batches of T = 5 users are never split
    else:
        assert res.final.get("epsilon") < res.final.get("epsilon_server")


def test_selection_schemes_choose_exactly_k_users(data_dir: Path) -> None:
    cfg = UldpConfig(
        dataset="heart_disease",
        method="ULDP-SGD-s",
        users=40,
        rounds=4,
        scheme="random",
        per_round=8,
        data_dir=str(data_dir),
    )
    res = run_uldp(cfg)
    assert res.participation is not None and int(np.sum(res.participation)) == 4 * 8
    assert method_spec(cfg.method).sampled


def test_server_view_of_a_large_ledger_is_a_certified_audit() -> None:
    """10,000 users x 100 Poisson rounds: the scalable audit, per-user epsilon by counts."""
    rng = np.random.default_rng(0)
    ledger = ParticipationLedger(10_000)
    for _ in range(100):
        ledger.record(np.flatnonzero(rng.random(10_000) < 0.1))
    view = server_view(ledger, time_limit=5.0)
    tw = view["t_weak"]
    assert tw is not None and 1 <= tw["lower"] <= tw["upper"]
    assert view["exposed_users"] == 0 and view["t_strong"] is not None
    ledger_epsilons = LedgerEpsilons(ledger.matrix().astype(bool), np.full(100, 5.0))
    method = Method("ULDP-AVG-s", 5.0, 1.0, adds_noise_in_aggregation=True)
    spread = privacy_report(method, 1e-5, ledger_epsilons, aggregation="silo-sum").per_user_epsilon
    assert spread is not None
    for key, count in (("max", ledger.frequency.max()), ("min", ledger.frequency.min())):
        expected = _independent_epsilon(int(count), 5.0, 1e-5)
        assert spread[key] == pytest.approx(expected)
