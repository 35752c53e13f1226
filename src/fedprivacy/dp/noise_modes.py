"""How the parties realise the distributed noise when some of them drop: two noise modes.

A round's unmaskable sums hold the noise of the parties aggregated, ``s`` of the ``n`` selected
(``s >= t``, the protocol's threshold). Each mode is a rule from the target variance of the sum
``(z Delta)^2`` (grid units), ``t`` and ``n`` to what one party draws (:class:`NoiseDraw`):

* ``over-provisioned`` (the default): each party adds one ``N_Z(0, ceil((z Delta)^2 / t))``,
  so even the smallest sum (``s = t``) reaches the target; with ``s > t`` the sum carries
  ``s / t`` times more noise than needed (``sqrt(n / t)`` in standard deviation when nobody
  drops).
* ``exact`` (add then remove; after Dordis, Jiang et al., EuroSys 2024): each party adds
  ``c = ceil(n / t)`` independent components ``N_Z(0, v)``, ``v = ceil((z Delta)^2 / n)``,
  and keeps them. Once the server names the aggregated set ``S`` (``s >= t``), survivor
  ``i`` keeps ``k_i`` of its components, ``floor(n / s)`` or ``ceil(n / s)`` by its rank in
  ``S`` (:meth:`NoiseDraw.kept`), with ``sum_i k_i = n``, and sends the sum of the others (its
  *excess*) in its unmask reply; the server subtracts every excess. The released sum holds
  exactly ``n`` i.i.d. ``N_Z(0, v)`` (variance ``n v >= (z Delta)^2``), whoever dropped, so
  Kairouz, Liu and Steinke's Theorem 1 (ICML 2021) applies with ``n`` copies. Dordis gives
  its components *different* variances, for which that theorem says nothing; equal variances
  in unequal numbers keep it.

**What the excess reveals.** Each excess is a sum of components the survivor drew
independently of its update and of the components it kept, so the server's whole view (the
released sum, the excess vectors) is the noised sum ``sum x + (n components)`` plus vectors
independent of both: post-processing, no privacy lost. A survivor that answers no unmask
request leaves its whole ``c`` in the sum (more noise; :meth:`NoiseDraw.in_sum` counts it).

**The adversaries.** A server that shows different aggregated sets to different parties could
make them keep fewer than ``n`` components in all: a party needs the consistency check
(:mod:`fedprivacy.secagg.consistency`), under which every honest party that unmasks signed the
same ``S`` (:class:`~fedprivacy.secagg.client.SecAggClient` refuses the exact mode without
it). A server that puts in ``S`` a party whose input never arrived cannot unmask the sum
(that party's pairwise masks stay). Against ``m`` parties of ``S`` that collude with the server
(and add nothing), the exact mode keeps ``n - sum k_i`` over them, about ``(s - m) / s`` of
the target, while the over-provisioned one keeps the target as long as ``s - m >= t``: the
exact mode trades that margin for the noise it saves.

Examples
--------
>>> draw = NOISE_MODES["exact"](Fraction(1200), threshold=4, parties=12)
>>> draw
NoiseDraw(variance=Fraction(100, 1), components=3, kept_total=12)
>>> [draw.kept(range(12), u) for u in range(12)] == [1] * 12  # nobody dropped
True
>>> [draw.kept([0, 3, 5, 7, 8], u) for u in (0, 3, 5, 7, 8)]  # 7 of 12 dropped
[3, 3, 2, 2, 2]
>>> draw.in_sum([0, 3, 5, 7, 8], removed=[0, 3, 5, 7, 8]), draw.in_sum([0, 3, 5, 7, 8], [0])
(12, 15)
>>> NOISE_MODES["over-provisioned"](Fraction(1200), threshold=4, parties=12)
NoiseDraw(variance=Fraction(300, 1), components=1, kept_total=None)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from fractions import Fraction

from fedprivacy._registry import Registry
from fedprivacy._validation import require_int
from fedprivacy.config_sections import DEFAULT_NOISE_MODE
from fedprivacy.errors import ParameterError

__all__ = [
    "DEFAULT_NOISE_MODE",
    "NOISE_MODES",
    "NoiseDraw",
    "NoiseMode",
    "exact",
    "over_provisioned",
]


@dataclass(frozen=True)
class NoiseDraw:
    """What one party adds in a round, and (exact mode) how much of it it keeps.

    Attributes
    ----------
    variance : fractions.Fraction
        Each component's variance on the grid (an integer).
    components : int
        Independent ``N_Z(0, variance)`` vectors the party adds.
    kept_total : int or None
        Exact mode: the components the released sum keeps in all (``n``); the survivors remove
        the rest. ``None``: nothing is removed.
    """

    variance: Fraction
    components: int = 1
    kept_total: int | None = None

    def __post_init__(self) -> None:
        if self.variance.denominator != 1 or self.variance < 1:
            raise ParameterError("variance", f"must be a positive integer, got {self.variance}")
        require_int("components", self.components, minimum=1)
        if self.kept_total is not None:
            require_int("kept_total", self.kept_total, minimum=1)

    @property
    def removable(self) -> bool:
        """bool: whether the party removes its excess at the unmask stage (exact mode)."""
        return self.kept_total is not None

    def kept(self, aggregated: Sequence[int], user: int) -> int:
        """The components ``user`` keeps when the sum is over ``aggregated``.

        Exact mode: ``floor(n / s)``, plus one for the ``n mod s`` lowest users of
        ``aggregated``; otherwise all of them.

        Raises
        ------
        ParameterError
            If ``user`` is not in ``aggregated``, or the rule would keep more components than a
            party drew (an aggregated set smaller than the threshold).
        """
        if self.kept_total is None:
            return self.components
        ranked = sorted(int(u) for u in aggregated)
        if int(user) not in ranked:
            raise ParameterError("user", f"{user} is not in the aggregated set")
        q, r = divmod(self.kept_total, len(ranked))
        k = q + (1 if ranked.index(int(user)) < r else 0)
        if k > self.components:
            raise ParameterError(
                "aggregated",
                f"{len(ranked)} parties cannot keep {self.kept_total} components of "
                f"{self.components} each",
            )
        return k

    def in_sum(self, aggregated: Sequence[int], removed: Collection[int]) -> int:
        """Components in the released sum of ``aggregated``, ``removed`` having sent excess."""
        gone = sum(self.components - self.kept(aggregated, u) for u in set(removed))
        return len(aggregated) * self.components - gone


NoiseMode = Callable[..., NoiseDraw]
"""``mode(target, threshold=t, parties=n)``: what each party draws for a sum of variance
``target`` (grid units)."""


def over_provisioned(target: Fraction, *, threshold: int, parties: int) -> NoiseDraw:
    """One draw of ``ceil(target / t)``: every sum of at least ``t`` parties reaches ``target``."""
    return NoiseDraw(Fraction(max(1, math.ceil(target / threshold))))


def exact(target: Fraction, *, threshold: int, parties: int) -> NoiseDraw:
    """``ceil(n / t)`` draws of ``ceil(target / n)``; the sum keeps ``n`` of them."""
    if parties < threshold:
        raise ParameterError("parties", f"{parties} is below the threshold {threshold}")
    variance = Fraction(max(1, math.ceil(target / parties)))
    return NoiseDraw(variance, -(-parties // threshold), parties)


#: The noise modes by name (``noise_mode`` in a configuration, ``--noise-mode``).
NOISE_MODES: Registry[NoiseMode] = Registry("noise_mode")
NOISE_MODES.register("over-provisioned", over_provisioned)
NOISE_MODES.register("exact", exact)
