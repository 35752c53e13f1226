"""The released-model figures of a privacy report, from the ledger and each round's noise.

:func:`ledger_figures` gives every user's epsilon over the rounds it was aggregated in (the
server's number), the released models' observers' number (a hidden Poisson sample, or the secret
batches of Multi-RoundSecAgg: :mod:`fedprivacy.dp.allocation`), the noise really released and the
wrap-around bound; :func:`fedprivacy.report.privacy_report` puts them into the report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.accountants import AccountantKind
from fedprivacy.dp.accounting import epsilon_for
from fedprivacy.dp.allocation import AllocationSchedule, allocation_epsilon
from fedprivacy.dp.per_user import per_user_epsilons, per_user_epsilons_by_round, spread
from fedprivacy.errors import ParameterError
from fedprivacy.fl.mechanism import Mechanism
from fedprivacy.report_inputs import LedgerEpsilons, Method

__all__ = ["ALLOCATION_SAMPLES", "Released", "ledger_figures"]


@dataclass(frozen=True)
class Released:
    """The released-model figures of a report (all None without DP)."""

    epsilon: float | None = None
    epsilon_server: float | None = None
    per_user: dict[str, float] | None = None
    accounted: dict[str, float] | None = None
    wrap: float | None = None
    per_user_rdp: dict[str, float] | None = None


def _per_user(
    participation: NDArray[np.bool_], noise: NDArray[np.float64], delta: float, kind: AccountantKind
) -> NDArray[np.float64]:
    """Each user's epsilon, from its count where every release has the same noise.

    As a run's own per-round accounting composes it; else round by round.
    """
    finite = noise[np.isfinite(noise)]
    uniform = finite.size and np.all(finite == finite[0])
    if uniform and np.all(np.isfinite(noise[participation.any(axis=1)])):
        return per_user_epsilons(participation.sum(axis=0), float(finite[0]), delta, kind)
    return per_user_epsilons_by_round(participation, noise, delta, kind)


def ledger_figures(
    ledger: LedgerEpsilons, mechanism: Mechanism | Method, noise: float, delta: float
) -> Released:
    """Each user's epsilon over the rounds it was aggregated in, and the noise really released.

    A mechanism whose parties add the noise inside aggregation (distributed DP) is accounted
    round by round, with each release's own noise multiplier; its epsilon also holds against
    the server. Otherwise every release has ``noise``. A hidden Poisson sample
    (``ledger.sampling_rate``) amplifies the released models' epsilon; ULDP-GROUP-k's group
    privacy gives every user the same.
    """
    g = ledger.group_epsilon
    if g is not None:
        return Released(g, g, dict.fromkeys(("min", "median", "max"), g))
    by_round = mechanism.adds_noise_in_aggregation
    used = ledger.participation.any(axis=1)
    if by_round:
        if ledger.round_noise is None:
            raise ParameterError(
                "round_noise", f"the {mechanism.name} mechanism is accounted round by round"
            )
        noise_of_round = ledger.round_noise
    else:
        noise_of_round = np.where(used, noise, np.nan)
    released = noise_of_round[np.isfinite(noise_of_round)]
    users = ledger.participation[:, : ledger.users]  # the canaries are nobody's epsilon
    eps, rdp = (
        _per_user(users, noise_of_round, delta, kind) for kind in (mechanism.accountant, "rdp")
    )
    per_user = spread(eps)
    releases = released if ledger.round_noise is None else ledger.round_noise
    epsilon = _amplified(ledger.sampling_rate, releases, mechanism.accountant, delta)
    if ledger.batches is not None:
        epsilon = _allocated(ledger.participation, ledger.batches, noise_of_round, delta)
    if epsilon is None:
        epsilon = per_user["max"]
    elif not by_round:  # no guarantee against the server: the released models' is the figure
        per_user = dict.fromkeys(per_user, epsilon)
    accounted = None
    if released.size:
        accounted = {"min": float(released.min()), "max": float(released.max())}
    wrap = None
    logs = ledger.wrap_log_probability
    if logs is not None and np.any(np.isfinite(logs)):
        wrap = float(np.logaddexp.reduce(logs[np.isfinite(logs)]) / np.log(10.0))
    return Released(
        epsilon,
        per_user["max"] if by_round else None,
        per_user,
        accounted,
        wrap,
        None if mechanism.accountant == "rdp" else spread(rdp),
    )


def _amplified(
    q: float | None, noise: NDArray[np.float64], kind: AccountantKind, delta: float
) -> float | None:
    """The sub-sampled mechanism over the released rounds (None: no hidden sample).

    ``noise`` has an entry per round, NaN where nothing was released; the least noise of any
    release stands for all (they are equal where it applies).
    """
    if q is None:
        return None
    released = noise[np.isfinite(noise)]
    if not released.size:
        return 0.0
    return epsilon_for(float(released.min()), released.size, delta, q, kind)


def _allocated(
    participation: NDArray[np.bool_],
    batches: NDArray[np.intp],
    noise: NDArray[np.float64],
    delta: float,
) -> float:
    """Random allocation over the batch schedule of the released rounds (the same for all).

    A batch runs in a round when any of its users was aggregated in it (with dropouts inside
    the protocol a user may miss some of its batch's rounds: counting them all only adds to its
    epsilon). The Monte Carlo draws are seeded, so a report is reproducible.
    """
    rounds = np.isfinite(noise) & participation.any(axis=1)
    if not rounds.any():
        return 0.0
    runs = np.asarray(participation[rounds][:, batches].any(axis=2), dtype=bool)
    schedule = AllocationSchedule(runs, noise[rounds])
    return allocation_epsilon(schedule, delta, samples=ALLOCATION_SAMPLES, seed=0).epsilon


#: Monte Carlo draws of a report's random-allocation epsilon (about 1 % relative error).
ALLOCATION_SAMPLES = 200_000
