"""The in-process pipeline a deployment is compared with: same configuration, same events.

:func:`simulate` runs :class:`~fedprivacy.fl.engine.FederatedTraining` (the reference trainer,
the in-process protocol driver) with the availability the deployment saw
(:class:`~fedprivacy.participation.availability.TraceAvailability` of
:attr:`fedprivacy.flower.fedavg.training.LiveNodes.trace`) and its protocol dropouts replayed
(:func:`observed_dropouts`) and the batch layout its nodes drew (:func:`observed_layout`);
:func:`max_abs_error` compares the two runs' aggregates. The masks
and keys differ between the runs (fresh OS randomness), the aggregates must not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.messaging.stages import Stage
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.secagg.driver import Stage as ProtocolStage

__all__ = ["max_abs_error", "observed_dropouts", "observed_layout", "simulate"]

_PROTOCOL_STAGE = {
    Stage.ADVERTISE: ProtocolStage.ADVERTISE_KEYS,
    Stage.SHARE: ProtocolStage.SHARE_KEYS,
    Stage.MASK: ProtocolStage.MASKED_INPUT,
    Stage.CONSISTENCY: ProtocolStage.UNMASK,  # a node that does not sign is not asked to unmask
    Stage.UNMASK: ProtocolStage.UNMASK,
}
_FAILED = ("no_reply", "rejected", "node_refused")


def observed_dropouts(events: Iterable[Mapping[str, Any]]) -> dict[int, dict[int, ProtocolStage]]:
    """Round -> user -> the first secure stage at which the user's reply did not count.

    Examples
    --------
    >>> observed_dropouts([{"round": 1, "stage": "mask", "user": 4, "event": "no_reply"},
    ...                    {"round": 1, "stage": "unmask", "user": 4, "event": "no_reply"}])
    {1: {4: <Stage.MASKED_INPUT: 2>}}
    """
    out: dict[int, dict[int, ProtocolStage]] = {}
    for e in events:
        if e.get("event") not in _FAILED or Stage(e["stage"]) not in _PROTOCOL_STAGE:
            continue
        stage = _PROTOCOL_STAGE[Stage(e["stage"])]
        per_round = out.setdefault(int(e["round"]), {})
        user = int(e["user"])
        per_round[user] = min(per_round.get(user, stage), stage)
    return out


def observed_layout(events: Iterable[Mapping[str, Any]]) -> BatchLayout | None:
    """The batch layout the nodes drew (the ``layout`` event), if any.

    >>> observed_layout([{"round": 0, "event": "layout", "order": [2, 0, 1, 3]}]).order
    (2, 0, 1, 3)
    """
    for e in events:
        if e.get("event") == "layout":
            return BatchLayout(tuple(int(u) for u in e["order"]))
    return None


def simulate(
    config: TrainConfig,
    trace: Sequence[NDArray[np.bool_]],
    dropouts: Mapping[int, Mapping[int, ProtocolStage]],
    layout: BatchLayout | None = None,
) -> dict[int, NDArray[np.float64]]:
    """The in-process pipeline's aggregate (mean update) of each round that aggregated.

    Parameters
    ----------
    config : TrainConfig
        The deployment's configuration (its trainer is replaced by the reference ``loop``,
        on one thread as on the nodes).
    trace : sequence of numpy.ndarray of bool
        The availability of each round as the deployment saw it.
    dropouts : mapping
        The protocol dropouts the deployment observed (:func:`observed_dropouts`).
    layout : BatchLayout, optional
        The batch layout the deployment's nodes drew (:func:`observed_layout`).

    Returns
    -------
    dict of int to numpy.ndarray
        Round -> the aggregated mean update.
    """
    from fedprivacy.fl.secure_aggregation import SecureAggregator
    from fedprivacy.fl.training_config import build_training
    from fedprivacy.flower.nodes.stage_handler import single_threaded
    from fedprivacy.participation.availability import TraceAvailability

    means: dict[int, NDArray[np.float64]] = {}

    def keep(r: int, outcome: Any, deltas: Any) -> None:
        if outcome.mean_update is not None:
            means[r] = outcome.mean_update

    training = build_training(
        config.with_overrides(trainer="loop"),
        availability=TraceAvailability(np.asarray(trace, dtype=np.uint8)),
        on_aggregate=keep,
    )
    if isinstance(training.aggregator, SecureAggregator):
        training.aggregator.scripted_dropouts = dropouts
    if layout is not None:
        training.use_layout(layout)
    with single_threaded():  # as the nodes train
        training.run(len(trace))
    return means


def max_abs_error(
    deployed: Mapping[int, NDArray[np.float64]], simulated: Mapping[int, NDArray[np.float64]]
) -> float:
    """Largest absolute difference between the two runs' aggregates.

    ``inf`` if the rounds that aggregated differ.

    Examples
    --------
    >>> max_abs_error({0: np.array([1.0, 2.0])}, {0: np.array([1.0, 2.5])})
    0.5
    >>> max_abs_error({0: np.zeros(2)}, {})
    inf
    """
    if sorted(deployed) != sorted(simulated):
        return math.inf
    return max((float(np.max(np.abs(deployed[r] - simulated[r]))) for r in deployed), default=0.0)
