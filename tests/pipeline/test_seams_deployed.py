"""The toy mechanism of ``test_seams.py`` on real Flower processes, as an operator's plugin.

A local deployment (a SuperLink, one SuperNode a user, the ServerApp, each ClientApp its own
process) whose every process imports ``toy_plugin`` (``FEDPRIVACY_PLUGINS``,
:mod:`fedprivacy.plugins`): the nodes normalise their updates and add the toy's noise inside
SecAgg. Round 0 starts from the same model on both sides, so the deployed aggregate differs
from the in-process pipeline's only by the two runs' independent noises, and from a run
without the toy by much more.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fedprivacy.fl.mechanism import MECHANISMS
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.fedavg.reference import observed_layout, simulate
from fedprivacy.plugins import PLUGINS_ENV, load_plugins

pytestmark = [
    pytest.mark.deployment,
    pytest.mark.skipif(
        importlib.util.find_spec("flwr") is None or sys.platform != "linux",
        reason="needs fedprivacy[flower] (make install installs it) on Linux",
    ),
]

HERE = Path(__file__).parent
NAME, CLIP, PARTY_STD = "test-normalise", 1.15, 0.002  # test_seams.py's toy


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every process of the deployment (and this one) imports ``toy_plugin``."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv(PLUGINS_ENV, "toy_plugin")
    monkeypatch.syspath_prepend(str(HERE))
    with MECHANISMS.restoring():
        sys.modules.pop("toy_plugin", None)
        assert load_plugins() == ("toy_plugin",)
        yield


def test_the_nodes_of_a_real_deployment_apply_the_plugins_mechanism(
    plugin: None, tmp_path: Path
) -> None:
    from fedprivacy.flower.deploy.deploy import deploy

    config = TrainConfig(users=6, per_round=4, rounds=2, dp=NAME, clip=CLIP, seed=3)
    config = config.with_overrides(
        trainer="loop", eval_every=2, secagg=True, scheme="multiround", target_privacy=2
    )
    summary = deploy(config, 6, tmp_path, tls=False, stage_timeout=120.0, timeout=600.0)
    assert summary["rounds_aggregated"] == 2 and summary["privacy"]["mechanism"] == NAME
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    trace, layout = list(np.load(tmp_path / "availability.npy")), observed_layout(events)
    with np.load(tmp_path / "aggregates.npz") as z:
        deployed = z["round_0"]
    means = simulate(config, trace, {}, layout)
    # two independent draws of at least PARTY_STD / 4 on the mean of 4 (over-provisioned: more)
    noise = float(np.std(deployed - means[0]))
    floor = math.sqrt(2) * PARTY_STD / 4
    assert 0.9 * floor < noise < 3 * floor
    plain = simulate(replace(config, dp="none", clip=None), trace, {}, layout)
    assert float(np.std(plain[0] - deployed)) > 5 * noise  # the nodes normalised the updates
