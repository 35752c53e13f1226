"""Cross-silo ULDP-FL over a transport: silos as nodes, Protocol 1 as message exchanges.

:func:`run_cross_silo` is what the ServerApp runs for ``task = "uldp"`` (and what tests run on
the in-process transport). The server holds
:class:`~fedprivacy.secagg.private_weighting.server.PrivateWeightingServer`; each silo's node
(:class:`~fedprivacy.flower.uldp.silo_node.SiloNode`) holds the silo's data and its side of the
protocol. Setup is three exchanges (``silo-key``: Paillier key and parameters, X25519 keys back;
``silo-roster``: the X25519 roster, silo 0's encrypted seed back; ``silo-seed``: the seed
delivery, the blinded histograms back), then every round is one (``silo-round``: the model, the
round's minibatch seed and ``Enc(B_inv(N_u))``; the masked, encrypted, noised weighted sums
back). The round loop and the round are those of an in-process run
(:class:`~fedprivacy.pipeline.loop.FederatedRun` with
:class:`~fedprivacy.uldp.algorithm.UldpAlgorithm`: the method's user selection, the ledger, the
accounting, the record); only the silos differ
(:class:`~fedprivacy.flower.uldp.silo_rounds.ProtocolSilos`).

The server proposes, each silo decides (:mod:`fedprivacy.flower.uldp.silo_policy`): a silo refuses
a session or a round that asks less than its own operator's policy (noise floor, clip, key
size, a round answered again), naming the parameter (``node_refused`` events).

A silo that does not answer a round, or whose reply the protocol refuses (replayed, out of
order, malformed: the typed errors of :mod:`fedprivacy.secagg.private_weighting.errors`), aborts
the round: Protocol 1 needs every silo's masks to cancel, and the server learns nothing from a
partial product. So do well-formed but wrong ciphertexts, seen only when the aggregate decrypts
out of range (an ``aggregate_rejected`` event; the server cannot tell whose they were). The
model then stays as it was and no user is aggregated (the ledger says so); the run goes on.
Setup needs every silo: if it fails (a silo refused the proposal or did not answer), no round
runs, nobody is charged, and the run directory is still written (``setup_failed`` in
``summary.json``). A lying server for the tests: ``forge``
(:mod:`fedprivacy.flower.faults.silo_forge`).

The run directory: ``config.toml``, ``roster.json`` (silo -> node id), ``events.jsonl``,
``participation.csv`` (the users aggregated in each round), ``aggregates.npz`` (each round's
decoded aggregate ``round_<t>`` and its minibatch seed ``keys_<t>``, its user sample
``sampled_<t>``), ``privacy.md`` and ``summary.json``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedprivacy.dp.accounting import quiet_accounting
from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.flower.faults.silo_forge import SILO_FORGES, SiloForge
from fedprivacy.flower.messaging.exchange import BeforeStage, StageExchange
from fedprivacy.flower.messaging.transport import Transport
from fedprivacy.flower.uldp.cross_silo_outputs import CrossSiloOutcome, TaskInfo, write_outputs
from fedprivacy.flower.uldp.silo_rounds import ProtocolSilos, SetupError, setup_session
from fedprivacy.participation.availability import AlwaysAvailable
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.pipeline.algorithm import RoundResult
from fedprivacy.pipeline.loop import FederatedRun
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.secagg.private_weighting.noise import accounted_noise_multiplier
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters
from fedprivacy.secagg.private_weighting.server import PrivateWeightingServer
from fedprivacy.uldp.algorithm import UldpAlgorithm, uldp_selector
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.deployment import (
    check_deployable,
    deployed_mechanism,
    session_parameters,
    silo_noise_std,
)
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.run_setup import initial_model, load_dataset, run_seeds

__all__ = ["SILO_FORGES", "run_cross_silo"]


def _noise_multiplier(cfg: UldpConfig, params: PrivateWeightingParameters) -> float | None:
    """``min(sigma, ...)`` of the silos' discrete Gaussians on the grid (as in-process).

    ``None`` for a mechanism without a noise multiplier: nothing is accounted.
    """
    assert cfg.clip is not None
    sigma = deployed_mechanism(cfg).noise_multiplier
    if sigma is None:
        return None
    return min(sigma, accounted_noise_multiplier(params, silo_noise_std(cfg), cfg.clip))


def _run(
    cfg: UldpConfig,
    exchange: StageExchange,
    model: torch.nn.Module,
    flat: torch.Tensor,
    evaluate: Callable[[torch.nn.Module], dict[str, float]],
    forged: SiloForge,
) -> CrossSiloOutcome:
    """Set Protocol 1 up and run the rounds; a failed setup ends the run without a round."""
    n_params = int(flat.numel())
    proposal = forged.proposal(cfg)  # what the silos are told (``cfg`` unless forged)
    proposal_toml = proposal.to_toml()
    seconds: dict[str, float] = {}

    def session() -> PrivateWeightingServer:
        sent = session_parameters(proposal, n_params, os.urandom(16))
        server = PrivateWeightingServer(forged.key_params(sent))
        for stage, took in setup_session(cfg, server, exchange, proposal_toml, sent).items():
            seconds.setdefault(stage, took)
        return server

    try:
        server = session()
    except SetupError as exc:
        exchange.log(round=0, event="setup_failed", detail=str(exc))
        nm = _noise_multiplier(cfg, session_parameters(cfg, n_params, bytes(16)))
        ledger = ParticipationLedger(cfg.users)
        return CrossSiloOutcome(ledger, [], {}, nm, exchange.events, flat, seconds, str(exc))
    train_rng = np.random.default_rng(run_seeds(cfg)[2])
    nm = _noise_multiplier(cfg, server.params)
    silos = ProtocolSilos(cfg, server, exchange, train_rng, nm, forge=forged, session=session)
    algorithm = UldpAlgorithm(
        silos,
        model,
        flat,
        evaluate,
        num_users=cfg.users,
        sampled_method=method_spec(cfg.method).sampled,
        eval_every=cfg.eval_every,
    )

    def logged(result: RoundResult[RoundRecord]) -> None:
        exchange.log(
            round=result.record.round_index + 1,
            event="round",
            selected=[int(u) for u in silos.selected],
            aggregated=[int(u) for u in result.aggregated],
            aborted=silos.aborted,
            metric=result.record.get("metric"),
            seconds=result.record.seconds,
        )

    loop: FederatedRun[RoundRecord] = FederatedRun(
        uldp_selector(cfg),
        AlwaysAvailable(cfg.users),
        algorithm,
        selection_rng=lambda _t: train_rng,
        callbacks=[logged],
    )
    with quiet_accounting():
        records = [res.record for res in loop.run(cfg.rounds)]
    events = exchange.events
    return CrossSiloOutcome(
        loop.ledger, records, silos.aggregates, nm, events, algorithm.flat, seconds
    )


def run_cross_silo(
    config: UldpConfig,
    transport: Transport,
    run_dir: Path,
    *,
    roster: Mapping[int, int] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    pause: BeforeStage | None = None,
    forge: str = "",
) -> dict[str, Any]:
    """Run ``config.rounds`` rounds of a ``-w`` ULDP-FL method over ``transport``.

    Parameters
    ----------
    config : UldpConfig
        The run; its method must be ULDP-AVG-w, -AVG-ws, -SGD-w or -SGD-ws.
    transport : Transport
        Reaches the silos ``0 .. |S|-1``.
    run_dir : pathlib.Path
        Where the outputs go (see the module docstring).
    roster : mapping of int to int, optional
        Silo -> node id, written to ``roster.json``.
    on_event : callable, optional
        Called with each event.
    pause : callable, optional
        Fault injection before each stage (:class:`fedprivacy.flower.deploy.run.StagePause`).
    forge : str
        Fault injection, a lying server: ``"NAME=VALUE,..."`` with names in
        :data:`SILO_FORGES` (:mod:`fedprivacy.flower.faults.silo_forge`); every silo must refuse.

    Returns
    -------
    dict
        The summary (also ``summary.json``); ``setup_failed`` says why no round ran if the
        setup failed (a silo refused the proposal or did not answer).

    Raises
    ------
    ParameterError
        If the method cannot deploy, the transport does not reach every silo or ``forge`` is
        not one of :data:`SILO_FORGES`.
    """
    cfg = check_deployable(config)
    if tuple(transport.users) != tuple(range(cfg.num_silos)):
        raise ParameterError(
            "silos", f"the transport reaches {list(transport.users)}, the run has {cfg.num_silos}"
        )
    forged = SiloForge.parse(forge)
    forged.proposal(cfg)  # a forge that makes no valid configuration is refused here
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.toml", cfg.to_toml())
    atomic_write_json(
        run_dir / "roster.json",
        {str(s): n for s, n in sorted((roster or {s: s for s in transport.users}).items())},
    )
    started = time.perf_counter()
    ds = load_dataset(cfg)  # for the architecture and the test set; no allocation is made
    task, model, flat = initial_model(cfg, ds)
    test_x, test_y = ds.pooled_test()
    tx, ty = torch.from_numpy(np.array(test_x)), torch.from_numpy(np.array(test_y))
    info = TaskInfo(task.metric_name, ds.source, task.task, task.evaluate(model, tx, ty))
    with (run_dir / "events.jsonl").open("w", encoding="utf-8") as log_file:

        def event(e: dict[str, Any]) -> None:
            log_file.write(json.dumps(e) + "\n")
            log_file.flush()
            if on_event is not None:
                on_event(e)

        exchange = StageExchange(transport, on_event=event, before_stage=pause)
        outcome = _run(cfg, exchange, model, flat, lambda m: task.evaluate(m, tx, ty), forged)
    return write_outputs(cfg, run_dir, outcome, info, transport, started)
