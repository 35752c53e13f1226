"""Federated learning: models, flat-parameter helpers, local training and aggregation.

The main nouns load on first use (their modules import torch):

>>> from fedprivacy.fl import make_mechanism
>>> make_mechanism("central", noise_multiplier=1.0, clip=1.0).name
'central'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy._lazy import lazy_exports

if TYPE_CHECKING:
    from fedprivacy.fl.aggregation import (
        AggregateOutcome,
        Aggregator,
        PlaintextAggregator,
    )
    from fedprivacy.fl.engine import FederatedTraining
    from fedprivacy.fl.local_spec import LearningRateSchedule
    from fedprivacy.fl.local_training import VectorisedTrainer
    from fedprivacy.fl.mechanism import MECHANISMS, Mechanism, make_mechanism
    from fedprivacy.fl.secure_aggregation import SecureAggregator
    from fedprivacy.fl.secure_selection import run_secure_selection
    from fedprivacy.pipeline.record import RoundRecord

_LAZY = {
    "AggregateOutcome": "fedprivacy.fl.aggregation",
    "Aggregator": "fedprivacy.fl.aggregation",
    "PlaintextAggregator": "fedprivacy.fl.aggregation",
    "SecureAggregator": "fedprivacy.fl.secure_aggregation",
    "FederatedTraining": "fedprivacy.fl.engine",
    "LearningRateSchedule": "fedprivacy.fl.local_spec",
    "RoundRecord": "fedprivacy.pipeline.record",
    "VectorisedTrainer": "fedprivacy.fl.local_training",
    "MECHANISMS": "fedprivacy.fl.mechanism",
    "Mechanism": "fedprivacy.fl.mechanism",
    "make_mechanism": "fedprivacy.fl.mechanism",
    "run_secure_selection": "fedprivacy.fl.secure_selection",
}
__all__ = [
    "AggregateOutcome",
    "Aggregator",
    "FederatedTraining",
    "LearningRateSchedule",
    "MECHANISMS",
    "Mechanism",
    "PlaintextAggregator",
    "RoundRecord",
    "SecureAggregator",
    "VectorisedTrainer",
    "make_mechanism",
    "run_secure_selection",
]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
