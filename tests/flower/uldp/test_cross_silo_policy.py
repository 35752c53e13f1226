"""Every silo enforces its own guarantee (#28): a lying cross-silo server is refused.

The server proposes, each silo decides from its own operator's policy (here that of an operator
who agrees with the honest configuration, :func:`silo_policy`). For each lie of
:mod:`fedprivacy.flower.faults.silo_forge`, :func:`run_cross_silo` runs against the 4 Heart Disease
:class:`SiloNode` objects over the in-process transport (the code the Flower apps run): every
silo refuses with a :class:`PolicyViolationError` naming the parameter, before it loads its data
or computes anything, and the run still ends with its report. One silo's well-formed but wrong
ciphertexts abort only their round.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprivacy.errors import PolicyViolationError
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.uldp.cross_silo import run_cross_silo
from fedprivacy.flower.uldp.cross_silo_reference import compare_cross_silo
from fedprivacy.flower.uldp.silo_node import SiloNode
from fedprivacy.flower.uldp.silo_policy import silo_noise_std_of, silo_policy
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.policy import PartyPolicy
from fedprivacy.uldp.config import UldpConfig

SILOS = 4
ConfigFactory = Callable[..., UldpConfig]
#: A configuration that allows no test key: 3072-bit Paillier keys (made in 0.3 s; the silos
#: refuse at the first stage, so none of them computes with it).
STRICT = {"secure_key_bits": 3072, "insecure_test_keys": False}


def _transport(
    config: UldpConfig, data_dir: str, faults: dict[int, str] | None = None
) -> InProcessTransport:
    policy = silo_policy(config).with_overrides(allow_unauthenticated=True)  # no node keys
    faults = faults or {}
    return InProcessTransport(
        {s: SiloNode(s, faults.get(s, ""), data_dir, policy) for s in range(SILOS)}
    )


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


@pytest.mark.filterwarnings("ignore::fedprivacy.errors.WeakKeyWarning")  # the lie's 2048 bits
@pytest.mark.parametrize(
    ("forge", "honest", "named", "why"),
    [
        ("sigma=1e-6", {}, ["noise_multiplier"], "noise multiplier 1e-06 requested"),
        ("clip=1.0", {}, ["clip"], "clip 1 requested; this party clips at 0.1"),
        ("key_bits=2048", STRICT, ["key_bits"], "2048 bits is below this party's minimum 3072"),
        ("key_bits=1024", STRICT, ["key_bits"], "a 1024-bit test key was proposed"),
        ("test_key=1", STRICT, ["key_bits"], "a 3072-bit test key was proposed"),
        ("modulus=1024", STRICT, ["key_bits"], "the Paillier modulus received has 1024 bits"),
        # the lie: sigma 1e-6, clip 1.0 instead of 0.1, a 1024-bit test key
        (
            "sigma=1e-6,clip=1.0,key_bits=1024",
            STRICT,
            ["noise_multiplier", "clip", "key_bits"],
            "a 1024-bit test key was proposed",
        ),
    ],
)
def test_every_silo_refuses_a_weaker_proposal_naming_the_parameter(
    forge: str,
    honest: dict[str, object],
    named: list[str],
    why: str,
    data_dir: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    heart_config: ConfigFactory,
) -> None:
    from fedprivacy.uldp import deployment

    def no_data(*args: object) -> None:
        raise AssertionError("a silo loaded its data before checking the proposal")

    monkeypatch.setattr(deployment, "silo_side", no_data)
    config = heart_config(rounds=1, data_dir=data_dir, **honest)
    transport = _transport(config, data_dir)
    with caplog.at_level(logging.WARNING, logger="fedprivacy.silo"):
        summary = run_cross_silo(config, transport, tmp_path, forge=forge)
    # the run ends with its report: no round, nobody charged, why in the summary
    assert summary["rounds"] == summary["rounds_aggregated"] == 0
    assert "silo-key" in summary["setup_failed"]
    assert summary["privacy"]["epsilon"] == 0.0
    assert ParticipationLedger.from_csv(tmp_path / "participation.csv").rounds == 0
    assert "no round ran" in (tmp_path / "privacy.md").read_text().lower()
    # every silo refused, naming the parameter(s), and kept nothing
    refused = [e for e in _events(tmp_path) if e["event"] == "node_refused"]
    assert sorted(e["user"] for e in refused) == list(range(SILOS))
    for e in refused:
        assert (e["stage"], e["error"]) == ("silo-key", "PolicyViolationError")
        assert e["detail"].startswith(f"{named[0]}:") and why in e["detail"]
        assert all(f"{name}:" in e["detail"] for name in named)
    assert all(state == {} for state in transport.states.values())
    # each silo's own log names the parameter
    logged = [r.getMessage() for r in caplog.records if r.name == "fedprivacy.silo"]
    assert sorted(m.split(" ")[1] for m in logged) == [str(s) for s in range(SILOS)]
    assert all(f"refuses the server's proposal: {named[0]}:" in m for m in logged)


def test_a_round_asked_again_in_a_new_session_is_refused_and_the_run_goes_on(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    config = heart_config(rounds=3, data_dir=data_dir)
    summary = run_cross_silo(config, _transport(config, data_dir), tmp_path, forge="round=1")
    events = _events(tmp_path)
    # in round 2's slot the server set up a second session (fresh keys and masks) and asked
    # round 1 again, with round 1's model, minibatch seed and sample: every silo refused
    keys = [e for e in events if e.get("event") == "stage" and e["stage"] == "silo-key"]
    assert [e["answered"] for e in keys] == [SILOS, SILOS]
    refused = summary["rejected"]
    assert [(e["user"], e["round"], e["stage"]) for e in refused] == [
        (s, 2, "silo-round") for s in range(SILOS)
    ]
    assert all(
        e["detail"].startswith("model: this party already trained on this model in round 1")
        for e in refused
    )
    assert summary["rounds_aggregated"] == 2 and summary["rounds_aborted"] == 1
    ledger = ParticipationLedger.from_csv(tmp_path / "participation.csv")
    assert ledger.matrix().sum(axis=1).tolist() == [60, 0, 60]
    # round 3 ran in the new session and still equals the in-process sum up to the noise
    stats = compare_cross_silo(tmp_path, data_dir)
    assert stats["samples"] == 2 * 14 and stats["max_abs_error_vs_simulation"] < 6 * 0.1


def test_one_silos_wrong_ciphertexts_abort_only_their_round(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    from fedprivacy.dp.accounting import PrivacyAccountant

    config = heart_config(rounds=3, data_dir=data_dir)
    transport = _transport(config, data_dir, {1: "garbage@2"})
    summary = run_cross_silo(config, transport, tmp_path)
    # round 2 decrypts out of range: aborted without output, the run goes on to round 3
    (bad,) = summary["aggregates_rejected"]
    assert (bad["round"], bad["error"]) == (2, "AggregateOutOfRangeError")
    assert summary["rounds"] == 3 and summary["rounds_aggregated"] == 2
    assert summary["rounds_aborted"] == 1 and summary["rejected"] == []
    (aborted,) = [e for e in _events(tmp_path) if e.get("event") == "round" and e["aborted"]]
    assert aborted["round"] == 2 and aborted["aggregated"] == []
    ledger = ParticipationLedger.from_csv(tmp_path / "participation.csv")
    assert ledger.matrix().sum(axis=1).tolist() == [60, 0, 60]
    with np.load(tmp_path / "aggregates.npz") as z:
        assert "round_1" not in z.files and {"round_0", "round_2"} <= set(z.files)
    # charged for the two released rounds only (every user is in every round: q = 1)
    p = summary["privacy"]
    nm = summary["secure_weighting"]["noise_multiplier_effective"]
    two = PrivacyAccountant("rdp").compose_gaussian(nm, 2, 1.0)
    assert p["epsilon_server"] == pytest.approx(two.epsilon(p["delta"]), rel=1e-9)
    assert compare_cross_silo(tmp_path, data_dir)["samples"] == 2 * 14


def test_a_silo_without_a_noise_floor_takes_part_in_nothing(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    config = heart_config(rounds=1, data_dir=data_dir)
    nodes = {s: SiloNode(s, "", data_dir) for s in range(SILOS)}  # the default policy
    summary = run_cross_silo(config, InProcessTransport(nodes), tmp_path)
    assert summary["rounds"] == 0
    details = [e["detail"] for e in summary["rejected"]]
    assert len(details) == SILOS
    assert all(d.startswith("noise_multiplier: this silo's policy sets no noise") for d in details)
    # and the default refuses the 1024-bit test keys of this configuration too, and a session
    # without node authentication
    assert all("key_bits: a 1024-bit test key was proposed" in d for d in details)
    assert all("allow_unauthenticated: a secure round without node auth" in d for d in details)


def test_a_silo_policy_for_the_readme_and_test_runs_accepts_their_test_keys(
    heart_config: ConfigFactory,
) -> None:
    from fedprivacy.flower.uldp.silo_policy import check_proposal

    config = heart_config().resolved()
    policy = silo_policy(config)
    assert (policy.min_key_bits, policy.allow_test_keys) == (1024, True)
    with pytest.raises(PolicyViolationError, match="allow_unauthenticated"):  # no node key
        check_proposal(policy, config)
    policy = policy.with_overrides(allow_unauthenticated=True)
    check_proposal(policy, config)
    # a floor above the configuration's sigma is refused; the noise is never below the floor
    stricter = PartyPolicy(noise_multiplier=2.0, clip=0.1)
    with pytest.raises(PolicyViolationError, match="noise_multiplier: noise multiplier 1 req"):
        check_proposal(stricter, config)
    assert silo_noise_std_of(policy, config) == pytest.approx(1.0 * 0.1 / 2)
    assert silo_noise_std_of(stricter, config) == pytest.approx(2.0 * 0.1 / 2)


def test_a_silo_stops_answering_at_its_epsilon_budget(
    data_dir: str, tmp_path: Path, heart_config: ConfigFactory
) -> None:
    """Every round a silo answers counts for all its users (it does not see the sample)."""
    from fedprivacy.dp.accounting import epsilon_for

    config = heart_config(rounds=3, data_dir=data_dir)
    one, two = (epsilon_for(config.noise_multiplier, k, config.delta) for k in (1, 2))
    policy = silo_policy(config).with_overrides(
        epsilon_budget=(one + two) / 2, delta=config.delta, allow_unauthenticated=True
    )
    nodes = {s: SiloNode(s, "", data_dir, policy) for s in range(SILOS)}
    summary = run_cross_silo(config, InProcessTransport(nodes), tmp_path)
    assert summary["rounds_aggregated"] == 1 and summary["rounds_aborted"] == 2
    refused = [e for e in _events(tmp_path) if e.get("event") == "node_refused"]
    assert {(e["round"], e["user"]) for e in refused} == {(r, s) for r in (2, 3) for s in range(4)}
    assert {e["detail"].split(":")[0] for e in refused} == {"epsilon_budget"}
    ledger = ParticipationLedger.from_csv(tmp_path / "participation.csv")
    assert ledger.matrix().sum(axis=1).tolist() == [60, 0, 0]  # the refused rounds: nobody


def test_a_silo_refuses_a_proposal_whose_noise_the_server_would_add() -> None:
    """A lying server proposing ``dp = central`` ("I add the noise") is refused by every silo."""
    from fedprivacy.errors import ParameterError
    from fedprivacy.flower.uldp.silo_policy import proposed_config

    config = UldpConfig(
        dataset="creditcard-synthetic",
        method="ULDP-AVG-w",
        users=6,
        silos=2,
        dp="central",
        secure_key_bits=1024,
        insecure_test_keys=True,
    )
    with pytest.raises(ParameterError) as err:
        proposed_config(config.to_toml())
    assert err.value.name == "dp"
    assert proposed_config(config.with_overrides(dp="distributed").to_toml()).dp == "distributed"
