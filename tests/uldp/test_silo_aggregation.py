"""ULDP-FL's sum over silos through a registered aggregator: the clear sum or SecAgg.

Adversary: the honest-but-curious server. Without ``secagg`` it receives every silo's noised
contribution; with it, SecAgg between the silos, it can compute from everything it received
only the sum over all silos (:meth:`~fedprivacy.secagg.server.SecAggServer.view`), which is what
the epsilon against the server assumes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import FloatAggregator
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.secagg.server import SecAggServer
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.federation import Federation, build_federation
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.run import run_uldp
from fedprivacy.uldp.run_setup import allocate, load_dataset, round_hyper, run_seeds

CONFIG = UldpConfig(
    dataset="creditcard-synthetic", method="ULDP-AVG", users=20, silos=3, rounds=2, seed=1
)


def _federation(cfg: UldpConfig) -> Federation:
    ds = load_dataset(cfg)
    return build_federation(ds, allocate(cfg, ds, np.random.default_rng(run_seeds(cfg)[0])))


def test_the_default_aggregator_is_the_clear_float_sum() -> None:
    cfg = CONFIG.resolved()
    agg = MethodRunner("ULDP-AVG", _federation(cfg), round_hyper(cfg)).aggregator
    assert isinstance(agg, FloatAggregator) and agg.clip == math.inf


def test_secagg_releases_the_clear_sum_up_to_the_encoding() -> None:
    clear = run_uldp(CONFIG)
    secure = run_uldp(CONFIG.with_overrides(secagg=True, update_clip=50.0, bits=48))
    # the same noise (seeded), the same users: only the fixed-point rounding differs
    torch.testing.assert_close(secure.final_params, clear.final_params, rtol=0, atol=1e-6)
    assert secure.records[-1].get("epsilon") == clear.records[-1].get("epsilon")


def test_the_secagg_server_learns_only_the_sum_over_silos() -> None:
    cfg = CONFIG.resolved()
    fed = _federation(cfg)
    servers: list[SecAggServer] = []
    agg = SecureAggregator(
        50.0, fed.num_silos, 48, 0, observer=lambda r, server: servers.append(server)
    )
    runner = MethodRunner("ULDP-AVG", fed, round_hyper(cfg), aggregator=agg)
    flat = flatten_parameters(fed.task.build_model(1))
    runner.run_round(flat, np.random.default_rng(0))
    (server,) = servers
    # everything the server can compute from what it received: the sum of all three silos
    assert server.view().components == (frozenset({0, 1, 2}),)


def test_a_silo_may_not_drop_out_of_the_sum() -> None:
    with pytest.raises(ParameterError, match="protocol_dropout: must be 0"):
        CONFIG.with_overrides(secagg=True, update_clip=1.0, protocol_dropout=0.1).validate()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"secagg": True}, "update_clip: is required with secagg"),
        ({"secagg_degree": 2}, "secagg_degree: needs secure aggregation"),
        ({"batch_policy": "atomic"}, "batch_policy: applies to FedAvg"),
        ({"update_clip": -1.0}, "update_clip: must be a finite number > 0"),
        ({"secagg": True, "update_clip": 1.0, "silos": 2}, "silos: secure aggregation needs"),
        (
            {"method": "ULDP-AVG-w", "secagg": True, "update_clip": 1.0, "secure_weighting": True},
            "secagg: the private weighting protocol",
        ),
    ],
)
def test_the_configuration_refuses_what_the_silos_cannot_honour(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ParameterError, match=message):
        CONFIG.with_overrides(**changes).validate()
