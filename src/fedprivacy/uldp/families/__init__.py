"""The ULDP-FL method families, one module each, registered by name.

:data:`FAMILIES` maps every :attr:`MethodSpec.family <fedprivacy.uldp.method_specs.MethodSpec>`
(``default``, ``naive``, ``group``, ``avg``, ``sgd``) to its :class:`MethodFamily`; a
:class:`~fedprivacy.uldp.methods.MethodRunner` looks its method's family up there and calls its
hooks (:meth:`~MethodFamily.round`, :meth:`~MethodFamily.noise_multiplier`,
:meth:`~MethodFamily.accounting`, ...) instead of branching on the name. DEFAULT and ULDP-NAIVE
share the silo-level round of :mod:`~fedprivacy.uldp.families.silo_level`, ULDP-AVG and
ULDP-SGD the per-user round of :mod:`~fedprivacy.uldp.families.user_level`.

Examples
--------
>>> sorted(FAMILIES)
['avg', 'default', 'group', 'naive', 'sgd']
>>> family_for("ULDP-AVG-ws").name
'avg'
>>> FAMILIES.register("avg", FAMILIES["avg"])
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: family: 'avg' is registered already
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy._registry import Registry
from fedprivacy.errors import ParameterError
from fedprivacy.uldp.families.avg import AvgFamily
from fedprivacy.uldp.families.base import MethodFamily
from fedprivacy.uldp.families.default import DefaultFamily
from fedprivacy.uldp.families.group import GroupFamily
from fedprivacy.uldp.families.naive import NaiveFamily
from fedprivacy.uldp.families.sgd import SgdFamily
from fedprivacy.uldp.families.silo_level import SiloLevelFamily
from fedprivacy.uldp.families.user_level import UserLevelFamily
from fedprivacy.uldp.method_specs import method_spec

if TYPE_CHECKING:
    from fedprivacy.fl.mechanism import Mechanism

__all__ = [
    "FAMILIES",
    "AvgFamily",
    "DefaultFamily",
    "GroupFamily",
    "MethodFamily",
    "NaiveFamily",
    "SgdFamily",
    "SiloLevelFamily",
    "UserLevelFamily",
    "check_mechanism",
    "family_for",
]

#: The family of every ``MethodSpec.family`` name (``FAMILIES.register(f.name, f)`` adds one).
FAMILIES: Registry[MethodFamily] = Registry("family")
for _family in (DefaultFamily(), NaiveFamily(), GroupFamily(), AvgFamily(), SgdFamily()):
    FAMILIES.register(_family.name, _family)


def family_for(method: str) -> MethodFamily:
    """The :class:`MethodFamily` of a method name.

    Raises
    ------
    ParameterError
        If the name is not a method (see :func:`~fedprivacy.uldp.method_specs.method_spec`).
    """
    return FAMILIES[method_spec(method).family]


def check_mechanism(method: str, mechanism: Mechanism, secure_weighting: bool = False) -> None:
    """Refuse a mechanism ``method`` cannot run: the one rule of the configuration and runner.

    DEFAULT takes none; ULDP-NAIVE's and ULDP-GROUP-k's silos add the noise at their own
    sensitivity, and the private weighting protocol's silos add it too, so these need a
    mechanism whose parties add noise (:attr:`~fedprivacy.fl.mechanism.Mechanism.party_noise`).

    Raises
    ------
    ParameterError
        Naming ``dp``.
    """
    spec = method_spec(method)
    if not spec.takes_mechanism:
        raise ParameterError(
            "dp",
            f"{method} takes no mechanism (it adds no noise); ULDP-NAIVE, ULDP-GROUP-k, "
            "ULDP-AVG and ULDP-SGD take one",
        )
    if mechanism.adds_noise_in_aggregation:
        return
    if not FAMILIES[spec.family].per_user:
        raise ParameterError(
            "dp",
            f"{method}'s silos add its noise at their sensitivity: a mechanism whose parties add "
            "noise (party_noise), such as 'distributed'",
        )
    if secure_weighting:
        raise ParameterError(
            "dp", "the private weighting protocol's silos add the noise: use 'distributed'"
        )
