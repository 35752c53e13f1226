"""Who participates in each round, and what the server can learn from the aggregates it sees.

The main nouns load on first use (the metrics import scipy and FLINT):

>>> from fedprivacy.participation import ParticipationLedger, t_weak
>>> ledger = ParticipationLedger(2)
>>> ledger.record([0, 1])
>>> t_weak(ledger.matrix()).upper
2
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy._lazy import lazy_exports

if TYPE_CHECKING:
    from fedprivacy.participation.audit import audit_ledger
    from fedprivacy.participation.availability import (
        AlwaysAvailable,
        AvailabilityModel,
        BernoulliDropout,
        TraceAvailability,
    )
    from fedprivacy.participation.curve import t_weak_curve
    from fedprivacy.participation.fairness import FAIRNESS_RULES, FairnessRule
    from fedprivacy.participation.ledger import ParticipationLedger
    from fedprivacy.participation.metrics import exposed_users, t_strong
    from fedprivacy.participation.privacy import TWeakResult, t_weak
    from fedprivacy.participation.sampling import EveryUser, PoissonSampler
    from fedprivacy.participation.selectors import (
        SCHEMES,
        BatchPartitionSelector,
        RandomSelector,
        Selector,
        UserPartitionSelector,
        WeightedRandomSelector,
        make_selector,
    )

_LAZY = {
    "audit_ledger": "fedprivacy.participation.audit",
    "AlwaysAvailable": "fedprivacy.participation.availability",
    "AvailabilityModel": "fedprivacy.participation.availability",
    "BernoulliDropout": "fedprivacy.participation.availability",
    "TraceAvailability": "fedprivacy.participation.availability",
    "t_weak_curve": "fedprivacy.participation.curve",
    "ParticipationLedger": "fedprivacy.participation.ledger",
    "exposed_users": "fedprivacy.participation.metrics",
    "t_strong": "fedprivacy.participation.metrics",
    "TWeakResult": "fedprivacy.participation.privacy",
    "t_weak": "fedprivacy.participation.privacy",
    "EveryUser": "fedprivacy.participation.sampling",
    "PoissonSampler": "fedprivacy.participation.sampling",
    "FAIRNESS_RULES": "fedprivacy.participation.fairness",
    "FairnessRule": "fedprivacy.participation.fairness",
    "SCHEMES": "fedprivacy.participation.selectors",
    "BatchPartitionSelector": "fedprivacy.participation.selectors",
    "RandomSelector": "fedprivacy.participation.selectors",
    "Selector": "fedprivacy.participation.selectors",
    "UserPartitionSelector": "fedprivacy.participation.selectors",
    "WeightedRandomSelector": "fedprivacy.participation.selectors",
    "make_selector": "fedprivacy.participation.selectors",
}
__all__ = [
    "AlwaysAvailable",
    "AvailabilityModel",
    "BatchPartitionSelector",
    "BernoulliDropout",
    "EveryUser",
    "FAIRNESS_RULES",
    "FairnessRule",
    "ParticipationLedger",
    "PoissonSampler",
    "RandomSelector",
    "SCHEMES",
    "Selector",
    "TWeakResult",
    "TraceAvailability",
    "UserPartitionSelector",
    "WeightedRandomSelector",
    "audit_ledger",
    "exposed_users",
    "make_selector",
    "t_strong",
    "t_weak",
    "t_weak_curve",
]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
