"""The sentences every privacy report opens with: what the server could learn, what epsilon means.

``privacy.md`` (:meth:`fedprivacy.report.PrivacyReport.to_markdown`) and ``train``'s
``summary.md`` say T_weak, T_strong and the exposed users as ``fedprivacy audit`` prints them,
and epsilon with its adversary and a sense of its scale; the first caveats
(:data:`VIEW_CAVEATS`) say what those figures rest on, by what the server received
(:func:`aggregation_of`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, Literal

__all__ = [
    "VIEW_CAVEATS",
    "Aggregation",
    "aggregation_of",
    "epsilon_sentence",
    "server_view_sentences",
]

#: What the server received each round: secure aggregation of the updates (with every key
#: signed by its node, or on a deployment without node authentication), the updates in
#: plaintext, or (ULDP-FL) only the sum over silos of their noisy contributions.
Aggregation = Literal["secagg", "secagg-unauthenticated", "plaintext", "silo-sum"]

_AGGREGATES_LEDGER: Final = (
    "T_weak, T_strong and the exposed users are computed from the ledger of aggregates the "
    "server unmasked, against a server that runs the protocol as specified."
)

_SECAGG: Final = (
    "Secure aggregation hides the individual updates of one round from a server colluding "
    "with fewer users than the threshold (above 32 users a round, unless a degree is "
    "configured, SecAgg+'s random graph, with enough neighbours that a server colluding "
    "with at most 5 % of the round's users holds fewer than the threshold of any user's "
    "neighbours except with probability 2^-40; on a deployment the nodes draw the graph's "
    "seed together); what the server can combine across rounds is stated above."
)

#: What the server-view figures rest on, by what the server received (the first caveats).
VIEW_CAVEATS: Final[Mapping[Aggregation, tuple[str, ...]]] = {
    "secagg": (_AGGREGATES_LEDGER, _SECAGG),
    "secagg-unauthenticated": (
        _AGGREGATES_LEDGER,
        "NO NODE AUTHENTICATION: the nodes' SecAgg keys were not signed, so a server that lies "
        "about the keys (handing a user keys of its own for its neighbours) could have read any "
        "single user's input; every figure here holds only against a server that runs the "
        "protocol as specified. Deploy with node authentication (the default of `flower "
        "deploy`) to rule this out.",
        _SECAGG,
    ),
    "plaintext": (
        _AGGREGATES_LEDGER,
        "Plaintext aggregation: the server receives every individual update. The server-view "
        "figures describe what an observer of the aggregates alone learns, not the server.",
    ),
    "silo-sum": (
        "T_weak, T_strong and the exposed users are computed from the ledger of user samples "
        "(one row per round: the users whose records it aggregated), against a server that sees "
        "only the sum over silos (the private weighting protocol); a server that receives each "
        "silo's noisy contribution sees one such sum per silo and round.",
    ),
}


def aggregation_of(secure: bool, authenticated: bool = True) -> Aggregation:
    """What the server received: ``secagg`` (``-unauthenticated`` without node keys) or plaintext.

    >>> aggregation_of(True), aggregation_of(True, authenticated=False), aggregation_of(False)
    ('secagg', 'secagg-unauthenticated', 'plaintext')
    """
    if not secure:
        return "plaintext"
    return "secagg" if authenticated else "secagg-unauthenticated"


def server_view_sentences(
    t_weak: Mapping[str, object] | None, t_strong: int | None, exposed_users: int | None
) -> list[str]:
    """T_weak, T_strong and the exposed users, one sentence each, as ``audit`` says them.

    Examples
    --------
    >>> lines = server_view_sentences({"lower": 2, "upper": 2, "exact": True}, 3, 0)
    >>> [line.split(":")[0][:24] for line in lines]
    ['T_weak = 2', 'T_strong = 3', "No user's individual upd"]
    """
    if t_weak is None:
        return ["Not computed (metrics = none): run `fedprivacy audit` on participation.csv."]
    if t_weak["upper"] is None:
        return ["Nobody was ever aggregated: the server has learned nothing."]
    t_text = (
        f"T_weak = {t_weak['upper']}"
        if t_weak["exact"]
        else f"T_weak in [{t_weak['lower']}, {t_weak['upper']}] (certified interval)"
    )
    lines = [
        f"{t_text}: the smallest number of users in any linear combination of the aggregates "
        "the server saw.",
        f"T_strong = {t_strong}: the smallest group of users that always participated together.",
    ]
    if exposed_users:
        lines.append(
            f"EXPOSED: {exposed_users} user(s) whose individual update the server can compute "
            "exactly."
        )
    else:
        lines.append("No user's individual update is a linear combination of the aggregates.")
    return lines


def epsilon_sentence(epsilon: float, delta: float, adversary: str) -> str:
    """Epsilon at delta, against whom, and what its size means.

    Examples
    --------
    >>> text = epsilon_sentence(0.5, 1e-5, "anyone who sees the released models")
    >>> text[:60]
    'Epsilon 0.5 at delta 1e-05 against anyone who sees the relea'
    >>> "at most e^0.5 = 1.65" in text, text.endswith("Strong: below 1.")
    (True, True)
    """
    factor = f" = {math.exp(epsilon):.3g}" if epsilon < 50 else ""
    if epsilon < 1:
        scale = "Strong: below 1."
    elif epsilon <= 10:
        scale = "Moderate: between 1 and 10, as in most deployed private training."
    else:
        scale = "Weak: above 10, the bound allows large changes; treat it as little protection."
    return (
        f"Epsilon {epsilon:.3g} at delta {delta:g} against {adversary}: whatever they observe, "
        f"one user's data changes its probability by a factor of at most e^{epsilon:.3g}"
        f"{factor} (except with probability {delta:g}). {scale}"
    )
