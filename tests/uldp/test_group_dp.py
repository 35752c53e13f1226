from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from opacus.accountants import RDPAccountant

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.dp.group_privacy import group_privacy_bounds
from fedprivacy.dp.rdp import DEFAULT_ORDERS
from fedprivacy.errors import ParameterError
from fedprivacy.fl.params import flatten_parameters, load_flat_
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.group_dp import (
    clipped_per_sample_sum,
    dp_sgd_silo,
    group_epsilon,
    group_flags,
    group_size,
    silo_rdp,
)


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


def test_dp_sgd_silo_records_opacus_steps(heart_fed: Federation) -> None:
    fed = heart_fed
    model = fed.task.build_model(0)
    flat = flatten_parameters(model)
    acc = RDPAccountant()
    sl = fed.silo_slice(0)
    n = sl.stop - sl.start
    rng = np.random.default_rng(0)
    kw = dict(epochs=2, batch_size=16, lr=0.1, clip=1.0, sigma=1.0, accountant=acc, rng=rng)
    delta = dp_sgd_silo(model, fed.task.loss, flat, fed.x[sl], fed.y[sl], **kw)
    steps = math.ceil(n / 16)
    assert acc.history == [(1.0, 1.0 / steps, 2 * steps)]
    assert torch.isfinite(delta).all() and float(delta.norm()) > 0
    empty = dp_sgd_silo(model, fed.task.loss, flat, fed.x[:0], fed.y[:0], **kw)
    assert torch.all(empty == 0) and acc.history == [(1.0, 1.0 / steps, 2 * steps)]


def test_clipped_per_sample_sum_matches_a_loop(heart_fed: Federation) -> None:
    fed = heart_fed
    model = fed.task.build_model(1)
    flat = flatten_parameters(model)
    x, y = fed.x[:20], fed.y[:20]
    got = clipped_per_sample_sum(model, fed.task.loss, flat, x, y, 0.3)
    expected = torch.zeros_like(flat)
    for i in range(20):
        m = copy.deepcopy(model)
        load_flat_(m, flat)
        value = fed.task.loss(m(x[i : i + 1]), y[i : i + 1], torch.ones(1))
        g = torch.cat([t.reshape(-1) for t in torch.autograd.grad(value, list(m.parameters()))])
        expected += g * min(1.0, 0.3 / float(g.norm()))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_silo_rdp_matches_dp_accounting_at_integer_orders() -> None:
    history = [(5.0, 0.02, 100), (5.0, 0.05, 30)]
    ours = silo_rdp(history)
    acc = PrivacyAccountant("rdp").compose_gaussian(5.0, 100, 0.02).compose_gaussian(5.0, 30, 0.05)
    _, ref = acc.rdp()
    integer = (DEFAULT_ORDERS == np.round(DEFAULT_ORDERS)) & (DEFAULT_ORDERS <= 256)
    np.testing.assert_allclose(ours[integer], ref[integer], rtol=1e-6)
    assert np.all(ours >= 0)


def test_group_epsilon_independent_computation() -> None:
    histories = [[(5.0, 0.1, 40)], [(5.0, 0.25, 40)], []]
    curve = np.maximum(silo_rdp(histories[0]), silo_rdp(histories[1]))
    for k in (1, 2, 4, 6):
        expected = group_privacy_bounds(DEFAULT_ORDERS, curve, k, 1e-5).epsilon
        assert group_epsilon(histories, k, 1e-5) == pytest.approx(expected, rel=1e-12)
    # k = 1 is Opacus' own epsilon of the worst silo (on a finer order grid: never larger)
    worst = RDPAccountant()
    worst.history = list(histories[1])
    opacus_eps = worst.get_epsilon(1e-5)
    ours = group_epsilon(histories, 1, 1e-5)
    assert ours <= opacus_eps + 1e-9 and ours > 0.97 * opacus_eps
    assert group_epsilon([[], []], 2, 1e-5) == 0.0
