from __future__ import annotations

import ast
import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.dp.group_privacy import group_privacy_bounds
from fedprivacy.dp.rdp import DEFAULT_ORDERS, rdp_to_epsilon
from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.mechanism import DistributedDiscreteGaussian
from fedprivacy.fl.params import flatten_parameters, load_flat_
from fedprivacy.uldp import group_dp
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.group_dp import (
    History,
    clipped_per_sample_sum,
    dp_sgd_silo,
    group_epsilon,
    group_flags,
    group_size,
    record_step,
    silo_rdp,
)
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.rounds import RoundHyper


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_flags_limit_each_user_to_k(heart_fed_zipf: Federation, k: int) -> None:
    fed = heart_fed_zipf
    keep = group_flags(fed, k)
    kept = fed.keep_rows(keep)
    assert np.array_equal(kept.records_per_user(), np.minimum(fed.records_per_user(), k))
    # within a silo, a user keeps its first records (pool order), as the authors' code
    for s in range(fed.num_silos):
        base, off = int(fed.silo_offsets[s]), fed.user_offsets[s]
        for j in range(len(fed.silo_users[s])):
            block = keep[base + off[j] : base + off[j + 1]]
            assert not np.any(np.diff(block.astype(int)) > 0)  # True... then False...


def test_flags_keep_two_records_per_silo_for_cox(tcga, federation_of) -> None:  # type: ignore[no-untyped-def]
    fed = federation_of(tcga, 40, "zipf")
    for k in (2, 3, 5):
        kept = fed.keep_rows(group_flags(fed, k, min_per_silo=2))
        h = kept.histogram()
        assert np.all((h == 0) | (h >= 2))
        assert np.all(kept.records_per_user() <= k)
        assert np.all(kept.records_per_user() >= 2)  # every user keeps something


def test_group_size(heart_fed_zipf: Federation) -> None:
    n_u = heart_fed_zipf.records_per_user()
    assert group_size(heart_fed_zipf, "max") == n_u.max()
    assert group_size(heart_fed_zipf, "median") == int(np.median(n_u[n_u > 0]))
    assert group_size(heart_fed_zipf, "8") == 8
    with pytest.raises(ParameterError, match="group"):
        group_size(heart_fed_zipf, "many")


def test_dp_sgd_silo_records_its_steps(heart_fed: Federation) -> None:
    fed = heart_fed
    model = fed.task.build_model(0)
    flat = flatten_parameters(model)
    history: History = []
    sl = fed.silo_slice(0)
    n = sl.stop - sl.start
    rng = np.random.default_rng(0)
    mechanism = DistributedDiscreteGaussian(noise_multiplier=1.0, clip=1.0)
    kw = dict(epochs=2, batch_size=16, lr=0.1, mechanism=mechanism, history=history, rng=rng)
    delta = dp_sgd_silo(model, fed.task.loss, flat, fed.x[sl], fed.y[sl], **kw)
    steps = math.ceil(n / 16)
    assert history == [(1.0, 1.0 / steps, 2 * steps)]
    assert torch.isfinite(delta).all() and float(delta.norm()) > 0
    empty = dp_sgd_silo(model, fed.task.loss, flat, fed.x[:0], fed.y[:0], **kw)
    assert torch.all(empty == 0) and history == [(1.0, 1.0 / steps, 2 * steps)]
    # another rate (the same silo with another batch size) starts a new run of steps
    dp_sgd_silo(model, fed.task.loss, flat, fed.x[sl], fed.y[sl], **{**kw, "batch_size": n})
    assert history == [(1.0, 1.0 / steps, 2 * steps), (1.0, 1.0, 2)]


def test_record_step_merges_runs_like_opacus() -> None:
    history: History = []
    for z, q in [(5.0, 0.1), (5.0, 0.1), (4.0, 0.1), (4.0, 0.2), (4.0, 0.2), (5.0, 0.1)]:
        record_step(history, z, q)
    assert history == [(5.0, 0.1, 2), (4.0, 0.1, 1), (4.0, 0.2, 2), (5.0, 0.1, 1)]


def test_clipped_per_sample_sum_matches_a_loop(heart_fed: Federation) -> None:
    fed = heart_fed
    model = fed.task.build_model(1)
    flat = flatten_parameters(model)
    x, y = fed.x[:20], fed.y[:20]
    clip = DistributedDiscreteGaussian(noise_multiplier=1.0, clip=0.3)
    got = clipped_per_sample_sum(model, fed.task.loss, flat, x, y, clip)
    expected = torch.zeros_like(flat)
    for i in range(20):
        m = copy.deepcopy(model)
        load_flat_(m, flat)
        value = fed.task.loss(m(x[i : i + 1]), y[i : i + 1], torch.ones(1))
        g = torch.cat([t.reshape(-1) for t in torch.autograd.grad(value, list(m.parameters()))])
        expected += g * min(1.0, 0.3 / float(g.norm()))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_silo_rdp_is_the_package_accountants_composition() -> None:
    history = [(5.0, 0.02, 100), (5.0, 0.05, 30), (2.0, 0.5, 7), (5.0, 0.02, 3)]
    ours = silo_rdp(history)
    acc = PrivacyAccountant("rdp")
    for z, q, t in history:
        acc.compose_gaussian(z, t, q)
    orders, ref = acc.rdp()
    np.testing.assert_array_equal(orders, DEFAULT_ORDERS)
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=0)
    assert np.all(ours > 0) and not np.any(np.isnan(ours))
    # and with the same accountant, the same epsilon
    assert rdp_to_epsilon(DEFAULT_ORDERS, ours, 1e-5)[0] == pytest.approx(
        acc.epsilon(1e-5), rel=1e-12
    )
    assert np.all(silo_rdp([]) == 0)


def test_silo_rdp_orders_without_a_finite_bound_are_inf(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(noise_multiplier: float, sampling_rate: float) -> np.ndarray:
        out = np.ones(len(DEFAULT_ORDERS))
        out[-2:] = [np.nan, np.inf]
        return out

    group_dp._step_rdp.cache_clear()
    monkeypatch.setattr(group_dp, "gaussian_rdp", fake)
    try:
        rho = silo_rdp([(5.0, 0.1, 3)])
    finally:
        group_dp._step_rdp.cache_clear()
    assert np.all(rho[:-2] == 3.0) and np.all(rho[-2:] == np.inf)


def test_group_epsilon_independent_computation() -> None:
    histories = [[(5.0, 0.1, 40)], [(5.0, 0.25, 40)], []]
    curve = np.maximum(silo_rdp(histories[0]), silo_rdp(histories[1]))
    for k in (1, 2, 4, 6):
        expected = group_privacy_bounds(DEFAULT_ORDERS, curve, k, 1e-5).epsilon
        assert group_epsilon(histories, k, 1e-5) == pytest.approx(expected, rel=1e-12)
    # k = 1 is the package accountant's epsilon of the worst silo
    worst = PrivacyAccountant("rdp").compose_gaussian(5.0, 40, 0.25)
    assert group_epsilon(histories, 1, 1e-5) == pytest.approx(worst.epsilon(1e-5), rel=1e-12)
    assert group_epsilon([[], []], 2, 1e-5) == 0.0


def test_uldp_imports_no_opacus_accountant() -> None:
    """Opacus only trains (per-sample gradients, clipping, noise); accounting is the package's."""
    root = Path(group_dp.__file__).parent
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.startswith("opacus.accountants") for n in names), path


def test_group_runner_never_calls_opacus_accounting(
    heart_fed: Federation, monkeypatch: pytest.MonkeyPatch
) -> None:
    import opacus.accountants
    import opacus.accountants.analysis.rdp as opacus_rdp

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Opacus accounting used")

    class Refused:
        def __init__(self, *args: object, **kwargs: object) -> None:
            refuse()

    monkeypatch.setattr(opacus.accountants, "RDPAccountant", Refused)
    monkeypatch.setattr(opacus_rdp, "compute_rdp", refuse)
    hp = RoundHyper(LocalTrainingSpec(1, 8, 0.05), global_lr=1.0, clip=1.0, noise_multiplier=3.0)
    runner = MethodRunner("ULDP-GROUP-2", heart_fed, hp)
    runner.run_round(flatten_parameters(heart_fed.task.build_model(0)), np.random.default_rng(0))
    assert 0 < runner.accounting.epsilons(1, np.ones(heart_fed.num_users, np.int64))[0] < math.inf
