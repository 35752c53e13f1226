"""Secure aggregation (Bonawitz et al., CCS 2017) with the SecAgg+ graph (Bell et al., CCS 2020).

Clients and server are transport-agnostic state machines (:mod:`.client`, :mod:`.server`)
exchanging the typed messages of :mod:`.messages`; :mod:`.driver` runs a round in-process and
:mod:`.multiround` drives rounds from the multi-round participant selection with batch-atomic
aggregation.
"""

from fedprivacy.secagg.client import SecAggClient
from fedprivacy.secagg.driver import RoundOutcome, Stage, run_round
from fedprivacy.secagg.errors import (
    DisconnectedSetError,
    DuplicateMessageError,
    MalformedMessageError,
    OutOfOrderError,
    ProtocolViolationError,
    RoundAbortedError,
    SecAggError,
    UnknownSenderError,
    WrongRoundError,
)
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.result import AggregationResult
from fedprivacy.secagg.server import SecAggServer

__all__ = [
    "AggregationResult",
    "DisconnectedSetError",
    "DuplicateMessageError",
    "MalformedMessageError",
    "OutOfOrderError",
    "ProtocolViolationError",
    "RoundAbortedError",
    "RoundOutcome",
    "SecAggClient",
    "SecAggError",
    "SecAggParameters",
    "SecAggServer",
    "Stage",
    "UnknownSenderError",
    "WrongRoundError",
    "run_round",
]
