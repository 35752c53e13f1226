"""What each ULDP-FL method name means: its family and variant flags, as a table.

:data:`SPECS` maps each of the 14 names of :data:`~fedprivacy.uldp.method_names.METHODS` to
its :class:`MethodSpec`; :func:`method_spec` looks a name up. The family names the algorithm
(its entry in :data:`fedprivacy.uldp.families.FAMILIES`), the flags its variant. Importable
without torch.

Examples
--------
>>> spec = method_spec("ULDP-SGD-ws")
>>> (spec.family, spec.weighted, spec.sampled)
('sgd', True, True)
>>> method_spec("ULDP-GROUP-median").group
'median'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fedprivacy.errors import ParameterError
from fedprivacy.uldp.method_names import METHODS

__all__ = ["SPECS", "Family", "MethodSpec", "method_spec"]

#: The algorithms of the ULDP-FL methods.
Family = Literal["default", "naive", "group", "avg", "sgd"]


@dataclass(frozen=True)
class MethodSpec:
    """What a method name means.

    Attributes
    ----------
    name : str
        The paper's name.
    family : {"default", "naive", "group", "avg", "sgd"}
        The algorithm.
    weighted : bool
        ``w_{s,u} = n_{s,u} / N_u`` instead of ``1 / |S|`` (``-w``).
    sampled : bool
        User-level Poisson sub-sampling (``-s``).
    group : str or None
        ``"max"``, ``"median"``, ``"2"``, ``"8"`` for ULDP-GROUP-k.
    """

    name: str
    family: Family
    weighted: bool = False
    sampled: bool = False
    group: str | None = None

    @property
    def private(self) -> bool:
        """Whether the method is differentially private (all but DEFAULT)."""
        return self.family != "default"

    @property
    def takes_mechanism(self) -> bool:
        """Whether a run may name its mechanism.

        Not DEFAULT (no noise); ULDP-GROUP-k's DP-SGD clips each record's gradient with it.
        """
        return self.family != "default"


def _table(*specs: MethodSpec) -> dict[str, MethodSpec]:
    table = {s.name: s for s in specs}
    if tuple(table) != METHODS:  # pragma: no cover - a table edit that forgot a name
        raise AssertionError("SPECS must list METHODS in order")
    return table


#: The :class:`MethodSpec` of every name of :data:`~fedprivacy.uldp.method_names.METHODS`.
SPECS: dict[str, MethodSpec] = _table(
    MethodSpec("DEFAULT", "default"),
    MethodSpec("ULDP-NAIVE", "naive"),
    MethodSpec("ULDP-GROUP-max", "group", group="max"),
    MethodSpec("ULDP-GROUP-median", "group", group="median"),
    MethodSpec("ULDP-GROUP-2", "group", group="2"),
    MethodSpec("ULDP-GROUP-8", "group", group="8"),
    MethodSpec("ULDP-AVG", "avg"),
    MethodSpec("ULDP-AVG-w", "avg", weighted=True),
    MethodSpec("ULDP-AVG-s", "avg", sampled=True),
    MethodSpec("ULDP-AVG-ws", "avg", weighted=True, sampled=True),
    MethodSpec("ULDP-SGD", "sgd"),
    MethodSpec("ULDP-SGD-w", "sgd", weighted=True),
    MethodSpec("ULDP-SGD-s", "sgd", sampled=True),
    MethodSpec("ULDP-SGD-ws", "sgd", weighted=True, sampled=True),
)


def method_spec(name: str) -> MethodSpec:
    """Return the :class:`MethodSpec` of a method name.

    Raises
    ------
    ParameterError
        If the name is not one of :data:`~fedprivacy.uldp.method_names.METHODS` (the message
        lists them).
    """
    if name not in METHODS:  # a tuple: an unhashable name is refused, not a TypeError
        raise ParameterError("method", f"must be one of {', '.join(METHODS)}; got {name!r}")
    return SPECS[name]
