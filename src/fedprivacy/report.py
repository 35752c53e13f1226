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
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.per_user import per_user_epsilons, spread
from fedprivacy.fl.mechanism import Mechanism
from fedprivacy.participation.privacy import TWeakResult

__all__ = ["PrivacyReport", "privacy_report"]

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
    per_user_epsilon : dict or None
        ``{"min", "median", "max"}`` over the users (never-aggregated users count as 0).
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
    per_user_epsilon: dict[str, float] | None
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
                f"- mechanism: {self.mechanism} Gaussian, noise multiplier {self.noise_multiplier},"
                f" clip {self.clip} (L2), accountant {self.accountant} (dp-accounting)",
                f"- per-user epsilon at delta = {self.delta}: min {pu['min']:.3g}, median "
                f"{pu['median']:.3g}, max {pu['max']:.3g}",
            ]
        lines += ["", "## Caveats", ""] + [f"- {c}" for c in self.caveats]
        return "\n".join(lines) + "\n"


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
    if noise is None:
        epsilons = None
        caveats.append("No differential privacy: the released models carry no formal guarantee.")
    else:
        epsilons = spread(per_user_epsilons(frequency, noise, delta, accountant=ACCOUNTANT))
        caveats.append(
            "Epsilon is per user (add or remove one user's data), composed over the rounds in "
            "which that user was really aggregated (ledger counts), without amplification by "
            "sub-sampling: the server chooses or knows who participates."
        )
        caveats.append(
            "Central DP: the server adds the noise, so it sees the noise-free sum; the epsilon "
            "holds against everyone who sees only the released models."
        )
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
        per_user_epsilon=epsilons,
        caveats=tuple(caveats),
    )
