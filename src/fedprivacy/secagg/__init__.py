"""Secure aggregation (Bonawitz et al., CCS 2017) with the SecAgg+ graph (Bell et al., CCS 2020).

Clients and server are transport-agnostic state machines (:mod:`.client`, :mod:`.server`)
exchanging the typed messages of :mod:`.messages`; :mod:`.driver` runs a round in-process and
:mod:`.multiround` drives rounds from the multi-round participant selection with batch-atomic
aggregation. For clients that run a fresh process per stage (Flower), :mod:`.state` writes a
client's state to bytes and back, and :mod:`.params_wire` the round's parameters. With
:mod:`.key_epoch` a node reuses its keys across rounds and skips the advertise stage.
"""

from fedprivacy.secagg.client import SecAggClient
from fedprivacy.secagg.consistency import ConsistencyCheck
from fedprivacy.secagg.driver import RoundOutcome, Stage, run_round
from fedprivacy.secagg.errors import (
    ConsistencyError,
    DisconnectedSetError,
    DuplicateMessageError,
    MalformedMessageError,
    OutOfOrderError,
    ProtocolViolationError,
    RoundAbortedError,
    SecAggError,
    UnknownSenderError,
    UnrecoverableSecretError,
    UnsignedKeyError,
    WrongRoundError,
)
from fedprivacy.secagg.key_epoch import KeyEpoch
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.params_wire import decode_params, encode_params
from fedprivacy.secagg.result import AggregationResult
from fedprivacy.secagg.server import SecAggServer
from fedprivacy.secagg.state import dump_client, load_client

__all__ = [
    "AggregationResult",
    "ConsistencyCheck",
    "ConsistencyError",
    "DisconnectedSetError",
    "DuplicateMessageError",
    "KeyEpoch",
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
    "UnrecoverableSecretError",
    "UnsignedKeyError",
    "WrongRoundError",
    "decode_params",
    "dump_client",
    "encode_params",
    "load_client",
    "run_round",
]
