"""Cross-silo ULDP-FL over a transport: silos as nodes, Protocol 1 as message exchanges.

:func:`run_cross_silo` is what the ServerApp runs for ``task = "uldp"`` (and what tests run on
the in-process transport). The server holds
:class:`~fedprivacy.secagg.private_weighting.server.PrivateWeightingServer`; each silo's node
(:class:`~fedprivacy.flower.silo_node.SiloNode`) holds the silo's data and its side of the
protocol. Setup is three exchanges (``silo-key``: Paillier key and parameters, X25519 keys back;
``silo-roster``: the X25519 roster, silo 0's encrypted seed back; ``silo-seed``: the seed
delivery, the blinded histograms back), then every round is one (``silo-round``: the model, the
round's minibatch seed and ``Enc(B_inv(N_u))``; the masked, encrypted, noised weighted sums
back). The round loop is the pipeline's (:class:`~fedprivacy.pipeline.loop.FederatedRun`:
the method's user selection, the ledger); :class:`CrossSiloAlgorithm` is its round.

The server proposes, each silo decides (:mod:`fedprivacy.flower.silo_policy`): a silo refuses
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
``summary.json``). A lying server for the tests: ``forge`` (:mod:`fedprivacy.flower.silo_forge`).

The run directory: ``config.toml``, ``roster.json`` (silo -> node id), ``events.jsonl``,
``participation.csv`` (the users aggregated in each round), ``aggregates.npz`` (each round's
decoded aggregate ``round_<t>`` and its minibatch seed ``keys_<t>``, its user sample
``sampled_<t>``), ``privacy.md`` and ``summary.json``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.dp.accounting import PrivacyAccountant, quiet_accounting
from fedprivacy.dp.distributed_discrete import check_negligible, grid_noise_multiplier
from fedprivacy.errors import FedPrivacyError, ParameterError
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.fl.params import load_flat_
from fedprivacy.flower.cross_silo_outputs import CrossSiloOutcome, write_outputs
from fedprivacy.flower.exchange import BeforeStage, StageExchange
from fedprivacy.flower.silo_forge import SILO_FORGES, SiloForge
from fedprivacy.flower.stages import Record, Stage, encode_array
from fedprivacy.flower.transport import Transport
from fedprivacy.participation.availability import AlwaysAvailable
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.pipeline.algorithm import Algorithm, RoundContext, RoundResult
from fedprivacy.pipeline.loop import FederatedRun
from fedprivacy.secagg.private_weighting.errors import (
    AggregateOutOfRangeError,
    PrivateWeightingError,
    UnknownSenderError,
)
from fedprivacy.secagg.private_weighting.messages import decode_message, encode_message
from fedprivacy.secagg.private_weighting.noise import grid_variance
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters
from fedprivacy.secagg.private_weighting.server import PrivateWeightingServer
from fedprivacy.secagg.private_weighting.state import encode_params
from fedprivacy.uldp.algorithm import uldp_selector
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.deployment import check_deployable, session_parameters, silo_noise_std
from fedprivacy.uldp.families import FAMILIES
from fedprivacy.uldp.families.user_level import global_step
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.methods import unsampled_epsilon
from fedprivacy.uldp.results import RoundRecord

__all__ = ["SILO_FORGES", "CrossSiloAlgorithm", "SetupError", "run_cross_silo", "setup_session"]


class SetupError(FedPrivacyError):
    """Protocol 1's setup could not complete (a silo did not answer or was refused)."""


def _receive(
    server: PrivateWeightingServer,
    exchange: StageExchange,
    r: int,
    stage: Stage,
    requests: Mapping[int, Record],
    replies: Mapping[int, Record],
) -> list[int]:
    """Hand each silo's protocol message to the server; the silos that failed the stage.

    Those asked that did not reply (ascending), then those whose reply was refused.
    """
    refused = []
    for silo, reply in sorted(replies.items()):
        data = reply.get("message")
        if data == b"":
            continue  # silo != 0 has no seed shares to send
        try:
            if not isinstance(data, bytes):
                raise UnknownSenderError("the reply carries no protocol message")
            message = decode_message(data)
            if message.header.sender != silo:
                raise UnknownSenderError(f"the node of silo {silo} sent another silo's message")
            server.receive(message)
        except PrivateWeightingError as exc:
            exchange.reject(r, stage, silo, exc)
            refused.append(silo)
    return sorted(set(requests) - set(replies)) + refused


def setup_session(
    cfg: UldpConfig,
    server: PrivateWeightingServer,
    exchange: StageExchange,
    config_toml: str,
    params: PrivateWeightingParameters | None = None,
) -> dict[str, float]:
    """Run Protocol 1's setup over ``exchange``; seconds per exchange.

    ``config_toml`` and ``params`` (default: the server's) are what the silos are proposed;
    each silo checks them against its own policy.

    Raises
    ------
    SetupError
        If a silo does not answer a setup stage or its reply is refused.
    """
    silos = list(range(cfg.num_silos))
    seconds: dict[str, float] = {}

    def step(stage: Stage, requests: dict[int, Record]) -> None:
        started = time.perf_counter()
        replies = exchange(stage, 0, requests)
        missing = _receive(server, exchange, 0, stage, requests, replies)
        seconds[stage.value] = time.perf_counter() - started
        if missing:
            why = [
                f"silo {e['user']}: {e.get('error', 'no reply')} {e.get('detail', '')}".strip()
                for e in exchange.events
                if e.get("stage") == stage.value and e.get("user") in missing
            ]
            raise SetupError(
                f"silos {missing} did not complete the {stage.value} stage: " + "; ".join(why)
            )

    keys = server.start_setup()
    wire = encode_params(server.params if params is None else params)
    step(
        Stage.SILO_KEY,
        {
            s: {"config": config_toml, "params": wire, "message": encode_message(keys[s])}
            for s in silos
        },
    )
    step(Stage.SILO_ROSTER, _messages(server.finish_keys()))
    step(Stage.SILO_SEED, _messages(server.finish_seed()))
    server.finish_histograms()
    return seconds


def _messages(messages: Mapping[int, Any]) -> dict[int, Record]:
    return {s: {"message": encode_message(m)} for s, m in messages.items()}


class CrossSiloAlgorithm(Algorithm[RoundRecord]):
    """One round of a ``-w`` ULDP-FL method with the silos on a transport.

    Parameters
    ----------
    cfg : UldpConfig
        The resolved configuration (:func:`~fedprivacy.uldp.deployment.check_deployable`).
    server : PrivateWeightingServer
        The server's side of Protocol 1, set up.
    exchange : StageExchange
        Reaches the silos.
    model : torch.nn.Module
        The architecture (evaluation).
    flat : torch.Tensor
        ``x_0``.
    evaluate : callable
        ``evaluate(model)`` gives the task's metrics on the server's test set.
    rng : numpy.random.Generator
        Draws each round's minibatch seed (after the selector's draw).
    forge : SiloForge, optional
        A lying server (fault injection): ``round=R`` asks round ``R`` again in a new session.
    session : callable, optional
        ``session()`` sets up a new Protocol 1 session and returns its server (``round=R``).

    Attributes
    ----------
    noise_multiplier : float
        The effective noise multiplier of the silos' summed discrete Gaussians.
    aggregates : dict
        Per aggregated round: the decoded aggregate, the minibatch seed and the user sample.
    """

    def __init__(
        self,
        cfg: UldpConfig,
        server: PrivateWeightingServer,
        exchange: StageExchange,
        model: torch.nn.Module,
        flat: torch.Tensor,
        evaluate: Callable[[torch.nn.Module], dict[str, float]],
        rng: np.random.Generator,
        *,
        forge: SiloForge | None = None,
        session: Callable[[], PrivateWeightingServer] | None = None,
    ) -> None:
        self.cfg = cfg
        self.forge = forge or SiloForge()
        self.session = session
        self._kept: tuple[int, bytes, int, NDArray[np.bool_]] | None = None
        self.server = server
        self.exchange = exchange
        self.model = model
        self.flat = flat
        self.evaluate = evaluate
        self.rng = rng
        self.num_users = cfg.users
        self.spec = method_spec(cfg.method)
        self.sign = float(getattr(FAMILIES[self.spec.family], "sign", 1.0))
        self.noise_multiplier = _noise_multiplier(cfg, server.params)
        self.accountant = PrivacyAccountant("rdp")
        self.times_sampled = np.zeros(cfg.users, dtype=np.int64)
        self.aggregates: dict[int, tuple[NDArray[np.float64], int, NDArray[np.bool_]]] = {}

    def epsilon(self) -> float:
        """Epsilon of the released models (amplified by Poisson sampling only)."""
        if not self.aggregates:
            return 0.0
        if self.spec.sampled and self.cfg.scheme != "poisson":
            return self.epsilon_server()
        return float(self.accountant.epsilon(self.cfg.delta))

    def epsilon_server(self) -> float:
        """Epsilon against the server: the unsampled mechanism, most-sampled user's rounds."""
        rounds = int(self.times_sampled.max(initial=0))
        return unsampled_epsilon(self.noise_multiplier, rounds, self.cfg.delta)

    def _ask(self, r: int, sampled: NDArray[np.bool_]) -> tuple[int, bytes, int, NDArray[np.bool_]]:
        """Round ``r``'s request: its index, the model, a fresh minibatch seed, the sample.

        Under the ``round=R`` forge, the round after ``R`` is round ``R`` again in a new session.
        """
        keys = int(self.rng.integers(2**62))
        model = encode_array(self.flat.detach().cpu().numpy().astype(np.float32))
        ask = (r, model, keys, sampled)
        if self.forge.round_index == r:
            self._kept = ask
        if self.forge.repeats(r) and self._kept is not None and self.session is not None:
            self.server = self.session()  # fresh keys and masks: only the index repeats
            ask = self._kept
        return ask

    def _close(self, r: int, missing: list[int]) -> tuple[NDArray[np.float64] | None, str]:
        """The round's aggregate, or ``None`` and why the round was aborted (no output).

        A silo that did not answer or was refused aborts it; so do well-formed but wrong
        ciphertexts, which the server sees only once the aggregate decrypts out of range (it
        cannot tell whose they were; nothing is released and nobody is charged).
        """
        if missing:
            self.server.abort_round()
            return None, f"silos {missing} missing or refused"
        try:
            return self.server.finish_round(), ""
        except AggregateOutOfRangeError as exc:
            self.exchange.log(
                round=r,
                stage=Stage.SILO_ROUND.value,
                event="aggregate_rejected",
                error=type(exc).__name__,
                detail=str(exc),
            )
            return None, "the decrypted aggregate is out of range: a silo sent wrong ciphertexts"

    def run_round(self, ctx: RoundContext) -> RoundResult[RoundRecord]:
        """The silos train and weight their users' updates; Protocol 1 sums them."""
        started = time.perf_counter()
        r = ctx.round_index + 1  # Protocol 1's rounds start at 1 (0 is the setup)
        sampled = np.zeros(self.num_users, dtype=np.bool_)
        sampled[ctx.selected] = True
        index, model, keys, asked = self._ask(r, sampled)
        weights = self.server.start_round(index, asked if self.spec.sampled else None)
        requests = {
            s: {"round": index, "model": model, "keys": keys, "message": encode_message(m)}
            for s, m in weights.items()
        }
        replies = self.exchange(Stage.SILO_ROUND, r, requests)
        missing = _receive(self.server, self.exchange, r, Stage.SILO_ROUND, requests, replies)
        aggregate, aborted = self._close(r, missing)
        aggregated = np.asarray(ctx.selected, dtype=np.intp)
        if aggregate is None:
            aggregated = np.zeros(0, dtype=np.intp)
        else:
            q = self.cfg.effective_sampling_rate
            assert self.cfg.global_lr is not None
            step = global_step(self.cfg.global_lr, q, self.num_users, self.cfg.num_silos)
            delta = torch.from_numpy(aggregate).to(self.flat.dtype)
            self.flat = self.flat + self.sign * step * delta
            self.aggregates[ctx.round_index] = (aggregate, keys, asked)
            self.times_sampled += asked
            with quiet_accounting():
                self.accountant.compose_gaussian(self.noise_multiplier, 1, q)
        load_flat_(self.model, self.flat)
        ev = self.evaluate(self.model)
        record = RoundRecord(
            round=ctx.round_index + 1,
            metric=ev.get("metric", math.nan),
            loss=ev.get("loss", math.nan),
            epsilon=self.epsilon(),
            epsilon_server=self.epsilon_server(),
            seconds=time.perf_counter() - started,
            roc_auc=ev.get("roc_auc"),
        )
        self.exchange.log(
            round=r,
            event="round",
            selected=[int(u) for u in ctx.selected],
            aggregated=[int(u) for u in aggregated],
            aborted=aborted,
            metric=record.metric,
            seconds=record.seconds,
        )
        return RoundResult(aggregated, record)


def _noise_multiplier(cfg: UldpConfig, params: PrivateWeightingParameters) -> float:
    """``min(sigma, ...)`` of the silos' discrete Gaussians on the grid (as in-process)."""
    assert cfg.clip is not None
    std = silo_noise_std(cfg)
    check_negligible(
        grid_variance(std, params.precision, params.c_lcm), cfg.num_silos, params.n_params
    )
    nm = grid_noise_multiplier(std, cfg.num_silos, cfg.clip, params.precision, params.n_params)
    return min(cfg.sigma, nm)


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
        return CrossSiloOutcome(ledger, [], {}, nm, exchange.events, seconds, str(exc))
    train_rng = np.random.default_rng(np.random.SeedSequence(cfg.seed).spawn(4)[2])
    algorithm = CrossSiloAlgorithm(
        cfg, server, exchange, model, flat, evaluate, train_rng, forge=forged, session=session
    )
    loop: FederatedRun[RoundRecord] = FederatedRun(
        uldp_selector(cfg),
        AlwaysAvailable(cfg.users),
        algorithm,
        selection_rng=lambda _t: train_rng,
    )
    with quiet_accounting():
        records = [res.record for res in loop.run(cfg.rounds)]
    return CrossSiloOutcome(
        loop.ledger,
        records,
        algorithm.aggregates,
        algorithm.noise_multiplier,
        exchange.events,
        seconds,
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
        Fault injection before each stage (:class:`fedprivacy.flower.run.StagePause`).
    forge : str
        Fault injection, a lying server: ``"NAME=VALUE,..."`` with names in
        :data:`SILO_FORGES` (:mod:`fedprivacy.flower.silo_forge`); every silo must refuse.

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
    from fedprivacy.uldp.run_setup import initial_model, load_dataset

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
    with (run_dir / "events.jsonl").open("w", encoding="utf-8") as log_file:

        def event(e: dict[str, Any]) -> None:
            log_file.write(json.dumps(e) + "\n")
            log_file.flush()
            if on_event is not None:
                on_event(e)

        exchange = StageExchange(transport, on_event=event, before_stage=pause)
        outcome = _run(cfg, exchange, model, flat, lambda m: task.evaluate(m, tx, ty), forged)
    return write_outputs(cfg, run_dir, outcome, transport, started)
