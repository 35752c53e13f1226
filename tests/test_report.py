"""The privacy report of a run: both adversaries' figures, from the ledger and the mechanism."""

from __future__ import annotations

import csv
import json

import dp_accounting
import numpy as np
import pytest

from fedprivacy.cli.main import main
from fedprivacy.dp.accounting import epsilon_for
from fedprivacy.dp.per_user import per_user_epsilons, spread
from fedprivacy.errors import ParameterError
from fedprivacy.fl.mechanism import CentralGaussian, DistributedDiscreteGaussian, NoMechanism
from fedprivacy.participation.privacy import TWeakResult
from fedprivacy.report import (
    GROUP_PRIVACY,
    NO_DP,
    PER_USER_EPSILON,
    VIEW_CAVEATS,
    LedgerEpsilons,
    Method,
    privacy_report,
)

#: Users 0 and 1 aggregated in rounds 0-1 and 0, user 2 never.
LEDGER = LedgerEpsilons(np.array([[1, 1, 0], [1, 0, 0]], dtype=bool))


def test_without_dp_the_report_claims_no_guarantee() -> None:
    r = privacy_report(NoMechanism(), 1e-5, LEDGER, aggregation="plaintext")
    assert r.epsilon is None and r.per_user_epsilon is None and r.delta is None
    assert r.caveats == (*VIEW_CAVEATS["plaintext"], NO_DP)
    assert "no formal guarantee" in NO_DP
    assert "No differential privacy" in r.to_markdown()
    assert r.t_weak is None and "Not computed" in r.to_markdown()


def test_train_with_central_dp_reports_per_user_epsilon_from_the_ledger(capsys, tmp_path):  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    args = ["train", "-N", "10", "-K", "4", "-R", "4", "--dp", "central"]
    args += ["--noise-multiplier", "1.2", "--clip", "0.5", "--json", "--out", str(run)]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    privacy = out["privacy"]
    for key in (
        "t_weak",
        "t_strong",
        "exposed_users",
        "epsilon",
        "delta",
        "per_user_epsilon",
        "mechanism",
        "accountant",
    ):
        assert key in privacy
    assert privacy["mechanism"] == "central" and privacy["delta"] == 1e-5
    assert privacy["epsilon_server"] is None  # the server adds the noise: no guarantee against it
    assert set(privacy["t_weak"]) == {"lower", "upper", "exact"}
    counts = np.loadtxt(run / "participation.csv", delimiter=",", skiprows=1).sum(axis=0)
    eps = per_user_epsilons(counts.astype(np.int64), 1.2, 1e-5, "pld")
    rdp = per_user_epsilons(counts.astype(np.int64), 1.2, 1e-5, "rdp")
    assert privacy["accountant"] == "pld"  # central noise is a continuous Gaussian: exact PLD
    assert privacy["per_user_epsilon"]["max"] == privacy["epsilon"]
    assert privacy["epsilon"] == pytest.approx(float(eps.max()), rel=1e-12)
    assert privacy["epsilon"] < float(rdp.max())
    assert privacy["per_user_epsilon"]["median"] == pytest.approx(np.median(eps), rel=1e-12)
    assert privacy["per_user_epsilon_rdp"]["max"] == pytest.approx(rdp.max(), rel=1e-12)
    text = (run / "privacy.md").read_text()
    assert f"by RDP instead of the exact PLD: min 0, median {np.median(rdp):.3g}" in text
    assert "per user: min" in text and "(largest per user)" not in text
    assert f"Epsilon {privacy['epsilon']:.3g} at delta" in text  # the plain-words sentence
    assert (run / "privacy.png").is_file()  # every DP run plots its privacy
    assert "noise multiplier of the released aggregates: 1.2\n" in text  # once, not "1.2 to 1.2"


def test_dp_flags_without_a_mechanism_name_the_flag(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["train", "--noise-multiplier", "1", "-q"]) == 2
    assert "--noise-multiplier:" in capsys.readouterr().err
    assert main(["train", "--dp", "central", "-q"]) == 2
    assert "--noise-multiplier:" in capsys.readouterr().err
    assert main(["train", "--delta", "1e-6", "-q"]) == 2
    assert "--delta:" in capsys.readouterr().err


def test_central_report_against_secure_aggregation_states_who_sees_what() -> None:
    mechanism = CentralGaussian(noise_multiplier=2.0, clip=1.0)
    r = privacy_report(
        mechanism,
        1e-6,
        LedgerEpsilons(np.ones((3, 2), dtype=bool)),
        aggregation="secagg",
        server_view={"t_weak": TWeakResult(lower=2, upper=3), "t_strong": 2, "exposed_users": 0},
    )
    assert r.per_user_epsilon is not None and r.per_user_epsilon["min"] == r.epsilon
    assert r.epsilon == float(per_user_epsilons([3], 2.0, 1e-6, "pld")[0])
    assert r.caveats == (*VIEW_CAVEATS["secagg"], PER_USER_EPSILON, mechanism.who_sees_what)
    text = " ".join(r.caveats)
    assert "one round" in text and "noise-free sum" in text
    assert r.t_weak == {"lower": 2, "upper": 3, "exact": False}
    assert "T_weak in [2, 3] (certified interval)" in r.to_markdown()


def test_noise_added_in_aggregation_is_accounted_round_by_round() -> None:
    mechanism = DistributedDiscreteGaussian(noise_multiplier=1.0, clip=1.0)
    with pytest.raises(ParameterError, match="round_noise"):
        privacy_report(mechanism, 1e-5, LEDGER, aggregation="secagg")
    ledger = LedgerEpsilons(
        LEDGER.participation,
        round_noise=np.array([1.5, 1.2]),
        wrap_log_probability=np.array([np.log(1e-50), np.nan]),
    )
    r = privacy_report(mechanism, 1e-5, ledger, aggregation="secagg")
    assert r.accounted_noise_multiplier == {"min": 1.2, "max": 1.5}
    assert r.wrap_around_log10_bound == pytest.approx(-50)
    assert r.epsilon_server == r.epsilon  # the noise is in every sum the server can compute
    assert r.per_user_epsilon is not None and r.per_user_epsilon["min"] == 0.0


def test_a_hidden_poisson_sample_amplifies_only_the_released_models_epsilon() -> None:
    """ULDP-FL's -s methods: the same ledger path, the released models' epsilon sub-sampled."""
    participation = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 0, 0]], dtype=bool)
    noise = np.array([5.0, 5.0, 5.0, np.nan])  # round 3 released an empty sample, 4 aborted
    view = {"t_weak": {"lower": 4, "upper": 4, "exact": True}, "t_strong": 2, "exposed_users": 0}
    method = Method("ULDP-AVG-s", 5.0, 0.5, adds_noise_in_aggregation=True)
    ledger = LedgerEpsilons(participation[:3], noise[:3], sampling_rate=0.2)
    r = privacy_report(method, 1e-5, ledger, aggregation="silo-sum", server_view=view)
    counts = per_user_epsilons([2, 1, 0], 5.0, 1e-5)
    assert r.per_user_epsilon == spread(counts) and r.epsilon == r.epsilon_server == counts[0]
    # three released rounds at rate 0.2, the empty one included
    assert r.epsilon_released == epsilon_for(5.0, 3, 1e-5, 0.2) < r.epsilon
    assert "server" in str(r.epsilon_adversary)
    assert (r.mechanism, r.accounted_noise_multiplier) == ("ULDP-AVG-s", {"min": 5.0, "max": 5.0})
    with pytest.raises(ParameterError, match="every round with aggregated users"):
        privacy_report(method, 1e-5, LedgerEpsilons(participation, noise), aggregation="silo-sum")
    # the server adds the noise: the amplified epsilon is every user's figure, none against it
    central = Method("ULDP-AVG-s", 5.0, 0.5)
    r = privacy_report(central, 1e-5, ledger, aggregation="silo-sum")
    assert r.epsilon_server is None and r.per_user_epsilon == dict.fromkeys(
        ("min", "median", "max"), epsilon_for(5.0, 3, 1e-5, 0.2)
    )


def test_group_privacy_gives_every_user_its_own_rule_and_no_dp_none() -> None:
    group = LedgerEpsilons(np.ones((2, 3), dtype=bool), np.full(2, np.nan), group_epsilon=1.5)
    method = Method("ULDP-GROUP-2", 5.0, 1.0, adds_noise_in_aggregation=True)
    r = privacy_report(method, 1e-5, group, aggregation="silo-sum", caveats=("B.",))
    assert r.per_user_epsilon == {"min": 1.5, "median": 1.5, "max": 1.5}
    assert r.epsilon == r.epsilon_released == r.epsilon_server == 1.5
    assert r.caveats == (*VIEW_CAVEATS["silo-sum"], GROUP_PRIVACY, "B.")
    default = privacy_report(
        Method("DEFAULT", None, 1.0), 1e-5, group, aggregation="silo-sum", caveats=("C.",)
    )
    assert default.epsilon is None and default.delta is None and default.noise_multiplier is None
    assert default.clip == 1.0  # the method's clip is reported even without DP
    assert default.caveats == (*VIEW_CAVEATS["silo-sum"], NO_DP, "C.")


def test_train_with_distributed_dp_accounts_the_noise_really_aggregated(capsys, tmp_path):  # type: ignore[no-untyped-def]
    """Redone from the run's files: the ledger and each round's noise multiplier."""
    run = tmp_path / "run"
    args = ["train", "-N", "8", "-K", "4", "-R", "3", "--secagg", "--dp", "distributed"]
    args += ["--noise-multiplier", "0.9", "--json", "--out", str(run), "--metrics", "none"]
    assert main(args) == 0
    privacy = json.loads(capsys.readouterr().out)["privacy"]
    assert privacy["mechanism"] == "distributed" and privacy["noise_multiplier"] == 0.9
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    noise = [float(r["noise_multiplier"] or "nan") for r in rows]  # empty: nothing aggregated
    released = [z for z, r in zip(noise, rows, strict=True) if int(r["aggregated"])]
    assert released and all(np.isfinite(released))
    assert min(released) >= 0.9  # over-provisioned: never below the target
    assert privacy["accounted_noise_multiplier"] == {"min": min(released), "max": max(released)}
    ledger = np.loadtxt(run / "participation.csv", delimiter=",", skiprows=1).astype(bool)
    eps = []
    for u in range(ledger.shape[1]):
        accountant = dp_accounting.rdp.RdpAccountant()
        for t in np.flatnonzero(ledger[:, u]):
            accountant.compose(dp_accounting.GaussianDpEvent(noise[t]))
        eps.append(float(accountant.get_epsilon(1e-5)) if ledger[:, u].any() else 0.0)
    assert privacy["epsilon"] == pytest.approx(max(eps), rel=1e-9)
    assert privacy["per_user_epsilon"]["median"] == pytest.approx(float(np.median(eps)), rel=1e-9)
    assert privacy["wrap_around_log10_bound"] < -40
    assert privacy["epsilon_server"] == privacy["epsilon"]  # the noise is in all it can compute
    text = (run / "privacy.md").read_text()
    assert "Distributed DP" in text and "wrapped around the modulus" in text
    assert max(released) > 0.9  # over-provisioned, and explained where it appears:
    assert "above the 0.9 requested: each party adds enough noise" in text


def test_a_secret_batch_lowers_only_the_models_observers_epsilon() -> None:
    """Multi-RoundSecAgg: random allocation over the batch schedule, for the models' observers."""
    from fedprivacy.dp.allocation import AllocationSchedule, allocation_epsilon
    from fedprivacy.participation.selectors import make_selector
    from fedprivacy.report_inputs import HIDDEN_BATCH, hidden_selection

    selector = make_selector("multiround", 8, 4, 2)
    hidden = hidden_selection(selector, fairness=False, everyone_available=False)
    assert hidden.batches is not None and hidden.caveat == HIDDEN_BATCH
    rng = np.random.default_rng(0)
    participation = np.zeros((6, 8), dtype=bool)
    for t in range(6):
        participation[t, selector.select(np.ones(8, bool), np.zeros(8, np.int64), rng)] = True
    noise = np.full(6, 1.5)
    ledger = LedgerEpsilons(participation, round_noise=noise, batches=hidden.batches)
    mechanism = DistributedDiscreteGaussian(noise_multiplier=1.5, clip=1.0)
    r = privacy_report(mechanism, 1e-5, ledger, aggregation="secagg")
    assert r.epsilon_released is not None and r.epsilon_server is not None
    assert r.epsilon_released < r.epsilon_server == r.epsilon
    runs = participation[:, hidden.batches].any(axis=2)
    expected = allocation_epsilon(AllocationSchedule(runs, noise), 1e-5, samples=200_000, seed=0)
    assert r.epsilon_released == expected.epsilon
    assert "against anyone who sees only the released models" in r.to_markdown()
    # the fairness rule picks by participation: no amplification, and the report says why
    fair = hidden_selection(make_selector("multiround", 8, 4, 2, True), True, True)
    assert fair.batches is None and "fairness rule" in fair.caveat


def test_a_hidden_uniform_selection_is_the_sub_sampled_gaussian_of_dp_accounting() -> None:
    """Random selection, everyone available: K of N a round; the same as dp-accounting's PLD."""
    from fedprivacy.participation.selectors import make_selector
    from fedprivacy.report_inputs import HIDDEN_SAMPLE, hidden_selection

    hidden = hidden_selection(make_selector("random", 40, 10), False, True)
    assert hidden.sampling_rate == 0.25 and hidden.caveat == HIDDEN_SAMPLE
    participation = np.zeros((30, 40), dtype=bool)
    participation[:, :10] = True  # who was selected does not matter to the models' observers
    ledger = LedgerEpsilons(participation, sampling_rate=hidden.sampling_rate)
    r = privacy_report(CentralGaussian(2.0, 1.0), 1e-5, ledger, aggregation="plaintext")
    accountant = dp_accounting.pld.PLDAccountant()
    event = dp_accounting.PoissonSampledDpEvent(0.25, dp_accounting.GaussianDpEvent(2.0))
    accountant.compose(event, 30)
    assert r.epsilon == pytest.approx(accountant.get_epsilon(1e-5), rel=0.01)
    assert r.epsilon_server is None  # central: the server adds the noise itself
    hidden = hidden_selection(make_selector("random", 40, 10), False, False)
    assert hidden.sampling_rate is None and "availability" in hidden.caveat


def test_a_wrapped_selection_hides_what_its_scheme_hides() -> None:
    """A privacy filter (an epsilon budget) picks among the scheme's choices: same batches."""
    from fedprivacy.participation.ledger import ParticipationLedger
    from fedprivacy.participation.privacy_filter import PrivacyFilter
    from fedprivacy.participation.selectors import make_selector
    from fedprivacy.report_inputs import hidden_selection

    inner = make_selector("multiround", 8, 4, 2)
    wrapped = PrivacyFilter(
        inner,
        ParticipationLedger(8),
        budget=15.0,
        noise_multiplier=1.0,
        delta=1e-5,
        accountant="pld",
    )
    hidden = hidden_selection(wrapped, False, True)
    assert hidden.batches is not None and np.array_equal(hidden.batches, inner.units)


def test_the_sampled_epsilon_matches_a_simulation_of_the_uniform_selection() -> None:
    """Independently of dp-accounting: K of N a round, simulated, at the report's epsilon.

    The report's epsilon at delta 1e-3 (dp-accounting's PLD of the sub-sampled Gaussian, an
    upper bound on its grid) is where a plain simulation of the mechanism (a uniform K-subset a
    round, the user in it or not, the Gaussian released; the privacy loss from the mixture's
    densities round by round) reaches delta 1e-3, within 5 % (below it: the PLD is pessimistic).
    """
    users, k, rounds, z = 40, 10, 30, 2.0
    participation = np.zeros((rounds, users), dtype=bool)
    participation[:, :k] = True
    ledger = LedgerEpsilons(participation, sampling_rate=k / users)
    eps = privacy_report(CentralGaussian(z, 1.0), 1e-3, ledger, aggregation="plaintext").epsilon
    assert eps is not None
    rng = np.random.default_rng(5)
    q, n, deltas = k / users, 400_000, []
    for present in (True, False):
        # a uniform K-subset of N holds the user with probability K / N, independently of the
        # other rounds' subsets (the worst case: the others' updates are all alike)
        inside = rng.random((n, rounds)) < q if present else np.zeros((n, rounds), dtype=bool)
        y = inside + z * rng.standard_normal((n, rounds))
        per_round = np.logaddexp(np.log1p(-q), np.log(q) + (y - 0.5) / z**2)
        loss = per_round.sum(axis=1) * (1 if present else -1)
        deltas.append(float(np.maximum(0.0, -np.expm1(eps - loss)).mean()))
    assert 0.95e-3 < max(deltas) <= 1.01e-3
