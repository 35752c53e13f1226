"""The one federated round loop and the interface of the algorithms it runs."""

from fedprivacy.pipeline.algorithm import (
    Aggregation,
    Algorithm,
    RoundContext,
    RoundResult,
    SelectionOnly,
)
from fedprivacy.pipeline.loop import FederatedRun, UserSampler
from fedprivacy.pipeline.selection import run_selection

__all__ = [
    "Aggregation",
    "Algorithm",
    "FederatedRun",
    "RoundContext",
    "RoundResult",
    "SelectionOnly",
    "UserSampler",
    "run_selection",
]
