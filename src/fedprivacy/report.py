"""One privacy report for every run: what the server's view reveals, and the released model.

Two adversaries, two kinds of figures:

* **the server's view** (from the ledger of the aggregates it unmasked): ``T_weak`` (the fewest
  users in any combination of aggregates it can compute), ``T_strong`` and the users whose
  individual update it can compute exactly;
* **the released models** (anyone who sees the global model after every round): per-user
  ``(epsilon, delta)`` of the DP mechanism, each user composing only the rounds it was aggregated
  in (:func:`fedprivacy.dp.per_user.per_user_epsilons`), and the caveats that bound both claims.

:func:`privacy_report` builds the report of every run (``fedprivacy train``, ``fedprivacy
uldp``, ``fedprivacy flower deploy``); what differs between them is data: what the server
received (:data:`VIEW_CAVEATS`), its ledger (:class:`LedgerEpsilons`, whose epsilons are composed
here: ULDP-FL's too, a hidden Poisson sample amplifying the released models') and the mechanism
(a :class:`~fedprivacy.fl.mechanism.Mechanism`, or a :class:`Method` that only names one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from fedprivacy.fl.mechanism import MECHANISMS, Mechanism
from fedprivacy.participation.privacy import TWeakResult
from fedprivacy.report_figures import Released, ledger_figures
from fedprivacy.report_inputs import LedgerEpsilons, Method
from fedprivacy.report_sentences import (
    VIEW_CAVEATS,
    Aggregation,
    epsilon_sentence,
    server_view_sentences,
)

__all__ = [
    "GROUP_PRIVACY",
    "NO_DP",
    "PER_USER_EPSILON",
    "ULDP_EPSILON",
    "LedgerEpsilons",
    "Method",
    "PrivacyReport",
    "privacy_report",
]

#: How the report names an accountant.
ACCOUNTANT_TEXT: Final[Mapping[str, str]] = {
    "rdp": "rdp (dp-accounting)",
    "pld": "pld (the composed Gaussian's exact privacy-loss distribution, in closed form)",
}

#: What epsilons composed from the ledger mean (:class:`LedgerEpsilons`).
PER_USER_EPSILON: Final = (
    "Epsilon is per user (add or remove one user's data), composed over the rounds in which "
    "that user was really aggregated (ledger counts), without amplification by sub-sampling: "
    "the server chooses or knows who participates."
)
#: ULDP-GROUP-k's epsilons (:attr:`LedgerEpsilons.group_epsilon`).
GROUP_PRIVACY: Final = (
    "Epsilon is the same for every user: group privacy of the silos' record-level DP-SGD over "
    "the k records each user keeps."
)
#: A run without DP.
NO_DP: Final = "No differential privacy: the released models carry no formal guarantee."

#: What ULDP-FL's epsilon means; ``{}``: whom the released models' epsilon is against.
ULDP_EPSILON: Final = (
    "Epsilon is user-level (add or remove all records of one user across every silo)."
)


#: Why the released noise exceeds the request, by noise mode (:mod:`fedprivacy.dp.noise_modes`).
ABOVE_REQUEST: Final = {
    "over-provisioned": (
        "each party adds enough noise for the fewest parties the protocol may unmask (its "
        "threshold), so when more are aggregated the sum holds more noise; the accountant uses "
        "the noise really present"
    ),
    "exact": (
        "the survivors remove the excess noise the sum does not need, but one that left before "
        "the unmask stage leaves its excess in (and the grid rounds each party's variance up); "
        "the accountant uses the noise really present"
    ),
}


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
        The DP mechanism (``none``, ``central``, ``distributed``, or a ULDP-FL method) and the
        accountant composing it.
    noise_mode : str or None
        Distributed DP: how the parties' noise survives dropouts
        (:mod:`fedprivacy.dp.noise_modes`); None otherwise.
    noise_multiplier, clip, delta : float or None
        Its parameters (None without DP).
    epsilon : float or None
        The largest per-user epsilon against :attr:`epsilon_adversary` (None without DP: no
        guarantee). Every command's ``privacy.epsilon`` means this.
    epsilon_adversary : str or None
        Whom :attr:`epsilon` is against, in words.
    epsilon_released : float or None
        Against anyone who sees only the released models (ULDP-FL with Poisson sampling: smaller
        than :attr:`epsilon`, by amplification, as the observer does not know who was sampled).
    epsilon_server : float or None
        The largest per-user epsilon against the server, from everything it received (None: no
        guarantee against it, e.g. central DP, where it adds the noise itself).
    per_user_epsilon : dict or None
        ``{"min", "median", "max"}`` over the users (never-aggregated users count as 0), by
        :attr:`accountant`.
    per_user_epsilon_rdp : dict or None
        The same by RDP, side by side, when :attr:`accountant` is the tighter ``"pld"`` (None
        otherwise).
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
    noise_mode: str | None
    noise_multiplier: float | None
    clip: float | None
    delta: float | None
    epsilon: float | None
    epsilon_adversary: str | None
    epsilon_released: float | None
    epsilon_server: float | None
    per_user_epsilon: dict[str, float] | None
    per_user_epsilon_rdp: dict[str, float] | None
    accounted_noise_multiplier: dict[str, float] | None
    wrap_around_log10_bound: float | None
    caveats: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form (the attributes, caveats as a list)."""
        return {**asdict(self), "caveats": list(self.caveats)}

    def __str__(self) -> str:
        """The readable report (:meth:`to_markdown`): ``print(result.report())``."""
        return self.to_markdown()

    def to_markdown(self) -> str:
        """``privacy.md``: what the server could learn, what the released models reveal."""
        lines = [
            "# Privacy report",
            "",
            "## What the server could learn (from the aggregates it unmasked)",
            "",
            *server_view_sentences(self.t_weak, self.t_strong, self.exposed_users),
            "",
            "## What the released models reveal",
            "",
            *self._released_lines(),
            "",
            "## Caveats",
            "",
        ]
        return "\n".join(lines + [f"- {c}" for c in self.caveats]) + "\n"

    def _released_lines(self) -> list[str]:
        pu = self.per_user_epsilon
        if pu is None or self.epsilon is None or self.delta is None:
            return ["No differential privacy: the released models carry no formal guarantee."]
        lines = [
            epsilon_sentence(self.epsilon, self.delta, str(self.epsilon_adversary)),
            "",
            f"- per user: min {pu['min']:.3g}, median {pu['median']:.3g}, max {pu['max']:.3g} "
            "(each user composes only the rounds it was aggregated in)",
        ]
        rdp = self.per_user_epsilon_rdp
        if rdp is not None:
            lines.append(
                f"- by RDP instead of the exact PLD: min {rdp['min']:.3g}, median "
                f"{rdp['median']:.3g}, max {rdp['max']:.3g} (the report uses the tighter PLD)"
            )
        if self.epsilon_released is not None and self.epsilon_released != self.epsilon:
            lines.append(
                f"- against anyone who sees only the released models: epsilon "
                f"{self.epsilon_released:.3g}"
            )
        if self.epsilon_server is None:
            lines.append("- against the server: no guarantee (it sees the noise-free aggregate)")
        elif self.epsilon_server != self.epsilon:
            lines.append(f"- against the server: epsilon {self.epsilon_server:.3g}")
        lines += [
            f"- mechanism: {_mechanism_text(self.mechanism)}; noise multiplier "
            f"{self.noise_multiplier:g} requested, clip {self.clip:g} (L2), "
            + (f"noise mode {self.noise_mode}, " if self.noise_mode else "")
            + f"accountant {ACCOUNTANT_TEXT.get(str(self.accountant), str(self.accountant))}",
            *self._noise_lines(),
        ]
        return lines

    def _noise_lines(self) -> list[str]:
        """The noise really released, and why it exceeds the request (over-provisioning)."""
        nm, lines = self.accounted_noise_multiplier, []
        if nm is not None and self.noise_multiplier is not None:
            low, high = f"{nm['min']:.4g}", f"{nm['max']:.4g}"
            released = low if low == high else f"{low} to {high}"
            line = f"- noise multiplier of the released aggregates: {released}"
            if nm["max"] > self.noise_multiplier * (1 + 1e-9):
                why = ABOVE_REQUEST.get(str(self.noise_mode), ABOVE_REQUEST["over-provisioned"])
                line += f", above the {self.noise_multiplier:g} requested: {why}"
            lines.append(line)
        if self.wrap_around_log10_bound is not None:
            lines.append(
                "- probability that a noisy sum wrapped around the modulus: at most "
                f"10^{self.wrap_around_log10_bound:.4g}"
            )
        return lines


def _mechanism_text(name: str) -> str:
    """How the report names a mechanism: its registered description, else the name itself."""
    mechanism = MECHANISMS.get(name)
    return mechanism.description if mechanism is not None and mechanism.description else name


def _text(value: object) -> str:
    return "not computed (metrics = none)" if value is None else str(value)


#: Whom ``epsilon`` is against: an observer of the released models only (the server adds the
#: noise, or is not considered), or also the server (its noise is in all the server can compute)
RELEASED_MODELS: Final = (
    "anyone who sees the released models (not the server: it sees them noise-free)"
)
SERVER_TOO: Final = (
    "the server, from everything it received, and anyone who sees the released models"
)


def _adversary(figures: Released) -> str | None:
    """Whom the largest per-user epsilon is against."""
    if figures.per_user is None:
        return None
    return RELEASED_MODELS if figures.epsilon_server is None else SERVER_TOO


def privacy_report(
    mechanism: Mechanism | Method,
    delta: float,
    epsilons: LedgerEpsilons,
    *,
    aggregation: Aggregation,
    server_view: Mapping[str, Any] | None = None,
    caveats: Sequence[str] = (),
) -> PrivacyReport:
    """The privacy report of any run; what differs between runs comes in as data.

    The caveats, in order: what the server-view figures rest on (:data:`VIEW_CAVEATS`), what
    the epsilons mean (:data:`PER_USER_EPSILON`, :data:`GROUP_PRIVACY` or :data:`NO_DP`), the
    mechanism's ``who_sees_what`` under DP, then ``caveats``.

    Parameters
    ----------
    mechanism : Mechanism or Method
        The run's DP mechanism (a :class:`Method` only names one); no DP when its
        ``noise_multiplier`` is None.
    delta : float
        Per-user delta of the epsilons.
    epsilons : LedgerEpsilons
        The ledger the epsilons are composed from.
    aggregation : {"secagg", "plaintext", "silo-sum"}
        What the server received each round (picks the server-view caveats).
    server_view : mapping, optional
        ``t_weak`` (a :class:`~fedprivacy.participation.privacy.TWeakResult` or its ``{"lower",
        "upper", "exact"}``), ``t_strong``, ``exposed_users``; missing or None: not computed.
    caveats : sequence of str
        The run's own caveats, last.

    Examples
    --------
    >>> from fedprivacy.fl.mechanism import CentralGaussian
    >>> import numpy as np
    >>> ledger = LedgerEpsilons(np.array([[1, 0], [1, 0], [1, 0]], dtype=bool))  # user 1: never
    >>> r = privacy_report(CentralGaussian(noise_multiplier=2.0, clip=1.0), 1e-5, ledger,
    ...                    aggregation="secagg")
    >>> r.epsilon == r.per_user_epsilon["max"] > r.per_user_epsilon["min"] == 0.0
    True
    >>> r.epsilon_server is None  # the server adds the noise itself: no guarantee against it
    True
    >>> hidden = LedgerEpsilons(ledger.participation, np.full(3, 2.0), sampling_rate=0.1)
    >>> r = privacy_report(Method("ULDP-AVG-s", 2.0, 1.0, adds_noise_in_aggregation=True),
    ...                    1e-5, hidden, aggregation="silo-sum")  # a Poisson sample of rate 0.1
    >>> r.epsilon_released < r.epsilon == r.epsilon_server  # amplified for the models' observers
    True
    """
    noise = mechanism.noise_multiplier
    notes = list(VIEW_CAVEATS[aggregation])
    figures = Released()
    if noise is None:
        notes.append(NO_DP)
    else:
        notes.append(PER_USER_EPSILON if epsilons.group_epsilon is None else GROUP_PRIVACY)
        figures = ledger_figures(epsilons, mechanism, noise, delta)
    if noise is not None and mechanism.who_sees_what:
        notes.append(mechanism.who_sees_what)
    view = server_view or {}
    t_weak = view.get("t_weak")
    if isinstance(t_weak, TWeakResult):
        t_weak = {"lower": t_weak.lower, "upper": t_weak.upper, "exact": t_weak.exact}
    return PrivacyReport(
        t_weak=None if t_weak is None else dict(t_weak),
        t_strong=view.get("t_strong"),
        exposed_users=view.get("exposed_users"),
        mechanism=mechanism.name,
        accountant=None if noise is None else mechanism.accountant,
        noise_mode=mechanism.noise_mode if mechanism.adds_noise_in_aggregation else None,
        noise_multiplier=noise,
        clip=mechanism.clip,
        delta=None if noise is None else delta,
        epsilon=None if figures.per_user is None else figures.per_user["max"],
        epsilon_adversary=_adversary(figures),
        epsilon_released=figures.epsilon,
        epsilon_server=figures.epsilon_server,
        per_user_epsilon=figures.per_user,
        per_user_epsilon_rdp=figures.per_user_rdp,
        accounted_noise_multiplier=figures.accounted,
        wrap_around_log10_bound=figures.wrap,
        caveats=tuple(notes) + tuple(caveats),
    )
