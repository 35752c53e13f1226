"""One deployed run, whatever the transport: the round loop, the event log and the run directory.

:func:`run_deployed` is what the ServerApp runs (:mod:`fedprivacy.flower.deploy.apps`), and what
tests run on the in-process transport. It writes into the run directory::

    config.toml         the training configuration the nodes received
    roster.json         user -> node id (who is who in the Multi-RoundSecAgg batches)
    events.jsonl        one line per event as it happens (stages, dropouts, rejections, wrong
                        unmasking shares left out, rounds aborted by a protocol error, rounds,
                        the server's view after each round from the live audit: server_view)
    availability.npy    the users reachable in each round, as the server saw them
    aggregates.npz      each aggregated round's mean update (``round_<t>``)

and what ``fedprivacy train --out`` writes of the same run
(:func:`fedprivacy.experiments.training_run.write_outputs`: ``metrics.csv``, ``summary.md``,
``privacy.md``, ``participation.csv``, the plots), its ``summary.json`` with the deployment's
keys added (rounds aggregated, aborted and skipped, SuperNodes, bytes, the events of
rejections, dropouts, wrong shares and aborted rounds): what ``fedprivacy flower deploy --json``
prints (before the comparison).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np

from fedprivacy.crypto.signing import Roster
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.fedavg.training import DeployedTraining, LiveNodes
from fedprivacy.flower.messaging.stages import Stage
from fedprivacy.flower.messaging.transport import Transport

__all__ = ["StagePause", "run_deployed"]


class StagePause:
    """Holds the server before one stage until a file appears (fault injection, demonstrations).

    ``fedprivacy flower deploy --kill U@R:STAGE`` pauses round ``R`` before ``STAGE``,
    kills user ``U``'s SuperNode (``*``: the last user asked in that stage), then creates the
    file; the stage then runs without that node.

    Parameters
    ----------
    spec : str
        ``"R:STAGE"`` (for example ``"1:mask"``), or empty for no pause.
    resume_file : pathlib.Path
        The file whose creation ends the pause.
    limit : float
        The most seconds to wait.
    """

    def __init__(self, spec: str, resume_file: Path, limit: float = 120.0) -> None:
        self.at: tuple[int, Stage] | None = None
        if spec:
            r, _, stage = spec.partition(":")
            self.at = (int(r), Stage(stage))
        self.resume_file = resume_file
        self.limit = limit

    def __call__(
        self, round_index: int, stage: Stage, users: list[int], log: Callable[..., None]
    ) -> None:
        """Wait if ``(round_index, stage)`` is the pause point (the event names ``users``)."""
        if self.at != (round_index, stage):
            return
        log(round=round_index, stage=stage.value, event="paused", asked=users)
        deadline = time.monotonic() + self.limit
        while not self.resume_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        log(round=round_index, stage=stage.value, event="resumed")


def _write_inputs(
    config: TrainConfig, transport: Transport, run_dir: Path, roster: Mapping[int, int] | None
) -> None:
    """``config.toml`` and ``roster.json``: what the nodes received, who is who."""
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.toml", config.to_toml())
    atomic_write_json(
        run_dir / "roster.json",
        {str(u): n for u, n in sorted((roster or {u: u for u in transport.users}).items())},
    )


def _train(
    config: TrainConfig,
    transport: Transport,
    run_dir: Path,
    *,
    pause: StagePause | None,
    on_event: Callable[[dict[str, Any]], None] | None,
    forged: list[dict[str, str]],
    signers: Roster | None,
    overlap: bool = False,
) -> tuple[DeployedTraining, float]:
    """The round loop, each event appended to ``events.jsonl``; the training and its seconds."""
    from fedprivacy.fl.training_config import build_training

    log_file = (run_dir / "events.jsonl").open("w", encoding="utf-8")

    def event(e: dict[str, Any]) -> None:
        log_file.write(json.dumps(e) + "\n")
        log_file.flush()
        if on_event is not None:
            on_event(e)

    started = time.perf_counter()
    try:
        training = cast(
            DeployedTraining,
            build_training(
                config,
                training_class=DeployedTraining,
                availability=LiveNodes(config.users, transport.users),
                transport=transport,
                config_toml=config.to_toml(),
                on_event=event,
                forges=forged,
                signers=signers,
                overlap=overlap,
            ),
        )
        if pause is not None:
            training.before_stage = pause
        training.loop.callbacks = (*training.loop.callbacks, _server_view_event(training, event))
        training.run(config.rounds)
    finally:
        log_file.close()
    return training, time.perf_counter() - started


def _server_view_event(
    training: DeployedTraining, event: Callable[[dict[str, Any]], None]
) -> Callable[[object], None]:
    """A callback of the round loop: the live audit's view after each round, as an event."""

    def log(_: object) -> None:
        view = training.loop.view
        if view is not None:
            event({"round": view.rounds - 1, "event": "server_view", **view.to_dict()})

    return log


def _write_round_outputs(training: DeployedTraining, run_dir: Path) -> None:
    """``availability.npy`` and ``aggregates.npz``."""
    assert isinstance(training.availability, LiveNodes)
    np.save(run_dir / "availability.npy", np.array(training.availability.trace, dtype=np.bool_))
    arrays: dict[str, Any] = {f"round_{r}": a for r, a in training.aggregates.items()}
    np.savez(run_dir / "aggregates.npz", **arrays)


def _deployment_summary(
    config: TrainConfig,
    transport: Transport,
    training: DeployedTraining,
    seconds: float,
    run_dir: Path,
) -> dict[str, Any]:
    """The deployment's own summary keys: rounds, traffic, the faults it saw."""
    records = training.records
    events = training.events
    return {
        "rounds": len(records),
        "rounds_aggregated": sum(1 for r in records if r.aggregated),
        "rounds_aborted": sum(1 for r in records if r.aborted),
        "rounds_skipped": sum(1 for r in records if not r.selected),
        "supernodes": len(transport.users),
        "secagg": config.secagg,
        "seconds": seconds,
        "seconds_per_round": seconds / max(len(records), 1),
        "bytes_sent": transport.sent_bytes,
        "bytes_received": transport.received_bytes,
        "participation": str(run_dir / "participation.csv"),
        "rejected": [e for e in events if e.get("event") in ("rejected", "node_refused")],
        "dropouts": [e for e in events if e.get("event") == "no_reply"],
        "bad_shares": [e for e in events if e.get("event") == "bad_share"],
        "aborted": [e for e in events if e.get("event") == "round_aborted"],
    }


def run_deployed(
    config: TrainConfig,
    transport: Transport,
    run_dir: Path,
    *,
    roster: Mapping[int, int] | None = None,
    pause: StagePause | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    forge: str = "",
    signers: Roster | None = None,
    overlap: bool = False,
) -> dict[str, Any]:
    """Run ``config.rounds`` rounds over ``transport`` and write the run directory.

    Parameters
    ----------
    config : TrainConfig
        The training. Its ``dropout`` is replaced by 0 (availability is what the nodes do, not a
        simulated draw), and its trainer by the reference loop the nodes run.
    transport : Transport
        Reaches the nodes.
    run_dir : pathlib.Path
        Where the outputs go (created).
    roster : mapping of int to int, optional
        User -> node id, written to ``roster.json`` (the transport's users by default).
    pause : StagePause, optional
        Fault injection.
    on_event : callable, optional
        Called with every event (after it is appended to ``events.jsonl``).
    forge : str
        Fault injection, a lying server (:mod:`fedprivacy.flower.faults.lying_server`).
    signers : Roster, optional
        The federation's public keys: every secure round runs the consistency check.
    overlap : bool
        Three exchanges a secure round (:mod:`fedprivacy.flower.fedavg.overlap`).

    Returns
    -------
    dict
        The summary (also ``summary.json``).
    """
    from fedprivacy.experiments.training_run import finished, write_outputs
    from fedprivacy.flower.faults.lying_server import forges_by_round

    config = config.with_overrides(dropout=0.0, trainer="loop")
    forged = forges_by_round(forge)
    _write_inputs(config, transport, run_dir, roster)
    started = time.perf_counter()
    training, seconds = _train(
        config,
        transport,
        run_dir,
        pause=pause,
        on_event=on_event,
        forged=forged,
        signers=signers,
        overlap=overlap,
    )
    _write_round_outputs(training, run_dir)
    result = finished(config, training, started)
    extra = _deployment_summary(config, transport, training, seconds, run_dir)
    write_outputs(result, run_dir, extra)
    return {**result.summary(), **extra}
