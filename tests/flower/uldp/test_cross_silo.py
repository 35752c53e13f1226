"""Cross-silo ULDP-FL over the in-process transport: the same code the Flower app runs.

Four Heart Disease silos run ULDP-AVG-w with the private weighting protocol; every round's
aggregate is compared with the same weighted sum computed in the clear in one process, the
difference being the silos' own noise. The server's whole view (every reply it received) is
checked to be Protocol 1's messages and nothing else; faults (a replay, a silent silo) are
refused with the protocol's typed errors, a server that lowers the noise bound by the silos'
policies (more lies: ``test_cross_silo_policy.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprivacy.flower.messaging.stages import Record, Stage
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.uldp.cross_silo import run_cross_silo
from fedprivacy.flower.uldp.cross_silo_reference import compare_cross_silo
from fedprivacy.flower.uldp.silo_node import SiloNode
from fedprivacy.flower.uldp.silo_policy import silo_policy
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.secagg.private_weighting.messages import MessageKind, decode_message
from fedprivacy.uldp.config import UldpConfig

SILOS = 4
ConfigFactory = Callable[..., UldpConfig]


class Recording(InProcessTransport):
    """Keeps every reply the server received (its whole view of the silos)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.view: list[tuple[Stage, int, Record]] = []

    def _exchange(
        self, stage: Stage, round_index: int, requests: dict[int, Record]
    ) -> dict[int, Record]:
        replies = super()._exchange(stage, round_index, requests)
        self.view += [(stage, u, r) for u, r in replies.items()]
        return replies


def _nodes(
    config: UldpConfig, data_dir: str, faults: dict[int, str] | None = None
) -> dict[int, SiloNode]:
    """The 4 silos, each with the policy of an operator who agrees with ``config``."""
    faults = faults or {}
    policy = silo_policy(config).with_overrides(allow_unauthenticated=True)  # no node keys
    return {s: SiloNode(s, faults.get(s, ""), data_dir, policy) for s in range(SILOS)}


def test_every_round_equals_the_in_process_sum_up_to_the_silos_noise(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    config = heart_config(data_dir=data_dir)
    transport = Recording(_nodes(config, data_dir))
    summary = run_cross_silo(config, transport, tmp_path)
    assert summary["rounds_aggregated"] == 3 and summary["rounds_aborted"] == 0
    stats = compare_cross_silo(tmp_path, data_dir)
    # sigma = 1, C = 0.1 (Heart Disease): the summed noise of the 4 silos has std 0.1
    assert stats["noise_std_expected"] == pytest.approx(0.1)
    assert stats["samples"] == 3 * 14
    # 42 draws: their RMS lies within 35 % of the std except with probability < 1e-4
    assert 0.065 < stats["deviation_std"] < 0.135
    assert stats["max_abs_error_vs_simulation"] < 6 * 0.1
    ledger = ParticipationLedger.from_csv(tmp_path / "participation.csv")
    assert ledger.matrix().sum(axis=1).tolist() == [60, 60, 60]
    # what the server received: Protocol 1's messages, and only those
    kinds = {
        Stage.SILO_KEY: {MessageKind.DH_PUBLIC_KEY},
        Stage.SILO_ROSTER: {MessageKind.SEED_SHARES},
        Stage.SILO_SEED: {MessageKind.BLINDED_HISTOGRAM},
        Stage.SILO_ROUND: {MessageKind.MASKED_UPDATE},
        Stage.HELLO: set(),
    }
    for stage, silo, reply in transport.view:
        assert set(reply) == {"message"}, (stage, silo, sorted(reply))
        if reply["message"] == b"":
            assert stage is Stage.SILO_ROSTER and silo != 0  # only silo 0 sends the seed
            continue
        msg = decode_message(reply["message"])
        assert msg.header.kind in kinds[stage] and msg.header.sender == silo


def test_tiny_noise_shows_the_protocol_itself_is_exact(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    config = heart_config(noise_multiplier=1e-6, rounds=2, data_dir=data_dir)
    run_cross_silo(config, Recording(_nodes(config, data_dir)), tmp_path)
    stats = compare_cross_silo(tmp_path, data_dir)
    # noise std 1e-7 plus the encoding's rounding (60 users x 1e-10 / 2)
    assert stats["max_abs_error_vs_simulation"] < 1e-6


def test_a_replayed_reply_is_refused_and_costs_the_round(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    config = heart_config(data_dir=data_dir)
    transport = InProcessTransport(_nodes(config, data_dir, {2: "replay@2"}))
    summary = run_cross_silo(config, transport, tmp_path)
    assert summary["rounds_aggregated"] == 2 and summary["rounds_aborted"] == 1
    (rejected,) = summary["rejected"]
    assert rejected["user"] == 2 and rejected["round"] == 2
    assert rejected["error"] == "WrongRoundError"  # round 1's masked update, sent again
    ledger = ParticipationLedger.from_csv(tmp_path / "participation.csv")
    assert ledger.matrix().sum(axis=1).tolist() == [60, 0, 60]
    # the other rounds still equal the in-process sum
    assert compare_cross_silo(tmp_path, data_dir)["samples"] == 2 * 14


def test_a_silent_silo_aborts_the_round_without_output(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    config = heart_config(rounds=2, data_dir=data_dir)
    transport = InProcessTransport(_nodes(config, data_dir), dropouts={1: {3: Stage.SILO_ROUND}})
    summary = run_cross_silo(config, transport, tmp_path)
    assert summary["rounds_aggregated"] == 1 and summary["rounds_aborted"] == 1
    assert summary["dropouts"][0]["user"] == 3
    with np.load(tmp_path / "aggregates.npz") as z:
        assert "round_0" not in z.files and "round_1" in z.files


def test_silos_refuse_a_noise_bound_below_their_policy_and_the_run_ends_with_its_report(
    data_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, heart_config: ConfigFactory
) -> None:
    import dataclasses

    from fedprivacy.flower.uldp import cross_silo
    from fedprivacy.uldp import deployment

    honest = deployment.session_parameters

    def lower_noise(cfg: UldpConfig, n_params: int, session_id: bytes) -> Any:
        p = honest(cfg, n_params, session_id)
        return dataclasses.replace(p, noise_bound=p.noise_bound / 100)

    monkeypatch.setattr(cross_silo, "session_parameters", lower_noise)
    config = heart_config(data_dir=data_dir)
    summary = run_cross_silo(config, InProcessTransport(_nodes(config, data_dir)), tmp_path)
    # the configuration sent is honest, the parameters' noise bound is not: refused by the
    # silos' own policy (before, by a comparison with the configuration the server sent)
    assert summary["rounds"] == 0 and "silo-key" in summary["setup_failed"]
    refused = summary["rejected"]
    assert sorted(e["user"] for e in refused) == list(range(SILOS))
    assert {(e["error"], e["detail"].split(":")[0]) for e in refused} == {
        ("PolicyViolationError", "noise_multiplier")
    }
    assert (tmp_path / "privacy.md").exists() and (tmp_path / "participation.csv").exists()


def test_only_the_weighted_methods_deploy(tmp_path: Path, heart_config: ConfigFactory) -> None:
    from fedprivacy.errors import ParameterError

    with pytest.raises(ParameterError, match="ULDP-AVG-w"):
        run_cross_silo(heart_config(method="ULDP-AVG"), InProcessTransport({}), tmp_path)


@pytest.mark.parametrize("method", ["ULDP-AVG-ws", "ULDP-SGD-w"])
def test_the_other_weighted_methods_deploy_too(
    method: str, data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    sampled = method.endswith("ws")
    config = heart_config(
        method=method,
        noise_multiplier=1e-6,
        rounds=2,
        data_dir=data_dir,
        **({"sampling_rate": 0.5} if sampled else {}),
    )
    summary = run_cross_silo(config, InProcessTransport(_nodes(config, data_dir)), tmp_path)
    assert summary["rounds_aggregated"] == 2
    stats = compare_cross_silo(tmp_path, data_dir)
    # the silos' noise (sigma 1e-6 times the clip) plus the encoding's rounding
    assert stats["max_abs_error_vs_simulation"] < 6 * stats["noise_std_expected"] + 1e-8
    counts = ParticipationLedger.from_csv(tmp_path / "participation.csv").matrix().sum(axis=1)
    # -ws: a Poisson sample of about half the users (unsampled ones get Enc(0) weights)
    assert all(0 < c < 60 for c in counts) if sampled else counts.tolist() == [60, 60]


def test_users_without_records_are_refused_before_any_process_starts(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    from fedprivacy.errors import ParameterError
    from fedprivacy.flower.deploy.deploy import deploy
    from fedprivacy.secagg.private_weighting import NotInvertibleError
    from fedprivacy.uldp.deployment import check_allocation

    empty = heart_config(users=160, data_dir=data_dir)  # uniform: some of the users hold nothing
    with pytest.raises(
        ParameterError, match=r"[1-9][0-9]* of 160 users hold no record in any silo"
    ):
        deploy(empty, SILOS, tmp_path / "run", data_dir=data_dir)
    assert not (tmp_path / "run").exists()  # refused before anything was started or written
    # what the check spares: Protocol 1's setup fails at 1(f) once the keys are exchanged
    with pytest.raises(NotInvertibleError, match="no records in any silo"):
        run_cross_silo(empty, InProcessTransport(_nodes(empty, data_dir)), tmp_path / "in-process")
    # the paper's Zipf allocation gives each of the 160 users a record
    check_allocation(heart_config(users=160, distribution="zipf", data_dir=data_dir))


def test_a_user_with_more_than_n_max_records_is_refused_before_the_setup(
    heart_config: ConfigFactory,
) -> None:
    """20 users share the synthetic Creditcard pool: every round would decrypt out of range."""
    from fedprivacy.errors import ParameterError
    from fedprivacy.uldp.deployment import check_allocation

    crowded = heart_config(dataset="creditcard-synthetic", users=20, silos=3)
    with pytest.raises(ParameterError, match=r"users: a user holds 1230 records .* N_max = 676"):
        check_allocation(crowded.validate().resolved())
    check_allocation(crowded.with_overrides(users=200).validate().resolved())


def test_the_deployed_run_accounts_as_the_in_process_run(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    """One accounting for both: the same noise multiplier and the same epsilon, round by round.

    The deployed server and ``run_uldp`` charge their rounds to the same accounting class
    (the in-process silos through the private weighting protocol too); a second copy of the
    accounting in the deployment would show here as a different epsilon.
    """
    import json

    from fedprivacy.uldp.run import run_uldp

    config = heart_config(data_dir=data_dir)
    summary = run_cross_silo(config, InProcessTransport(_nodes(config, data_dir)), tmp_path)
    local = run_uldp(config.with_overrides(secure_weighting=True))
    assert local.secure_weighting is not None
    nm = summary["secure_weighting"]["noise_multiplier_effective"]
    assert nm == local.secure_weighting["noise_multiplier_effective"] < config.noise_multiplier
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    rounds = [e for e in events if e.get("event") == "round"]
    assert [e["round"] for e in rounds] == [1, 2, 3]
    deployed = [summary["privacy"]["epsilon"], summary["privacy"]["epsilon_server"]]
    assert deployed == [local.records[-1].get("epsilon"), local.records[-1].get("epsilon_server")]
    assert local.records[0].get("epsilon") < local.records[-1].get(
        "epsilon"
    )  # it composes over the rounds
