"""The synthetic Fed-Heart-Disease stand-in, and the core checks run on it on every checkout.

``heart`` / ``heart_fed`` fall back to the stand-in when the shared datasets are absent (see
``conftest.py``); the checks here run on the stand-in always, so that its own path is exercised
where the real data are present too, and the ledger checks of ``test_algorithm.py`` (which read
the data directory) have a counterpart that never skips.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from fedprivacy.data.creditcard import SYNTHETIC_MARK
from fedprivacy.data.silo_dataset import SiloDataset
from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.rounds import RoundHyper
from fedprivacy.uldp.run import run_uldp


def test_the_stand_in_has_heart_diseases_shape_and_says_it_is_synthetic(
    heart_synthetic: SiloDataset, heart: SiloDataset
) -> None:
    ds = heart_synthetic
    assert SYNTHETIC_MARK in ds.source
    assert (ds.name, ds.task, ds.num_classes, ds.fixed_silos) == (
        "heart_disease",
        "binary",
        2,
        True,
    )
    # FLamby's four centres and split (the heart_disease module's docstring)
    assert ds.silo_names == ("cleveland", "hungarian", "switzerland", "va")
    assert ds.train_sizes().tolist() == [199, 172, 30, 85]
    assert ds.test_sizes().tolist() == [104, 89, 16, 45]
    assert ds.input_shape == heart.input_shape == (13,)
    assert ds.train_sizes().tolist() == heart.train_sizes().tolist()
    for x, y in zip(ds.train_x, ds.train_y, strict=True):
        np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-5)  # standardised per silo
        np.testing.assert_allclose(x.std(axis=0), 1.0, atol=1e-4)
        assert 0 < y.mean() < 1  # both classes in every silo
    assert not ds.train_x[0].flags.writeable


def test_the_tcga_stand_in_has_fed_tcga_brcas_shape(
    tcga_synthetic: SiloDataset, tcga: SiloDataset
) -> None:
    ds = tcga_synthetic
    assert SYNTHETIC_MARK in ds.source
    assert (ds.name, ds.task, ds.num_classes, ds.fixed_silos) == ("tcga_brca", "survival", 0, True)
    assert ds.silo_names == tcga.silo_names
    assert ds.train_sizes().tolist() == [248, 156, 164, 129, 129, 40] == tcga.train_sizes().tolist()
    assert ds.test_sizes().tolist() == tcga.test_sizes().tolist()
    assert ds.input_shape == tcga.input_shape == (39,)
    for y in ds.train_y:
        assert set(np.unique(y[:, 0])) == {0.0, 1.0} and np.all(y[:, 1] > 0)


@pytest.mark.parametrize("method", ["ULDP-AVG-w", "ULDP-SGD-ws"])
def test_vectorised_round_equals_per_user_loop_on_the_stand_in(
    heart_synthetic_fed: Federation, method: str, presum_oracle: Callable[..., torch.Tensor]
) -> None:
    fed = heart_synthetic_fed
    assert SYNTHETIC_MARK in fed.source
    hp = RoundHyper(LocalTrainingSpec(2, 4, 0.2), 1.0, 0.3, 5.0, 0.5)
    flat = flatten_parameters(fed.task.build_model(3))
    got = MethodRunner(method, fed, hp).presum(flat, np.random.default_rng(7))
    expected = presum_oracle(method, fed, flat, hp, np.random.default_rng(7))
    assert float(expected.norm()) > 0.1
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scheme", ["poisson", "multiround"])
def test_per_user_epsilon_equals_an_accountant_run_on_the_ledger_counts(
    heart_synthetic: SiloDataset, scheme: str
) -> None:
    extra = {"per_round": 10, "target_privacy": 5} if scheme == "multiround" else {}
    cfg = UldpConfig(
        dataset="heart_disease",
        method="ULDP-AVG-ws",
        users=40,
        rounds=6,
        scheme=scheme,
        **extra,  # type: ignore[arg-type]
    )
    res = run_uldp(cfg, dataset=heart_synthetic)
    assert res.participation is not None and res.server_view is not None
    counts = res.participation.sum(axis=0)
    if scheme == "multiround":
        assert int(counts.sum()) == cfg.rounds * 10  # K users in every round
    eps = np.array(
        [
            PrivacyAccountant("rdp")
            .compose_gaussian(cfg.noise_multiplier, int(c), 1.0)
            .epsilon(cfg.delta)
            if c
            else 0.0
            for c in counts
        ]
    )
    spread = res.privacy_report().per_user_epsilon
    assert spread is not None
    assert spread["min"] == pytest.approx(eps.min())
    assert spread["median"] == pytest.approx(float(np.median(eps)))
    assert spread["max"] == pytest.approx(eps.max()) == res.final.get("epsilon_server")
    if scheme == "multiround":
        assert res.final.get("epsilon") == res.final.get("epsilon_server")
    else:
        assert res.final.get("epsilon") < res.final.get("epsilon_server")


def test_random_selection_chooses_exactly_k_users_on_the_stand_in(
    heart_synthetic: SiloDataset,
) -> None:
    cfg = UldpConfig(
        dataset="heart_disease",
        method="ULDP-SGD-s",
        users=40,
        rounds=4,
        scheme="random",
        per_round=8,
    )
    res = run_uldp(cfg, dataset=heart_synthetic)
    assert res.participation is not None and int(np.sum(res.participation)) == 4 * 8
