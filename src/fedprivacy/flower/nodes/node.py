"""A node's side of a deployment: local training and the client of the secure aggregation protocol.

:meth:`Node.handle` answers one request (:mod:`fedprivacy.flower.messaging.stages`) and keeps what
the node must remember between stages in ``state``, a mapping of bytes. On Flower that mapping is
the ClientApp's ``context.state``, which the SuperNode keeps on the node's machine (each message may
be handled by a fresh ClientApp process); it holds the node's X25519 private keys, its self-mask
seed, the shares it holds for its neighbours and its update, and is never sent anywhere. The
in-process transport (:class:`fedprivacy.flower.messaging.transport.InProcessTransport`) keeps one
such mapping per user.

The node trains at the first stage of a round that carries the model: ``advertise``, or
``share`` when the server overlaps rounds (:mod:`fedprivacy.flower.fedavg.overlap`), or ``mask``
when it overlaps rounds and the node reuses its keys (:mod:`fedprivacy.flower.nodes.node_keys`: the
round then opens at ``share``); a second model in the same round is refused, so a node trains and
masks one update a round.

The node trains exactly as the in-process pipeline trains that user
(:meth:`fedprivacy.fl.engine.FederatedTraining.client_update`): the same configuration, the same
public partition, the same per-round randomness, so a deployment's aggregates equal the
simulation's bit for bit.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fedprivacy.errors import ParameterError
from fedprivacy.flower.messaging.identity import signed_hello
from fedprivacy.flower.messaging.joint_draw import on_commit, on_draw, on_reveal
from fedprivacy.flower.messaging.stages import (
    Record,
    Stage,
    decode_array,
    encode_array,
    field,
    model_digest,
)
from fedprivacy.flower.nodes.node_keys import advertise_epoch, record_mask, share_epoch
from fedprivacy.flower.nodes.node_policy import (
    answer_once,
    check_secure_round,
    check_training,
    check_unmask_request,
    consistency_check,
    parse_training,
    party_draw,
    train_once,
)
from fedprivacy.flower.nodes.party_state import PERSISTENT
from fedprivacy.flower.nodes.stage_handler import StageHandler, single_threaded
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.client import SecAggClient
from fedprivacy.secagg.errors import MalformedMessageError, OutOfOrderError
from fedprivacy.secagg.messages import encode_message
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.params_wire import decode_params, encode_params
from fedprivacy.secagg.state import dump_client, load_client

if TYPE_CHECKING:
    from fedprivacy.fl.engine import FederatedTraining

__all__ = ["Contribution", "Node", "training_for"]

_LOG = logging.getLogger("fedprivacy.node")


@functools.lru_cache(maxsize=4)
def training_for(config_toml: str) -> FederatedTraining:
    """The training a node runs for ``config_toml`` (a :class:`TrainConfig` as TOML), cached.

    Built as the in-process pipeline builds it (:func:`fedprivacy.fl.training_config.
    build_training`), with the reference trainer; the node only ever trains its own user.
    """
    from fedprivacy.fl.training_config import build_training

    config = parse_training(config_toml)
    return build_training(config.with_overrides(trainer="loop"))


def _compact(values: np.ndarray) -> bytes:
    """The clipped update for the node's state, as float32 when that is exact.

    The usual case: the update is float32 and only clipped entries are not; else float64. One
    tag byte says which.

    The state travels between the SuperNode and the ClientApp process at every stage, so its
    size matters (4 MB instead of 8 MB at a million parameters).
    """
    single = values.astype(np.float32)
    if np.array_equal(single.astype(np.float64), values):
        return b"4" + encode_array(single)
    return b"8" + encode_array(np.asarray(values, dtype=np.float64))


def _expand(data: bytes) -> np.ndarray:
    """Inverse of :func:`_compact` (float64)."""
    kinds: dict[bytes, type[np.generic]] = {b"4": np.float32, b"8": np.float64}
    if data[:1] not in kinds:
        raise MalformedMessageError("the stored update has an unknown encoding")
    return decode_array(data[1:], kinds[data[:1]]).astype(np.float64)


@dataclass(frozen=True)
class Contribution:
    """What a node masks in a round: its clipped update, weight, rounding seed and model.

    ``seed`` seeds the stochastic rounding of the encoding (:func:`~fedprivacy.fl.aggregation.
    rounding_rng`); ``model`` is the digest of the model the update was trained on
    (:func:`~fedprivacy.flower.messaging.stages.model_digest`), which binds the node's masks.
    """

    values: np.ndarray
    weight: float
    seed: int
    model: bytes = b""

    def keep(self, state: dict[str, bytes]) -> None:
        """Store it in the node's state until the mask stage."""
        state.update(
            values=_compact(self.values),
            weight=encode_array(np.array([self.weight], dtype=np.float64)),
            seed=str(self.seed).encode(),
            model=self.model,
        )


@dataclass
class Node(StageHandler):
    """One user's node.

    Parameters
    ----------
    user : int
        The fedprivacy user this node is (from its ``partition-id``).
    fault : str
        Fault injection for tests and demonstrations: ``"replay@R"`` makes the node send, in
        round ``R``'s masked-input stage, its reply of the previous stage again (a replayed
        message the server must reject with its typed error); empty for an honest node.
    """

    user: int
    fault: str = ""
    policy: PartyPolicy = dataclasses.field(default_factory=PartyPolicy)

    @property
    def party(self) -> int:
        """The user this node is."""
        return self.user

    # ------------------------------------------------------------------ stages
    def _hello(self, request: Record, state: dict[str, bytes]) -> Record:
        return signed_hello(self.user, self.policy, request)

    def _local_update(
        self, request: Record, state: dict[str, bytes], *, session: bytes | None = b""
    ) -> tuple[FederatedTraining, np.ndarray, float, int]:
        """Train on the request's model once; the round is answered in ``session`` (None: was)."""
        import torch

        config_toml = field(request, "config", str)
        r = field(request, "round", int)
        check_training(self.policy, parse_training(config_toml))
        if session is not None:
            answer_once(state, r, session)
        train_once(state, r, model_digest(request))
        training = training_for(config_toml)
        selected = decode_array(field(request, "selected", bytes), np.int64).tolist()
        model = decode_array(field(request, "model", bytes), np.float32)
        if model.shape != tuple(training.global_flat.shape):
            raise MalformedMessageError(
                f"the model has {model.size} parameters, the configured one "
                f"{training.global_flat.numel()}"
            )
        if self.user not in selected:
            raise ParameterError("user", f"user {self.user} was not selected in round {r}")
        training.global_flat = torch.from_numpy(model.copy()).to(training.torch_device)
        with single_threaded():
            delta, weight = training.client_update(self.user, selected, r)
        return training, delta, weight, r

    def _train(self, request: Record, state: dict[str, bytes]) -> Record:
        self.policy.check_secure(False)
        _, delta, weight, _ = self._local_update(request, state)
        return {"update": encode_array(delta), "weight": float(weight)}

    def _selected(self, request: Record) -> list[int]:
        """The round's selected users; :class:`ParameterError` unless this node's user is one."""
        selected: list[int] = decode_array(field(request, "selected", bytes), np.int64).tolist()
        if self.user not in selected:
            r = field(request, "round", int)
            raise ParameterError("user", f"user {self.user} was not selected in round {r}")
        return selected

    def _carries_model(self, request: Record) -> bool:
        """Whether ``request`` carries the model to train (else it comes with a later stage)."""
        return "model" in request

    def _contribution(
        self, request: Record, state: dict[str, bytes], params: SecAggParameters, answer: bool
    ) -> Contribution:
        """Train on the request's model; the clipped update the node masks."""
        session = params.session_id if answer else None
        training, delta, weight, _ = self._local_update(request, state, session=session)
        values, _ = training.aggregator.clip_update(delta, weight)
        return Contribution(values, weight, training.seed, model_digest(request))

    def _advertise(self, request: Record, state: dict[str, bytes]) -> Record:
        """Check the round; train now if the request carries the model; publish the keys."""
        params, noise = self._check_round(request, state)
        state["noise"] = noise.encode()  # what the contribution's log line states
        contribution = None
        if self._carries_model(request):
            contribution = self._contribution(request, state, params, answer=True)
        else:  # the model comes with the share request (rounds overlapped)
            answer_once(state, field(request, "round", int), params.session_id)
            self._selected(request)
        return self._begin_secure_round(params, noise, contribution, state)

    def _check_round(
        self, request: Record, state: dict[str, bytes]
    ) -> tuple[SecAggParameters, str]:
        """A secure round's parameters, checked against the policy, and the noise to add."""
        params = decode_params(field(request, "params", bytes))
        r = field(request, "round", int)
        if params.round_index != r:
            raise OutOfOrderError(f"parameters of round {params.round_index} in round {r}")
        return params, check_secure_round(self.policy, params, field(request, "noise", str), state)

    def _begin_secure_round(
        self,
        params: SecAggParameters,
        noise: str,
        contribution: Contribution | None,
        state: dict[str, bytes],
    ) -> Record:
        """Keep the protocol state (and the clipped update, if any) on the node; publish keys."""
        epoch = advertise_epoch(self.policy, self.user, params, state)
        client = SecAggClient(
            params, self.user, consistency=consistency_check(self.policy), epoch=epoch
        )
        return self._keep_round(client, noise, contribution, state, client.advertise_keys())

    def _keep_round(
        self,
        client: SecAggClient,
        noise: str,
        contribution: Contribution | None,
        state: dict[str, bytes],
        sent: Any,
    ) -> Record:
        """The new round's state: the client, its parameters, the noise, the update if any."""
        params = client.params
        message = encode_message(sent)
        keep = {k: state[k] for k in PERSISTENT if k in state}
        state.clear()
        state.update(
            keep,
            secagg=dump_client(client),
            params=encode_params(params),
            noise=noise.encode(),
            last=message,
        )
        if contribution is not None:
            contribution.keep(state)
        return {"message": message}

    def _client(self, state: dict[str, bytes]) -> SecAggClient:
        if "secagg" not in state:
            raise OutOfOrderError("no secure round in progress on this node")
        return load_client(
            decode_params(state["params"]),
            state["secagg"],
            user=self.user,
            consistency=consistency_check(self.policy),
        )

    def _step(
        self,
        state: dict[str, bytes],
        call: Callable[[SecAggClient], Any],
        client: SecAggClient | None = None,
    ) -> Record:
        client = client if client is not None else self._client(state)
        reply = encode_message(call(client))
        state["secagg"] = dump_client(client)
        state["last"] = reply
        return {"message": reply}

    def _open_at_share(self, request: Record, state: dict[str, bytes]) -> Record:
        """A round that opens at ``share``: the server holds this node's reused keys."""
        params, noise = self._check_round(request, state)
        epoch = share_epoch(self.policy, self.user, params, state)
        state["noise"] = noise.encode()  # what the contribution's log line states
        contribution = None
        if self._carries_model(request):
            contribution = self._contribution(request, state, params, answer=True)
        else:  # the model comes with the mask request (rounds overlapped)
            answer_once(state, params.round_index, params.session_id)
            self._selected(request)
        client = SecAggClient(
            params, self.user, consistency=consistency_check(self.policy), epoch=epoch
        )
        reply = client.share_keys(field(request, "message", bytes))
        return self._keep_round(client, noise, contribution, state, reply)

    def _train_late(self, request: Record, state: dict[str, bytes], client: SecAggClient) -> None:
        """Train now on the model this stage carries (rounds overlapped); once a round."""
        if "values" in state:
            raise OutOfOrderError("the model came again: this node trained in this round")
        r = field(request, "round", int)
        if r != client.params.round_index:
            raise OutOfOrderError(f"a model of round {r} in round {client.params.round_index}")
        self._contribution(request, state, client.params, answer=False).keep(state)

    def _share(self, request: Record, state: dict[str, bytes]) -> Record:
        """Share the keys; first train, if the model comes with this stage (rounds overlapped)."""
        if "params" in request:
            return self._open_at_share(request, state)
        message = field(request, "message", bytes)
        client = self._client(state)
        if self._carries_model(request):
            self._train_late(request, state, client)
        elif "values" not in state:
            raise OutOfOrderError("no model came for this round: nothing to share keys for")
        return self._step(state, lambda c: c.share_keys(message), client)

    def _mask(self, request: Record, state: dict[str, bytes]) -> Record:
        message = field(request, "message", bytes)
        client = self._client(state)
        if self._misbehaves("replay", client.params):
            return {"message": state["last"]}
        from fedprivacy.fl.aggregation import rounding_rng

        if self._carries_model(request):
            self._train_late(request, state, client)
        elif "values" not in state:
            raise OutOfOrderError("no model came for this round: nothing to mask")
        record_mask(self.policy, self.user, client.params, state)
        values = _expand(state["values"])
        kw: dict[str, Any] = {
            "rng": rounding_rng(int(state["seed"]), client.params.round_index, self.user)
        }
        if client.params.weighted:
            kw["weight"] = float(decode_array(state["weight"], np.float64)[0])
        kw["noise"] = party_draw(client.params, state["noise"].decode())
        kw["model"] = state.get("model", b"")
        return self._step(state, lambda c: c.masked_input(message, values, **kw), client)

    def _misbehaves(self, kind: str, params: SecAggParameters) -> bool:
        """Whether this node's ``fault`` (fault injection) names ``kind`` in this round."""
        if not self.fault:
            return False
        from fedprivacy.flower.faults.node_faults import fault_fires

        return fault_fires(self.fault, kind, params.round_index, self.user, params.participants)

    def _consistency(self, request: Record, state: dict[str, bytes]) -> Record:
        message = field(request, "message", bytes)
        client = self._client(state)
        check_unmask_request(self.policy, client.params, message)
        return self._step(state, lambda c: c.sign_survivors(message), client)

    def _unmask(self, request: Record, state: dict[str, bytes]) -> Record:
        message = field(request, "message", bytes)
        client = self._client(state)
        check_unmask_request(self.policy, client.params, message)
        reply = self._step(state, lambda c: c.unmask(message), client)
        if self._misbehaves("badshare", client.params):  # a malicious node
            from fedprivacy.flower.faults.node_faults import bend_shares

            reply = {"message": bend_shares(reply["message"])}
        keep = {k: state[k] for k in PERSISTENT if k in state}
        state.clear()  # the round is over: no key, seed or share stays on the node
        state.update(keep)
        return reply


Node.handlers = {
    Stage.HELLO: Node._hello,
    Stage.TRAIN: Node._train,
    Stage.ADVERTISE: Node._advertise,
    Stage.SHARE: Node._share,
    Stage.MASK: Node._mask,
    Stage.CONSISTENCY: Node._consistency,
    Stage.UNMASK: Node._unmask,
    Stage.COMMIT: on_commit,
    Stage.REVEAL: on_reveal,
    Stage.DRAW: on_draw,
}
