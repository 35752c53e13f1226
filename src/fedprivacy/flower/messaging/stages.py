"""The messages between a deployment's server and its nodes: one request and one reply per stage.

A request or a reply is a flat record of scalars (``str``, ``int``, ``float``, ``bytes``): what a
Flower ``ConfigRecord`` carries, and what the in-process transport passes as is. Each stage of a
round is one exchange:

============  ===================================================  ==============================
stage         request (server -> node)                              reply (node -> server)
============  ===================================================  ==============================
``hello``     --                                                   ``user`` (the node's user id)
``train``     ``round``, ``config``, ``model``, ``selected``        ``update``, ``weight``
``advertise`` ``round``, ``config``, ``model``, ``selected``,       ``message`` (AdvertiseKeys)
              ``params``, ``noise``
``share``     ``round``, ``message`` (KeyRoster)                   ``message`` (ShareKeys)
``mask``      ``round``, ``message`` (ShareDelivery)               ``message`` (MaskedInput)
``consis-``   ``round``, ``message`` (ConsistencyRequest: the      ``message`` (ConsistencyResponse:
``tency``     aggregated set S; node authentication on)           its signature on S)
``unmask``    ``round``, ``message`` (UnmaskRequest)               ``message`` (UnmaskResponse)
============  ===================================================  ==============================

Before the first round on a sparse (SecAgg+) graph the nodes draw the graph's seed together in
three more stages, ``commit``, ``reveal`` and ``draw``
(:mod:`fedprivacy.flower.messaging.joint_draw`).

Cross-silo (ULDP-FL with the private weighting protocol, :mod:`fedprivacy.flower.uldp.cross_silo`),
the node is a silo and the messages are Protocol 1's (:mod:`fedprivacy.secagg.private_weighting`):

===============  ================================================  =============================
stage            request (server -> silo)                          reply (silo -> server)
===============  ================================================  =============================
``silo-key``     ``config``, ``params``, ``message`` (Paillier      ``message`` (DhPublicKey)
                 key, 1(a))
``silo-roster``  ``message`` (DhRoster, 1(b))                      ``message`` (SeedShares from
                                                                   silo 0, empty from the others)
``silo-seed``    ``message`` (SeedDelivery, 1(c))                  ``message`` (BlindedHistogram)
``silo-round``   ``round``, ``model``, ``keys``, ``message``       ``message`` (MaskedUpdate)
                 (EncryptedWeights, 2(a))
===============  ================================================  =============================

With rounds overlapped (three exchanges a round), round ``t``'s ``unmask`` travels in round
``t + 1``'s ``advertise`` message: the request's ``unmask-round`` and ``unmask-message`` are
the unmask request, answered first (``unmask-message``, or ``unmask-error`` and
``unmask-detail``, in the reply); that ``advertise`` carries no model, which comes with the
``share`` request (``model``, ``config`` and ``selected`` beside ``message``), and the node
trains then (:func:`joint_request`, :func:`split_joint`).

``train`` is plaintext FedAvg (the node sends its update in the clear); ``advertise`` starts a
secure round: the node trains, keeps its update and its protocol state on the node, and publishes
its keys. A node that cannot accept a request replies with ``error`` (the typed error's class
name) and ``detail`` instead.

Examples
--------
>>> import numpy as np
>>> decode_array(encode_array(np.arange(3, dtype=np.float32)), np.float32).tolist()
[0.0, 1.0, 2.0]
>>> Stage("mask").secure
True
>>> joint = joint_request({"round": 3, "message": b"u"}, {"round": 4, "params": b"p"})
>>> sorted(joint)
['params', 'round', 'stage', 'unmask-message', 'unmask-round']
>>> split_joint(joint)[0]
{'round': 3, 'message': b'u'}
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.secagg.errors import MalformedMessageError

__all__ = [
    "ARRAYS",
    "Record",
    "Stage",
    "decode_array",
    "encode_array",
    "error_reply",
    "field",
    "model_digest",
    "join_replies",
    "joint_request",
    "split_joint",
]

JOINT = "unmask-"
"""The prefix of a carried unmasking's fields in an overlapped ``advertise`` request and reply."""

Record = dict[str, Any]
"""A request or a reply: field name -> ``str``, ``int``, ``float`` or ``bytes``."""


class Stage(StrEnum):
    """The exchanges of a deployment, in the order a round uses them."""

    HELLO = "hello"
    TRAIN = "train"
    ADVERTISE = "advertise"
    SHARE = "share"
    MASK = "mask"
    CONSISTENCY = "consistency"
    UNMASK = "unmask"
    COMMIT = "commit"
    REVEAL = "reveal"
    DRAW = "draw"
    SILO_KEY = "silo-key"
    SILO_ROSTER = "silo-roster"
    SILO_SEED = "silo-seed"
    SILO_ROUND = "silo-round"

    @property
    def secure(self) -> bool:
        """Whether the stage is one of the secure aggregation protocol's (five with the check)."""
        return self in (
            Stage.ADVERTISE,
            Stage.SHARE,
            Stage.MASK,
            Stage.CONSISTENCY,
            Stage.UNMASK,
        )


def encode_array(values: NDArray[Any]) -> bytes:
    """Little-endian bytes of a one-dimensional array (its dtype is implied by the field)."""
    return np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes()


def decode_array(data: bytes, dtype: type[np.generic]) -> NDArray[Any]:
    """Inverse of :func:`encode_array`; :class:`MalformedMessageError` on a ragged length."""
    item = np.dtype(dtype).newbyteorder("<")
    if not isinstance(data, bytes | bytearray) or len(data) % item.itemsize:
        raise MalformedMessageError(f"not an array of {np.dtype(dtype).name}")
    return np.frombuffer(bytes(data), dtype=item).astype(dtype)


def field(record: Mapping[str, Any], name: str, kind: type) -> Any:
    """``record[name]``, checked to be of ``kind``; :class:`MalformedMessageError` otherwise."""
    if name not in record:
        raise MalformedMessageError(f"the message has no field {name!r}")
    value = record[name]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise MalformedMessageError(f"field {name!r} is not {kind.__name__}")
    return value


def error_reply(exc: Exception) -> Record:
    """The reply of a node that refused a request: the error's class name and message."""
    return {"error": type(exc).__name__, "detail": str(exc)}


def joint_request(
    unmask: Mapping[str, Any], opening: Mapping[str, Any], stage: Stage = Stage.ADVERTISE
) -> Record:
    """Round ``t``'s unmask request carried in round ``t + 1``'s first request (``stage``)."""
    carried = {JOINT + k: v for k, v in unmask.items() if k != "stage"}
    return {**opening, "stage": stage.value, **carried}


def split_joint(record: Mapping[str, Any]) -> tuple[Record, Record]:
    """The carried unmasking's fields (empty if none) and the rest of ``record``."""
    carried = {k[len(JOINT) :]: v for k, v in record.items() if k.startswith(JOINT)}
    return carried, {k: v for k, v in record.items() if not k.startswith(JOINT)}


def join_replies(unmasked: Mapping[str, Any], advertised: Mapping[str, Any]) -> Record:
    """One reply to a joint request: the first stage's reply and the unmask reply's fields."""
    return {**advertised, **{JOINT + k: v for k, v in unmasked.items()}}


ARRAYS = "arrays"
"""The field of a request that carries the drop-in's model, a Flower ``ArrayRecord``."""


def model_digest(request: Mapping[str, Any]) -> bytes:
    """SHA-256 of the model ``request`` carries; empty when it carries none.

    The deployment's model is the ``model`` field (the flat float32 vector's bytes), the
    drop-in's an ``ArrayRecord`` under :data:`ARRAYS` (each array's name, dtype, shape, storage
    type and bytes, in order). Server and node compute it alike, the server over what it sends
    and the node over what it received: it binds the node's pairwise masks and signed set to
    the model it trained on (:func:`~fedprivacy.secagg.derivation.pairwise_mask_key`).

    Examples
    --------
    >>> model_digest({"model": b"1234"}) == model_digest({"model": b"1234"})
    True
    >>> model_digest({"model": b"1234"}) == model_digest({"model": b"1235"}), model_digest({})
    (False, b'')
    """
    h = hashlib.sha256(b"fedprivacy/model/v1")
    if "model" in request:
        parts = [b"vector", bytes(request["model"])]
    elif ARRAYS in request:
        parts = [b"arrays"]
        for name, array in request[ARRAYS].items():
            shape = ",".join(str(int(n)) for n in array.shape)
            parts += [name.encode(), array.dtype.encode(), shape.encode(), array.stype.encode()]
            parts.append(bytes(array.data))
    else:
        return b""
    for part in parts:
        h.update(len(part).to_bytes(8, "big") + part)
    return h.digest()
