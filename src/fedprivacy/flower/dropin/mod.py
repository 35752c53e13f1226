"""fedprivacy inside any Flower ClientApp: a mod around the app's own ``@app.train`` function.

``ClientApp(mods=[fedprivacy_mod])`` leaves the app's training unchanged. Every ``train`` message
of :class:`~fedprivacy.flower.dropin.private_fedavg.PrivateFedAvg` carries a ``fedprivacy`` record
(:mod:`fedprivacy.flower.messaging.stages`); the mod answers it as a node of the deployment:

* ``hello``: which user this node is (its ``node_config``'s ``fedprivacy-user``, else Flower's
  ``partition-id``), signed when its policy names a key;
* ``advertise``: the round's parameters and noise are checked against **the node's own policy**
  (:class:`~fedprivacy.policy.PartyPolicy`, from its operator's file, never from the server),
  then the app's train function runs on the model (its ``arrays`` and ``config``); the mod
  takes the difference between the arrays it returns and the ones it received (any model,
  :class:`~fedprivacy.flower.dropin.arrays.ArrayLayout`), clips it to the node's L2 clip, keeps it
  in ``context.state`` and publishes its SecAgg keys;
* ``share``, ``mask``, ``consistency``, ``unmask``: the protocol's stages
  (:class:`~fedprivacy.flower.nodes.node.Node`); at ``mask`` the node adds its own discrete Gaussian
  noise on the grid (distributed DP) and masks the update.

A plaintext ``train`` round (``train`` stage, or a message without the record, from any other
strategy) reaches the app only if the node's policy allows plaintext rounds (never by default).
Every contribution is logged on the node (logger ``fedprivacy.node``): the round, the update's
norm before and after the clip, and the noise variance added. Updates are averaged unweighted:
the number of examples a node trained on is not sent (it is information about its data).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, MessageType, RecordDict
from flwr.clientapp.typing import ClientAppCallable
from numpy.typing import NDArray

from fedprivacy.dp.mechanisms import clip_l2
from fedprivacy.errors import FedPrivacyError, ParameterError
from fedprivacy.fl.mechanism import MECHANISMS, make_mechanism
from fedprivacy.flower.dropin.arrays import ArrayLayout
from fedprivacy.flower.messaging.grid import RECORD, Wire
from fedprivacy.flower.messaging.stages import (
    ARRAYS,
    Record,
    Stage,
    error_reply,
    field,
    model_digest,
)
from fedprivacy.flower.nodes.node import Contribution, Node
from fedprivacy.flower.nodes.node_policy import answer_once, train_once
from fedprivacy.plugins import load_plugins
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.errors import MalformedMessageError
from fedprivacy.secagg.params import SecAggParameters

__all__ = [
    "ARRAYS",
    "CONFIG",
    "MOD_WIRE",
    "RECORD",
    "fedprivacy_mod",
    "reply_fields",
    "request_content",
]

CONFIG = "config"
"""The app's own training configuration (``ConfigRecord``), passed to its train function."""
STATE = "fedprivacy-state"
"""The node's protocol state in ``context.state``."""
#: Node-configuration keys that say which user a node is, in order of preference.
USER_KEYS = ("fedprivacy-user", "partition-id")
_PLAINTEXT_REFUSED = 1001  # the Error code of a plaintext round the node's policy refuses

_LOG = logging.getLogger("fedprivacy.node")
load_plugins(log=_LOG)  # the node operator's own registrations (FEDPRIVACY_PLUGINS)

#: What the app's training returned: the arrays sent, the arrays returned.
Training = Callable[[], tuple[ArrayRecord, Message]]


def request_content(request: Record) -> RecordDict:
    """A request as a Flower message's content: the model and the app's config as records."""
    fields = {k: v for k, v in request.items() if k not in (ARRAYS, CONFIG)}
    records: dict[str, Any] = {RECORD: ConfigRecord(fields)}
    if ARRAYS in request:
        records[ARRAYS] = request[ARRAYS]
    records[CONFIG] = request.get(CONFIG, ConfigRecord())
    return RecordDict(records)


def reply_fields(message: Message) -> Record | None:
    """A reply's fields (``arrays`` too for a plaintext round); ``None`` for an error or none."""
    if message.has_error() or RECORD not in message.content.config_records:
        return None
    fields: Record = dict(message.content.config_records[RECORD])
    if ARRAYS in message.content.array_records:
        fields[ARRAYS] = message.content.array_records[ARRAYS]
    return fields


#: The messages of :class:`~fedprivacy.flower.dropin.private_fedavg.PrivateFedAvg`: ``train``
#: messages that the mod answers.
MOD_WIRE = Wire(MessageType.TRAIN, request_content, reply_fields)


def _returned_arrays(reply: Message) -> ArrayRecord:
    """The ``ArrayRecord`` the app's train function returned (named ``arrays``, or its only one)."""
    if reply.has_error():
        raise MalformedMessageError(f"the app's train function failed: {reply.error.reason}")
    records = reply.content.array_records
    if ARRAYS in records:
        return records[ARRAYS]
    if len(records) == 1:
        return next(iter(records.values()))
    raise MalformedMessageError("the app's train function returned no single ArrayRecord")


@dataclass
class ModNode(Node):
    """A node whose update is what the app's own train function returns.

    Parameters
    ----------
    training : callable
        Runs the app's train function on the request's message; returns the arrays it was given
        and the reply it returned.
    """

    training: Training | None = None

    def _user_update(self) -> NDArray[np.float64]:
        assert self.training is not None
        sent, reply = self.training()
        layout = ArrayLayout.of(sent)
        return layout.flatten(_returned_arrays(reply)) - layout.flatten(sent)

    def _clip(self, request: Record) -> float | None:
        """The L2 clip: the node's own; the server's ``clip`` only where the policy has none."""
        asked = request.get("clip", "")
        asked_clip = float(asked) if isinstance(asked, int | float) else None
        if self.policy.clip is None:
            return asked_clip
        if asked_clip is not None:
            self.policy.check_clip(asked_clip)
        return self.policy.clip

    def _clipped(
        self, request: Record, delta: NDArray[np.float64], clip: float
    ) -> NDArray[np.float64]:
        """The run's registered mechanism's clip factor at the node's ``clip``, never past it.

        Raises
        ------
        ParameterError
            Naming ``mechanism``, if the run's mechanism is not registered in this node's
            process: the node cannot apply it (it contributes nothing to the round).
        """
        import torch

        name, asked = request.get("mechanism", ""), request.get("noise_multiplier", "")
        if isinstance(name, str) and name:
            if name not in MECHANISMS:
                raise ParameterError("mechanism", f"{name!r} is not registered on this node")
            noise = float(asked) if isinstance(asked, int | float) else None
            mechanism = make_mechanism(name, noise_multiplier=noise, clip=clip)
            norm = torch.linalg.vector_norm(torch.from_numpy(delta)).reshape(1)
            delta = delta * float(mechanism.clip_factors(norm)[0])
        return clip_l2(delta, clip)[0]

    def _train(self, request: Record, state: dict[str, bytes]) -> Record:
        self.policy.check_secure(False)
        r = field(request, "round", int)
        answer_once(state, r)
        train_once(state, r, model_digest(request))
        assert self.training is not None
        _, reply = self.training()
        return {ARRAYS: _returned_arrays(reply)}

    def _carries_model(self, request: Record) -> bool:
        return ARRAYS in request

    def _contribution(
        self, request: Record, state: dict[str, bytes], params: SecAggParameters, answer: bool
    ) -> Contribution:
        """The app's training on the request's arrays, clipped to the node's own L2 clip."""
        r = field(request, "round", int)
        if answer:
            answer_once(state, r, params.session_id)
        train_once(state, r, model_digest(request))
        selected = self._selected(request)
        delta = self._user_update()
        if delta.size != params.dimension:
            raise MalformedMessageError(
                f"the model has {delta.size} parameters, the round's {params.dimension}"
            )
        clip = self._clip(request)
        values = delta if clip is None else self._clipped(request, delta, clip)
        bound = np.nextafter(np.nextafter(params.codec.clip, 0.0), 0.0)
        values = np.clip(values, -bound, bound)
        _LOG.info(
            "round %d: contributed an update of norm %.4g (clipped to %.4g, clip %s), noise "
            "variance %s on the grid, to a secure sum of %d users",
            r,
            float(np.linalg.norm(delta)),
            float(np.linalg.norm(values)),
            "none" if clip is None else f"{clip:g}",
            state.get("noise", b"").decode() or "0",
            len(selected),
        )
        # the stochastic rounding: this node's own randomness
        return Contribution(values, 1.0, secrets.randbits(63), model_digest(request))


ModNode.handlers = {**Node.handlers, Stage.TRAIN: ModNode._train}


def _user(node_config: Any) -> int:
    for key in USER_KEYS:
        if key in node_config:
            return int(node_config[key])
    raise ParameterError(
        "node_config",
        "the SuperNode needs --node-config 'partition-id=U' (or 'fedprivacy-user=U'): "
        "which user it is",
    )


def _node(msg: Message, ctx: Context, call_next: ClientAppCallable) -> ModNode:
    user = _user(ctx.node_config)
    policy = PartyPolicy.for_node(ctx.node_config, user)

    def training() -> tuple[ArrayRecord, Message]:
        sent = msg.content.array_records.get(ARRAYS)
        if sent is None:
            raise MalformedMessageError("the request carries no model arrays")
        ours = msg.content.config_records.pop(RECORD)
        try:  # the app sees its own records only
            return sent, call_next(msg, ctx)
        finally:
            msg.content.config_records[RECORD] = ours

    return ModNode(user, str(ctx.node_config.get("fedprivacy-fault", "")), policy, training)


def _plaintext(msg: Message, ctx: Context, call_next: ClientAppCallable) -> Message:
    """A ``train`` message of another strategy: the app answers only if the policy allows it."""
    try:
        policy = PartyPolicy.for_node(ctx.node_config, _user(ctx.node_config))
        policy.check_secure(False)
    except FedPrivacyError as exc:
        _LOG.warning("refused a plaintext round: %s: %s", type(exc).__name__, exc)
        return Message(Error(_PLAINTEXT_REFUSED, f"{type(exc).__name__}: {exc}"), reply_to=msg)
    return call_next(msg, ctx)


def fedprivacy_mod(msg: Message, ctx: Context, call_next: ClientAppCallable) -> Message:
    """The Flower mod (see the module docstring): ``ClientApp(mods=[fedprivacy_mod])``.

    Parameters
    ----------
    msg : flwr.app.Message
        The incoming message.
    ctx : flwr.app.Context
        The node's context; the protocol state lives in ``ctx.state``.
    call_next : callable
        The app's own handler (its ``@app.train`` function).

    Returns
    -------
    flwr.app.Message
        The stage's reply (a ``fedprivacy`` record), or the app's reply to a plaintext round.
    """
    if msg.metadata.message_type.split(".")[0] != MessageType.TRAIN:
        return call_next(msg, ctx)  # evaluation and queries are the app's own
    if RECORD not in msg.content.config_records:
        return _plaintext(msg, ctx, call_next)
    request: Record = dict(msg.content.config_records[RECORD])
    if ARRAYS in msg.content.array_records:  # the model (the stage at which the node trains)
        request[ARRAYS] = msg.content.array_records[ARRAYS]
    records = ctx.state.config_records
    state: dict[str, bytes] = dict(records[STATE]) if STATE in records else {}  # type: ignore[arg-type]
    try:
        node = _node(msg, ctx, call_next)
    except FedPrivacyError as exc:
        _LOG.warning("cannot serve: %s: %s", type(exc).__name__, exc)
        reply = error_reply(exc)
    else:
        reply = node.handle(request, state)
    records[STATE] = ConfigRecord(dict(state))
    content = RecordDict({RECORD: ConfigRecord({k: v for k, v in reply.items() if k != ARRAYS})})
    if ARRAYS in reply:
        content[ARRAYS] = reply[ARRAYS]
    return Message(content, reply_to=msg)
