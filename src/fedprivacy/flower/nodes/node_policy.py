"""A user's node and its policy in a FedAvg deployment: what it accepts of a training request.

:func:`training_policy` is the policy of an operator who agrees with a
:class:`~fedprivacy.fl.training_config.TrainConfig` (what ``fedprivacy flower deploy``
writes for each local node). :func:`check_training` checks the configuration a request carries
against a node's policy before the node trains: a secure run, the distributed noise floor and
the clip of a node with one, and the batch size ``T``.

Examples
--------
>>> from fedprivacy.fl.training_config import TrainConfig
>>> config = TrainConfig(users=6, secagg=True, dp="distributed", noise_multiplier=1.0, clip=0.5)
>>> policy = training_policy(config)
>>> (policy.noise_multiplier, policy.clip, policy.allow_plaintext)
(1.0, 0.5, False)
>>> check_training(policy, config)
>>> try:
...     check_training(policy, config.with_overrides(noise_multiplier=1e-6))
... except PolicyViolationError as exc:
...     print(exc.name)
noise_multiplier
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import TYPE_CHECKING

from fedprivacy.config_sections import DEFAULT_NOISE_MODE
from fedprivacy.crypto.signing import Roster, SigningKey
from fedprivacy.dp.noise_modes import NOISE_MODES, NoiseDraw
from fedprivacy.dp.party_noise import PartyNoise, RoundNoise
from fedprivacy.errors import PolicyViolationError
from fedprivacy.flower.messaging.joint_draw import check_batch_layout, check_graph_seed
from fedprivacy.flower.messaging.noise_request import parse_noise_request
from fedprivacy.participation.selectors import SELECTORS
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.consistency import ConsistencyCheck
from fedprivacy.secagg.errors import MalformedMessageError
from fedprivacy.secagg.messages import ConsistencyRequest, UnmaskRequest, decode_message
from fedprivacy.secagg.params import SecAggParameters

if TYPE_CHECKING:
    from fedprivacy.fl.training_config import TrainConfig

__all__ = [
    "PolicyViolationError",
    "answer_once",
    "check_secure_round",
    "check_training",
    "check_unmask_request",
    "consistency_check",
    "parse_training",
    "party_draw",
    "spend_budget",
    "train_once",
    "training_policy",
]


def batch_size_of(config: TrainConfig) -> int:
    """``T`` of the configuration's batches: 1 unless its aggregated sets are whole batches."""
    if not SELECTORS[config.scheme].batched or config.batch_policy == "partial":
        return 1
    return int(config.target_privacy or 1)


def _distributed(config: TrainConfig) -> bool:
    """Whether the run's mechanism has the parties add the noise (``distributed`` or any such)."""
    return config.mechanism().adds_noise_in_aggregation


def training_policy(config: TrainConfig) -> PartyPolicy:
    """The policy of a node whose operator agrees with ``config``.

    A configured SecAgg+ degree (``secagg_degree``) is the operator's ``min_degree``; without
    one the node computes its floor for each round (:meth:`PartyPolicy.check_degree`), which
    the server's default degree meets.
    """
    dp = config.dp != "none"
    return PartyPolicy(
        noise_multiplier=config.noise_multiplier if _distributed(config) else None,
        clip=(1.0 if config.clip is None else config.clip) if dp else None,
        batch_size=batch_size_of(config),
        allow_plaintext=not config.secagg,
        noise_mode=config.noise_mode,
        min_degree=config.secagg_degree if config.secagg else None,
    )


def check_training(policy: PartyPolicy, config: TrainConfig) -> None:
    """Refuse a training configuration that asks less than ``policy`` (before any training).

    Raises
    ------
    PolicyViolationError
        Naming ``secure``, ``noise_multiplier``, ``clip`` or ``batch_size``.
    """
    policy.check_secure(config.secagg)
    if policy.noise_multiplier is not None:
        if not _distributed(config):
            raise PolicyViolationError(
                "noise_multiplier",
                f"dp = {config.dp!r} requested; this party adds its own noise (a mechanism whose "
                "parties add noise, such as 'distributed')",
            )
        policy.check_noise(config.noise_multiplier)
    if policy.clip is not None:
        policy.check_clip(1.0 if config.clip is None or config.dp == "none" else config.clip)
    policy.check_batch_size(batch_size_of(config))


@functools.lru_cache(maxsize=4)
def parse_training(config_toml: str) -> TrainConfig:
    """The :class:`TrainConfig` a request carries (cached); :class:`MalformedMessageError`."""
    import tomllib

    from fedprivacy.fl.training_config import TrainConfig

    try:
        data = tomllib.loads(config_toml)
    except tomllib.TOMLDecodeError as exc:
        raise MalformedMessageError(f"the training configuration is not TOML: {exc}") from exc
    return TrainConfig.from_mapping(data)


def answer_once(state: dict[str, bytes], round_index: int, session: bytes = b"") -> None:
    """Refuse a round index at or before the last one answered in ``session``; else note it.

    A node that answered round ``r`` twice would let the server average the round's noise
    away (or see two maskings of one update) while its ledger counts one round. The record
    (``state["answered"]``: each session's last round, ``session`` the secure aggregation's
    session id, empty for a plaintext round) outlives every run
    (:mod:`fedprivacy.flower.nodes.party_state`); a new session starts its rounds anew, and
    :func:`train_once` refuses the same round's model in it.

    Raises
    ------
    PolicyViolationError
        Naming ``round``.

    Examples
    --------
    >>> state = {}
    >>> answer_once(state, 0, b"A"); answer_once(state, 0, b"B"); answer_once(state, 1, b"A")
    >>> answer_once(state, 1, b"A")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.PolicyViolationError: round: round 1 requested after round 1 was \
answered: a party answers each round once, in order (a repeated round would average its noise \
away)
    """
    answered: dict[str, int] = json.loads(state.get("answered", b"{}"))
    last = answered.get(session.hex())
    if last is not None and round_index <= last:
        raise PolicyViolationError(
            "round",
            f"round {round_index} requested after round {last} was answered: a party "
            "answers each round once, in order (a repeated round would average its noise away)",
        )
    answered[session.hex()] = int(round_index)
    state["answered"] = json.dumps(answered, sort_keys=True).encode()


TRAINED_KEPT = 1024
"""How many (round, model) pairs a party remembers having trained on."""


def train_once(state: dict[str, bytes], round_index: int, model: bytes) -> None:
    """Refuse to train twice on one model in one round index, in any session or run.

    The party's training is a function of the model and the round (its minibatches): asked
    again, it would send the same update with fresh noise, whose average loses the noise. A new
    session asking an old round with its old model is that replay; a round after an aborted one
    (the same model, the next index) is not. The last :data:`TRAINED_KEPT` pairs are kept in
    ``state["trained"]`` (:mod:`fedprivacy.flower.nodes.party_state`).

    Raises
    ------
    PolicyViolationError
        Naming ``model``.

    Examples
    --------
    >>> state = {}
    >>> train_once(state, 0, b"m"); train_once(state, 1, b"m")
    >>> train_once(state, 0, b"m")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.PolicyViolationError: model: this party already trained on this model \
in round 0 (a replay would average its noise away)
    """
    trained: list[str] = json.loads(state.get("trained", b"[]"))
    pair = f"{int(round_index)}:{model.hex()}"
    if pair in trained:
        raise PolicyViolationError(
            "model",
            f"this party already trained on this model in round {int(round_index)} (a replay "
            "would average its noise away)",
        )
    trained = [*trained, pair][-TRAINED_KEPT:]
    state["trained"] = json.dumps(trained).encode()


def spend_budget(policy: PartyPolicy, state: dict[str, bytes]) -> None:
    """Refuse one more round past the policy's epsilon budget; else count it in ``state``.

    ``state["spent"]`` counts the rounds the party contributed to (it outlives each round).

    Raises
    ------
    PolicyViolationError
        Naming ``epsilon_budget``.
    """
    spent = int(state.get("spent", b"0"))
    policy.check_budget(spent)
    state["spent"] = str(spent + 1).encode()


def check_secure_round(
    policy: PartyPolicy, params: SecAggParameters, noise: str, state: dict[str, bytes]
) -> str:
    """Check a secure round's parameters and noise against ``policy``; the noise to add.

    The threshold and the share holders (SecAgg+ degree) must reach the policy's minimums, and
    one more round must fit the party's
    epsilon budget (:func:`spend_budget`, which counts it). A node with a noise floor
    computes, from the round's own codec, threshold, parties and dimension, the variance its
    floor needs on the grid in its own noise mode (:meth:`~fedprivacy.dp.party_noise.PartyNoise.
    round_noise` with its own noise multiplier, clip and mode) and refuses a request for less or
    in another mode; it adds the variance requested (at least that). The exact mode also needs
    the node's consistency check.

    Raises
    ------
    PolicyViolationError
        Naming ``threshold``, ``degree``, ``graph_seed``, ``batch_layout``, ``epsilon_budget``,
        ``noise_multiplier`` or ``noise_mode``.
    MalformedMessageError
        If ``noise`` is not a noise request (:mod:`fedprivacy.flower.messaging.noise_request`).
    """
    policy.check_authenticated()
    policy.check_threshold(params.threshold, params.min_holders)
    policy.check_degree(params.min_holders, params.num_users)
    check_graph_seed(params, state)
    check_batch_layout(policy, params, state)
    spend_budget(policy, state)
    requested = parse_noise_request(noise)
    mode = requested[0] if requested is not None else policy.noise_mode
    if mode != DEFAULT_NOISE_MODE and consistency_check(policy) is None:
        raise PolicyViolationError(
            "noise_mode", f"{mode} noise needs this node's consistency check (signing_key, roster)"
        )
    if policy.noise_multiplier is None:
        return noise
    if requested is not None and mode != policy.noise_mode:
        raise PolicyViolationError(
            "noise_mode", f"{mode} noise requested; this party adds {policy.noise_mode} noise"
        )
    floor = _round_noise(policy, params).variance
    if requested is None or requested[1] < floor:
        asked = "no noise" if requested is None else f"a variance of {float(requested[1]):.6g}"
        raise PolicyViolationError(
            "noise_multiplier",
            f"{asked} on the grid requested; this party's floor (noise multiplier "
            f"{policy.noise_multiplier:g}, clip {policy.clip:g}, threshold {params.threshold}, "
            f"{policy.noise_mode}) needs {float(floor):.6g}",
        )
    return noise


def _round_noise(policy: PartyPolicy, params: SecAggParameters) -> RoundNoise:
    """The round's noise at the party's own floor (noise multiplier, clip, mode)."""
    assert policy.noise_multiplier is not None and policy.clip is not None
    party = PartyNoise(policy.noise_multiplier, policy.clip, policy.noise_mode)
    n = len(params.participants)
    return party.round_noise(params.codec, policy.clip, params.threshold, params.dimension, n)


def party_draw(params: SecAggParameters, noise: str) -> NoiseDraw | None:
    """What the node adds for the checked request ``noise``: its variance, in its mode.

    In the exact mode the components to draw and the total to keep come from the round's own
    parameters (``ceil(n / t)`` and ``n``), never from the server.
    """
    requested = parse_noise_request(noise)
    if requested is None:
        return None
    mode, variance = requested
    plan = NOISE_MODES.lookup(mode)(
        variance, threshold=params.threshold, parties=len(params.participants)
    )
    return dataclasses.replace(plan, variance=variance)


def check_unmask_request(policy: PartyPolicy, params: SecAggParameters, message: bytes) -> None:
    """Refuse to sign or unmask an aggregated set that is not a union of whole batches.

    The batches are the round's layout (``params.positions``, checked against the node's own
    draw when the round opened, :func:`~fedprivacy.flower.messaging.joint_draw.check_batch_layout`).

    ``message`` is the server's :class:`ConsistencyRequest` or :class:`UnmaskRequest`.

    Raises
    ------
    PolicyViolationError
        Naming ``batch_size``.
    """
    request = decode_message(message)
    if isinstance(request, UnmaskRequest | ConsistencyRequest):
        policy.check_aggregated(request.aggregated, params.participants, params.position)


def consistency_check(policy: PartyPolicy) -> ConsistencyCheck | None:
    """The node's survivor-list check: its own key and the federation's roster, from its files.

    On exactly when the policy names both (``deploy`` writes them with node authentication);
    then the node unmasks only a set that a strict majority signed
    (:mod:`fedprivacy.secagg.consistency`).
    """
    if not (policy.signing_key and policy.roster):
        return None
    return _consistency_check(policy.signing_key, policy.roster)


@functools.lru_cache(maxsize=4)
def _consistency_check(signing_key: str, roster: str) -> ConsistencyCheck:
    return ConsistencyCheck(SigningKey.from_file(signing_key), Roster.from_file(roster))
