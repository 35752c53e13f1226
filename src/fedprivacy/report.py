"""One privacy report for a federated run: what the server's view reveals, and the released model.

Two adversaries, two kinds of figures:

* **the server's view** (from the ledger of the aggregates it unmasked): ``T_weak`` (the fewest
  users in any combination of aggregates it can compute), ``T_strong`` and the users whose
  individual update it can compute exactly;
* **the released models** (anyone who sees the global model after every round): per-user
  ``(epsilon, delta)`` of the DP mechanism, each user composing only the rounds it was aggregated
  in (:func:`fedprivacy.dp.per_user.per_user_epsilons`), and the caveats that bound both claims.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.per_user import per_user_epsilons, per_user_epsilons_by_round, spread
from fedprivacy.errors import ParameterError
from fedprivacy.fl.mechanism import MECHANISMS, Mechanism
from fedprivacy.participation.privacy import TWeakResult

__all__ = ["PrivacyReport", "privacy_report", "uldp_privacy_report"]

ACCOUNTANT: Final = "rdp"


@dataclass(frozen=True)
class PrivacyReport:
    """The ``privacy`` object of ``--json`` and ``privacy.md`` of a run directory.

    Attributes
    ----------
    t_weak : dict or None
        ``{"lower", "upper", "exact"}`` of the whole ledger (None when not computed).
    t_strong : int or None
        Strong multi-round privacy of the ledger.
    exposed_users : int or None
        Users whose individual update the server can compute.
    mechanism, accountant : str
        The DP mechanism (``none``, ``central``) and the accountant composing it.
    noise_multiplier, clip, delta : float or None
        Its parameters (None without DP).
    epsilon : float or None
        The largest per-user epsilon (None without DP: no guarantee).
    epsilon_server : float or None
        The largest per-user epsilon against the server, from everything it received (None: no
        guarantee against it, e.g. central DP, where it adds the noise itself).
    per_user_epsilon : dict or None
        ``{"min", "median", "max"}`` over the users (never-aggregated users count as 0).
    accounted_noise_multiplier : dict or None
        ``{"min", "max"}`` over the released aggregates of the noise multiplier the accountant
        used (distributed DP: the noise really present, at least ``noise_multiplier``).
    wrap_around_log10_bound : float or None
        Distributed DP: ``log10`` of a bound on the probability that any noisy sum of the run
        wrapped around the modulus.
    caveats : tuple of str
        What the figures assume.
    """

    t_weak: dict[str, object] | None
    t_strong: int | None
    exposed_users: int | None
    mechanism: str
    accountant: str | None
    noise_multiplier: float | None
    clip: float | None
    delta: float | None
    epsilon: float | None
    epsilon_server: float | None
    per_user_epsilon: dict[str, float] | None
    accounted_noise_multiplier: dict[str, float] | None
    wrap_around_log10_bound: float | None
    caveats: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form (the attributes, caveats as a list)."""
        return {**asdict(self), "caveats": list(self.caveats)}

    def to_markdown(self) -> str:
        """``privacy.md``: both adversaries' figures and the caveats."""
        tw = self.t_weak
        if tw is None:
            t_text = "not computed (metrics = none)"
        elif tw["exact"]:
            t_text = str(tw["upper"])
        else:
            t_text = f"between {tw['lower']} and {tw['upper']} (certified interval)"
        lines = [
            "# Privacy report",
            "",
            "## What the server's view reveals (from the aggregates it unmasked)",
            "",
            f"- T_weak: {t_text}",
            f"- T_strong: {_text(self.t_strong)}",
            f"- users whose individual update the server can compute: {_text(self.exposed_users)}",
            "",
            "## What the released models reveal",
            "",
        ]
        if self.per_user_epsilon is None:
            lines.append("- no differential privacy: no formal guarantee (epsilon is infinite)")
        else:
            pu = self.per_user_epsilon
            lines += [
                f"- mechanism: {_mechanism_text(self.mechanism)}, noise "
                f"multiplier {self.noise_multiplier},"
                f" clip {self.clip} (L2), accountant {self.accountant} (dp-accounting)",
                f"- per-user epsilon at delta = {self.delta}: min {pu['min']:.3g}, median "
                f"{pu['median']:.3g}, max {pu['max']:.3g}",
                "- against the server: "
                + (
                    "no guarantee (it sees the noise-free aggregate)"
                    if self.epsilon_server is None
                    else f"epsilon {self.epsilon_server:.3g}"
                ),
            ]
            nm = self.accounted_noise_multiplier
            if nm is not None:
                lines.append(
                    f"- noise multiplier of the released aggregates: {nm['min']:.4g} to "
                    f"{nm['max']:.4g}"
                )
            if self.wrap_around_log10_bound is not None:
                lines.append(
                    "- probability that a noisy sum wrapped around the modulus: at most "
                    f"10^{self.wrap_around_log10_bound:.4g}"
                )
        lines += ["", "## Caveats", ""] + [f"- {c}" for c in self.caveats]
        return "\n".join(lines) + "\n"


def _mechanism_text(name: str) -> str:
    """How the report names a mechanism: its registered description, else the name itself."""
    mechanism = MECHANISMS.get(name)
    return mechanism.description if mechanism is not None and mechanism.description else name


def _text(value: object) -> str:
    return "not computed (metrics = none)" if value is None else str(value)


def privacy_report(
    frequency: NDArray[np.int64],
    mechanism: Mechanism,
    delta: float,
    *,
    t_weak: TWeakResult | None,
    t_strong: int | None,
    exposed_users: int | None,
    secure_aggregation: bool,
    participation: NDArray[np.bool_] | None = None,
    round_noise: NDArray[np.float64] | None = None,
    wrap_log_probability: NDArray[np.float64] | None = None,
) -> PrivacyReport:
    """Assemble the report of a run from its ledger's participation counts and metrics.

    Parameters
    ----------
    frequency : ndarray of int, shape (users,)
        How many aggregates each user was in (the ledger's ``frequency``).
    mechanism : Mechanism
        The run's DP mechanism.
    delta : float
        Per-user delta of the stated epsilons.
    t_weak, t_strong, exposed_users
        The server-view metrics of the ledger (None when not computed).
    secure_aggregation : bool
        Whether the server only saw aggregates.
    participation : ndarray of bool, shape (rounds, users), optional
        The ledger's matrix; with ``round_noise``, required when the mechanism's noise varies
        between rounds (distributed DP).
    round_noise : ndarray of float, shape (rounds,), optional
        The noise multiplier of each round's released aggregate (NaN where nothing was released).
    wrap_log_probability : ndarray of float, shape (rounds,), optional
        Natural log of each round's wrap-around bound (distributed DP; NaN where none).

    Examples
    --------
    >>> from fedprivacy.fl.mechanism import CentralGaussian
    >>> r = privacy_report(np.array([3, 0, 5]), CentralGaussian(noise_multiplier=2.0, clip=1.0),
    ...                    1e-5, t_weak=None, t_strong=None, exposed_users=None,
    ...                    secure_aggregation=True)
    >>> r.epsilon == r.per_user_epsilon["max"] and r.per_user_epsilon["min"] == 0.0
    True
    """
    caveats = [
        "T_weak, T_strong and the exposed users are computed from the ledger of aggregates the "
        "server unmasked, against a server that runs the protocol as specified."
    ]
    if secure_aggregation:
        caveats.append(
            "Secure aggregation hides the individual updates of one round; what the server can "
            "combine across rounds is stated above."
        )
    else:
        caveats.append(
            "Plaintext aggregation: the server receives every individual update. The server-view "
            "figures describe what an observer of the aggregates alone learns, not the server."
        )
    noise = mechanism.noise_multiplier
    accounted: dict[str, float] | None = None
    wrap: float | None = None
    if noise is None:
        epsilons = None
        caveats.append("No differential privacy: the released models carry no formal guarantee.")
    else:
        if mechanism.adds_noise_in_aggregation:
            if participation is None or round_noise is None:
                raise ParameterError(
                    "round_noise", f"the {mechanism.name} mechanism is accounted round by round"
                )
            eps = per_user_epsilons_by_round(participation, round_noise, delta, ACCOUNTANT)
            released = round_noise[np.isfinite(round_noise)]
        else:
            eps = per_user_epsilons(frequency, noise, delta, accountant=ACCOUNTANT)
            released = np.full(1, noise) if np.any(frequency > 0) else np.empty(0)
        epsilons = spread(eps)
        if released.size:
            accounted = {"min": float(released.min()), "max": float(released.max())}
        if wrap_log_probability is not None and np.any(np.isfinite(wrap_log_probability)):
            logs = wrap_log_probability[np.isfinite(wrap_log_probability)]
            wrap = float(np.logaddexp.reduce(logs) / np.log(10.0))
        caveats.append(
            "Epsilon is per user (add or remove one user's data), composed over the rounds in "
            "which that user was really aggregated (ledger counts), without amplification by "
            "sub-sampling: the server chooses or knows who participates."
        )
        if mechanism.who_sees_what:
            caveats.append(mechanism.who_sees_what)
    tw: dict[str, object] | None = None
    if t_weak is not None:
        tw = {"lower": t_weak.lower, "upper": t_weak.upper, "exact": t_weak.exact}
    return PrivacyReport(
        t_weak=tw,
        t_strong=t_strong,
        exposed_users=exposed_users,
        mechanism=mechanism.name,
        accountant=None if noise is None else ACCOUNTANT,
        noise_multiplier=noise,
        clip=mechanism.clip,
        delta=None if noise is None else delta,
        epsilon=None if epsilons is None else epsilons["max"],
        epsilon_server=(
            None if epsilons is None or not mechanism.adds_noise_in_aggregation else epsilons["max"]
        ),
        per_user_epsilon=epsilons,
        accounted_noise_multiplier=accounted,
        wrap_around_log10_bound=wrap,
        caveats=tuple(caveats),
    )


def uldp_privacy_report(
    method: str,
    *,
    noise_multiplier: float | None,
    clip: float | None,
    delta: float,
    epsilon: float | None,
    epsilon_server: float | None,
    adversaries: dict[str, str],
    server_view: dict[str, Any] | None = None,
    scheme: str = "poisson",
    caveats: tuple[str, ...] = (),
) -> PrivacyReport:
    """The ``privacy`` object of a ULDP-FL run (``fedprivacy uldp --json``).

    The server-view figures come from the run's ledger of user samples
    (:func:`fedprivacy.uldp.algorithm.server_view`): a row per round, the users whose records
    the round aggregated. The per-user spread is against the server: each user's unsampled
    Gaussian mechanism composed over the rounds it was in (for ULDP-GROUP-k, whose accounting is
    per record group, every user gets the run's epsilon).

    Parameters
    ----------
    method : str
        The ULDP-FL method (``DEFAULT`` has no DP).
    noise_multiplier, clip : float or None
        ``sigma`` and ``C``.
    delta : float
        Delta of the epsilons.
    epsilon, epsilon_server : float or None
        User-level epsilon against the released models and against the server (None: infinite).
    adversaries : dict of str to str
        Who each epsilon is against (``{"epsilon": ..., "epsilon_server": ...}``).
    server_view : dict, optional
        ``t_weak``, ``t_strong``, ``exposed_users`` and ``per_user_epsilon`` of the ledger.
    scheme : str
        How users were selected (``poisson`` or a selection scheme chosen by the server).
    caveats : tuple of str
        The run's own caveats.

    Examples
    --------
    >>> r = uldp_privacy_report("ULDP-AVG", noise_multiplier=5.0, clip=1.0, delta=1e-5,
    ...                         epsilon=2.5, epsilon_server=3.0,
    ...                         adversaries={"epsilon": "a", "epsilon_server": "b"})
    >>> r.per_user_epsilon, r.mechanism
    ({'min': 3.0, 'median': 3.0, 'max': 3.0}, 'ULDP-AVG')
    """
    private = epsilon is not None
    view = server_view or {}
    notes = [
        "T_weak, T_strong and the exposed users are computed from the ledger of user samples "
        "(one row per round: the users whose records it aggregated), against a server that sees "
        "only the sum over silos (the private weighting protocol); a server that receives each "
        "silo's noisy contribution sees one such sum per silo and round.",
        "Epsilon is user-level (add or remove all records of one user across every silo): "
        + (
            f"against {adversaries['epsilon']}."
            if scheme == "poisson"
            else f"against anyone: users were chosen by the {scheme!r} selection scheme, which "
            "the server runs, so no amplification by sub-sampling is claimed; it is the "
            "epsilon of the most-selected user."
        ),
        f"Epsilon against the server: {adversaries['epsilon_server']}.",
    ]
    if not private:
        notes = notes[:1] + ["No differential privacy: the released models carry no guarantee."]
    spread_: dict[str, float] | None = None
    if private:
        uniform = epsilon if epsilon_server is None else epsilon_server
        assert uniform is not None
        spread_ = view.get("per_user_epsilon") or dict.fromkeys(("min", "median", "max"), uniform)
    return PrivacyReport(
        t_weak=view.get("t_weak"),
        t_strong=view.get("t_strong"),
        exposed_users=view.get("exposed_users"),
        mechanism=method,
        accountant=ACCOUNTANT if private else None,
        noise_multiplier=noise_multiplier if private else None,
        clip=clip,
        delta=delta if private else None,
        epsilon=epsilon,
        epsilon_server=epsilon_server if private else None,
        per_user_epsilon=spread_,
        accounted_noise_multiplier=None,
        wrap_around_log10_bound=None,
        caveats=tuple(notes) + tuple(caveats),
    )
