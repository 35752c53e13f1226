"""The sentences every privacy report opens with: what the server could learn, what epsilon means.

``privacy.md`` (:meth:`fedprivacy.report.PrivacyReport.to_markdown`) and ``train``'s
``summary.md`` say T_weak, T_strong and the exposed users as ``fedprivacy audit`` prints them,
and epsilon with its adversary and a sense of its scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["epsilon_sentence", "server_view_sentences"]


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
