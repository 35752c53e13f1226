"""The privacy filter: no user passes its budget, under every scheme, and batches retire whole."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fedprivacy.dp.per_user import per_user_epsilons, per_user_epsilons_by_round
from fedprivacy.errors import ParameterError
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.privacy_filter import PrivacyFilter, filter_summary, max_rounds
from fedprivacy.participation.selectors import RandomSelector, make_selector
from fedprivacy.participation.units import unit_size

DELTA = 1e-5


@st.composite
def _runs(draw: st.DrawFn) -> dict[str, object]:
    scheme = draw(st.sampled_from(["random", "weighted-random", "partition", "multiround"]))
    t = draw(st.integers(2, 3))
    k = t * draw(st.integers(1, 2))
    n = k * draw(st.integers(2, 4))
    return {
        "scheme": scheme,
        "sizes": (n, k, t if scheme == "multiround" else None),
        "rounds": draw(st.integers(5, 40)),
        "budget": draw(st.floats(0.5, 6.0)),
        "z": draw(st.floats(0.8, 6.0)),
        "accountant": draw(st.sampled_from(["rdp", "pld"])),
        "available": draw(st.floats(0.6, 1.0)),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def _run(spec: dict[str, object]) -> tuple[PrivacyFilter, ParticipationLedger]:
    n, k, t = spec["sizes"]  # type: ignore[misc]
    z, budget = float(spec["z"]), float(spec["budget"])  # type: ignore[arg-type]
    assume(max_rounds(budget, z, DELTA, spec["accountant"]) >= 1)  # type: ignore[arg-type]
    ledger = ParticipationLedger(n)
    f = PrivacyFilter(
        make_selector(str(spec["scheme"]), n, k, t),
        ledger,
        budget=float(spec["budget"]),  # type: ignore[arg-type]
        noise_multiplier=float(spec["z"]),  # type: ignore[arg-type]
        delta=DELTA,
        accountant=spec["accountant"],  # type: ignore[arg-type]
    )
    rng = np.random.default_rng(int(spec["seed"]))  # type: ignore[call-overload]
    for _ in range(int(spec["rounds"])):  # type: ignore[call-overload]
        available = rng.random(n) < float(spec["available"])  # type: ignore[arg-type]
        ledger.record(f.select(available, ledger.frequency, rng))
    return f, ledger


@settings(max_examples=60, deadline=None)
@given(spec=_runs())
def test_no_user_ever_passes_the_budget_under_any_scheme(spec: dict[str, object]) -> None:
    f, ledger = _run(spec)
    eps = per_user_epsilons(
        ledger.frequency,
        float(spec["z"]),
        DELTA,
        spec["accountant"],  # type: ignore[arg-type]
    )
    assert eps.max() <= float(spec["budget"])  # type: ignore[arg-type]
    assert ledger.frequency.max() <= f.max_rounds
    for retirement in f.retirements:  # a retired user is never aggregated again
        later = ledger.matrix()[retirement.round_index :, list(retirement.users)]
        assert not later.any()
        assert ledger.frequency[list(retirement.users)].max() == f.max_rounds or f.unit > 1


def test_the_filter_charges_the_noise_really_released() -> None:
    ledger, released = ParticipationLedger(4), [4.0, 4.0, 4.0, 4.0, 2.0, 2.0, 2.0, 2.0]
    f = PrivacyFilter(
        RandomSelector(4, 4),
        ledger,
        budget=3.0,
        noise_multiplier=2.0,
        delta=DELTA,
        accountant="pld",
        round_noise=lambda: released[: ledger.rounds],
    )
    rng = np.random.default_rng(0)
    for _ in range(8):
        ledger.record(f.select(np.ones(4, dtype=bool), ledger.frequency, rng))
    # at z = 2 alone the budget holds f.max_rounds rounds; the rounds at z = 4 cost a quarter
    # each, so more go ahead, and the epsilon of what was really released stays within
    assert ledger.frequency.min() > f.max_rounds
    eps = per_user_epsilons_by_round(
        ledger.matrix().astype(bool), np.array(released[: ledger.rounds]), DELTA, "pld"
    )
    assert eps.max() <= 3.0


@settings(max_examples=30, deadline=None)
@given(spec=_runs().filter(lambda s: s["scheme"] == "multiround"))
def test_batches_retire_whole_so_t_weak_stays_at_least_t(spec: dict[str, object]) -> None:
    f, ledger = _run(spec)
    t = unit_size(f)
    for retirement in f.retirements:
        users = np.array(retirement.users)
        assert users.size % t == 0 and set(np.unique(users // t).tolist()) == set(
            (users // t).tolist()
        )
        assert all(np.sum(users // t == b) == t for b in np.unique(users // t))
    if ledger.frequency.any():
        assert audit_ledger(ledger, time_limit=30.0).t_weak.lower >= t


def test_the_filter_retires_users_and_the_run_goes_on_without_them() -> None:
    ledger = ParticipationLedger(12)
    f = PrivacyFilter(
        RandomSelector(12, 3),
        ledger,
        budget=2.0,
        noise_multiplier=2.0,
        delta=DELTA,
        accountant="pld",
    )
    rng = np.random.default_rng(1)
    for _ in range(40):
        ledger.record(f.select(np.ones(12, dtype=bool), ledger.frequency, rng))
    summary = filter_summary(f)
    assert summary["max_rounds_per_user"] == f.max_rounds == max_rounds(2.0, 2.0, DELTA, "pld")
    assert summary["users_retired"] == int((ledger.frequency >= f.max_rounds).sum()) == 12
    assert ledger.rounds == 40 and ledger.matrix()[-1].sum() == 0  # nobody left to select


def test_pld_allows_at_least_as_many_rounds_as_rdp() -> None:
    for budget in (0.5, 1.0, 4.0, 10.0):
        for z in (0.7, 2.0, 8.0):
            assert max_rounds(budget, z, DELTA, "pld") >= max_rounds(budget, z, DELTA, "rdp")


def test_bad_budgets_are_refused_by_name() -> None:
    with pytest.raises(ParameterError, match="epsilon_budget"):
        max_rounds(0.0, 1.0, DELTA, "rdp")
    with pytest.raises(ParameterError, match="epsilon_budget"):
        max_rounds(10.0, 1e6, DELTA, "rdp")  # ~4e12 rounds
    for budget, z, users, message in (
        (2.0, 2.0, 4, "holds not even one round"),
        (1.0, 1.0, 5, "ledger"),
    ):
        with pytest.raises(ParameterError, match=message):
            PrivacyFilter(
                RandomSelector(4, 2),
                ParticipationLedger(users),
                budget=budget,
                noise_multiplier=z,
                delta=DELTA,
                accountant="rdp",
            )
