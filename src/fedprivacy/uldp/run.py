"""Run a ULDP-FL experiment from a :class:`~fedprivacy.uldp.config.UldpConfig`.

:func:`run_uldp` loads the dataset, allocates its records to users and silos, builds the
federation and the initial model, runs the rounds of the method through the round loop
(:class:`~fedprivacy.pipeline.loop.FederatedRun` with
:class:`~fedprivacy.uldp.algorithm.UldpAlgorithm`: the user selection, the ledger of who was
aggregated, the callbacks) and evaluates the global model on the pooled test set, recording
after every round the utility metric, the test loss, the
user-level epsilon from the method's accountant and the round's wall time, into a
:class:`~fedprivacy.uldp.results.UldpResult`;
:func:`~fedprivacy.uldp.results.write_outputs` writes the per-round CSV, the summary JSON and a
plot.

Randomness: one :class:`numpy.random.SeedSequence` of the config's seed is split into four
streams -- the allocation, the model initialisation, the training (user sampling and
minibatches; also DP-SGD's sampling and noise seeds for ULDP-GROUP-k) and the Gaussian noise of
the other methods -- so the same seed gives the same run, and runs of different methods share
the allocation and the initial model.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import fedprivacy.uldp.checkpoint as checkpoint
from fedprivacy._validation import require_int
from fedprivacy.data.silo_dataset import SiloDataset
from fedprivacy.dp.accounting import quiet_accounting
from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_text
from fedprivacy.fl.aggregators import make_aggregator
from fedprivacy.fl.canary_users import CanaryUsers
from fedprivacy.fl.clients import resolve_device
from fedprivacy.fl.gradients import default_gradient
from fedprivacy.fl.local_training import default_max_rows
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.models.registry import count_parameters
from fedprivacy.participation.availability import AlwaysAvailable
from fedprivacy.pipeline.algorithm import RoundResult
from fedprivacy.pipeline.loop import FederatedRun
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.secagg.private_weighting import SecureWeighting
from fedprivacy.secagg.private_weighting.noise import TAIL_SIGMAS
from fedprivacy.uldp.algorithm import UldpAlgorithm, server_view, uldp_selector
from fedprivacy.uldp.checkpoint import CONFIG
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.deployment import silo_noise_std
from fedprivacy.uldp.federation import Federation, build_federation
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.results import UldpResult
from fedprivacy.uldp.run_setup import (
    allocate,
    initial_model,
    load_dataset,
    round_hyper,
    run_seeds,
    sample_hidden,
)

__all__ = ["COX_DP_SGD_CAVEAT", "privacy_caveats", "run_uldp"]


def run_uldp(
    config: UldpConfig,
    progress: Callable[[int], None] | None = None,
    *,
    dataset: SiloDataset | None = None,
    epsilon_at: int | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    stop_after_rounds: int | None = None,
) -> UldpResult:
    """Run one ULDP-FL experiment.

    Parameters
    ----------
    config : UldpConfig
        The run (validated here; ``None`` hyper-parameters take their defaults).
    progress : callable, optional
        Called with ``1`` after every round (e.g. a tqdm ``update``).
    dataset : SiloDataset, optional
        An already loaded dataset (must be ``config.dataset``); loaded from
        ``config.data_dir`` otherwise.
    epsilon_at : int, optional
        Also report the user-level epsilon after this many rounds of the same kind
        (:meth:`~fedprivacy.uldp.accounting.UldpAccounting.after`; e.g. the paper's 200
        rounds when fewer are trained): :attr:`UldpResult.epsilon_at`.
    checkpoint_dir : str or Path, optional
        Write ``config.toml`` there and, after every round, ``checkpoint.pt``
        (:mod:`fedprivacy.uldp.checkpoint`; not for the private weighting protocol).
    resume : bool
        Continue from ``checkpoint_dir/checkpoint.pt``: the rounds after it are those a run
        without a stop computes, bit for bit (the round a run stopped at is evaluated even
        when ``eval_every`` skips it).
    stop_after_rounds : int, optional
        Stop once this many rounds exist (after their checkpoint), to run a job in pieces.

    Returns
    -------
    UldpResult
        Per-round records and the summary.

    Raises
    ------
    ParameterError
        For an invalid configuration.
    DataNotFoundError, ChecksumError
        If the data are missing or not the published files.
    """
    started = time.perf_counter()
    cfg = config.validate().resolved()
    if stop_after_rounds is not None:
        require_int("stop_after", stop_after_rounds, minimum=1, maximum=cfg.rounds)
    if resume:
        checkpoint.check_resumable(cfg)
    device = resolve_device(cfg.device)  # a clear error before any work when CUDA is missing
    ds = dataset if dataset is not None else load_dataset(cfg)
    alloc_ss, _, train_ss, noise_ss = run_seeds(cfg)
    allocation = allocate(cfg, ds, np.random.default_rng(alloc_ss))
    fed = build_federation(ds, allocation, device=device)
    model = initial_model(cfg, ds)[1].to(fed.device)
    secure: SecureWeighting | None = None
    setup_seconds: dict[str, float] = {}
    if cfg.secure_weighting:
        secure, setup_seconds = _secure_weighting(cfg, fed, model)
    flat = flatten_parameters(model).to(fed.device)
    runner = _runner(cfg, fed, model, secure, _canaries(cfg, fed.num_users, flat.numel()))
    start = flat.detach().clone()  # x_0: the canaries' estimate reads the change from it
    train_rng, noise_rng = np.random.default_rng(train_ss), np.random.default_rng(noise_ss)
    algorithm = UldpAlgorithm.simulated(
        runner, model, flat, train_rng, noise_rng, eval_every=cfg.eval_every
    )
    loop: FederatedRun[RoundRecord] = FederatedRun(
        uldp_selector(cfg),
        AlwaysAvailable(algorithm.num_users),
        algorithm,
        selection_rng=lambda _t: train_rng,  # the sample is the first draw of a round
        live_audit=True,
    )
    folder = None if checkpoint_dir is None else Path(checkpoint_dir)
    records, initial = _run_rounds(
        cfg, loop, algorithm, folder, resume, stop_after_rounds, progress
    )
    secure_report = None
    if secure is not None:
        secure_report = _secure_report(setup_seconds, runner, cfg.secure_key_bits)
        secure.close()
    return UldpResult(
        config=cfg,
        metric_name=fed.task.metric_name,
        data_source=ds.source,
        records=records,
        initial=initial,
        allocation=allocation.summary(),
        group_size=runner.group_k,
        seconds=time.perf_counter() - started,
        final_params=algorithm.flat.detach().cpu(),
        secure_weighting=secure_report,
        caveats=privacy_caveats(cfg.method, fed.task.task),
        server_view=server_view(loop.users_ledger),  # the users' columns
        exposed_after_round=np.asarray(loop.exposed_after_round, dtype=np.int64),
        noise_source=noise_source(
            cfg.method, cfg.secure_weighting, runner.noise_hidden_from_server
        ),
        epsilon_at=None if epsilon_at is None else _epsilon_at(runner, algorithm, epsilon_at),
        epsilon_hat=(
            None
            if runner.canaries is None
            else runner.canaries.estimate(
                (algorithm.flat - start).detach().cpu().numpy(), cfg.delta, cfg.seed
            ).fields()
        ),
    )


def _canaries(cfg: UldpConfig, users: int, dimension: int) -> CanaryUsers | None:
    """The run's canary users (after its users), None without."""
    if not cfg.canaries:
        return None
    assert cfg.clip is not None  # resolved
    return CanaryUsers.draw(
        first=users, count=cfg.canaries, dimension=dimension, clip=cfg.clip, seed=cfg.seed
    )


def _epsilon_at(
    runner: MethodRunner, algorithm: UldpAlgorithm, rounds: int
) -> tuple[int, float, float]:
    """``(rounds, epsilon, epsilon against the server)`` after ``rounds`` rounds of this kind."""
    return rounds, *runner.accounting.after(algorithm.released, rounds)


def _runner(
    cfg: UldpConfig,
    fed: Federation,
    model: torch.nn.Module,
    secure: SecureWeighting | None,
    canaries: CanaryUsers | None = None,
) -> MethodRunner:
    """The method's runner: its mechanism, its aggregator across silos, Protocol 1 if set up."""
    return MethodRunner(
        cfg.method,
        fed,
        round_hyper(cfg),
        delta=cfg.delta,
        model=model,
        max_rows=cfg.max_rows or default_max_rows(cfg.device),
        gradient=cfg.gradient or default_gradient(cfg.device),
        secure=secure,
        mechanism=cfg.mechanism(),
        amplified=sample_hidden(cfg),
        aggregator=make_aggregator(
            cfg.secagg,
            clip=math.inf if cfg.update_clip is None else cfg.update_clip,
            per_round=fed.num_silos,
            bits=cfg.bits,
            seed=cfg.seed,
            degree=cfg.secagg_degree,
            encoding="fixed-point" if cfg.secagg else "float",
        ),
        canaries=canaries,
    )


#: Why record-level DP-SGD on a Cox loss does not give the reported epsilon.
COX_DP_SGD_CAVEAT = (
    "ULDP-GROUP on a Cox loss: DP-SGD clips per-record gradients, but a Cox partial "
    "likelihood couples the records of a batch (each record's gradient term depends on the "
    "scores of its risk set), so removing one record also changes the other records' clipped "
    "terms and the per-record sensitivity C assumed by the accountant does not hold; the "
    "epsilon reported is that of a decomposable loss (the paper's and FLamby's setting), not a "
    "proven bound"
)


NOISE_NONE = "none (DEFAULT adds no noise; not private)"
NOISE_SEEDED = "seeded (reproducible; no privacy against whoever holds the seed)"
NOISE_OS = "OS randomness, discrete Gaussian on the protocol's integer grid"
NOISE_SERVER = (
    "OS randomness, added by the server to the sum over silos (dp = central: no guarantee "
    "against the server, which sees the noise-free sum)"
)


def noise_source(method: str, secure_weighting: bool, at_silos: bool = True) -> str:
    """Where a run's DP noise comes from, for every output of the run.

    Parameters
    ----------
    method : str
        A :data:`~fedprivacy.uldp.config.METHODS` name.
    secure_weighting : bool
        Whether the private weighting protocol aggregates (its silos draw their own noise).
    at_silos : bool
        Whether the silos add the noise (``False``: the mechanism's release, at the server).

    Returns
    -------
    str
        :data:`NOISE_NONE`, :data:`NOISE_SEEDED` (simulations: the run's seeded generators,
        ULDP-GROUP's DP-SGD included), :data:`NOISE_OS` or :data:`NOISE_SERVER`.

    Examples
    --------
    >>> noise_source("ULDP-AVG-w", True) == NOISE_OS
    True
    """
    if method == "DEFAULT":
        return NOISE_NONE
    if not at_silos:
        return NOISE_SERVER
    return NOISE_OS if secure_weighting else NOISE_SEEDED


def privacy_caveats(method: str, task: str) -> tuple[str, ...]:
    """Known limits of the reported user-level epsilon for ``method`` on a ``task``.

    Parameters
    ----------
    method : str
        A :data:`~fedprivacy.uldp.config.METHODS` name.
    task : str
        ``"binary"``, ``"multiclass"`` or ``"survival"``.

    Returns
    -------
    tuple of str
        One sentence per caveat; empty when the accounting holds as stated.
    """
    if method.startswith("ULDP-GROUP") and task == "survival":
        return (COX_DP_SGD_CAVEAT,)
    return ()


# Protocol 1 costs one modular exponentiation per user, parameter and silo: past this many
# (user, parameter) cells per silo a run would take hours, so it is refused up front.
SECURE_WEIGHTING_MAX_CELLS = 200_000


def _secure_weighting(
    cfg: UldpConfig, fed: Federation, model: torch.nn.Module
) -> tuple[SecureWeighting, dict[str, float]]:
    """The private weighting protocol for this run, set up (keys, blinded histograms).

    Returns the session and the seconds of each setup phase.
    """
    n_params = count_parameters(model)
    cells = fed.num_users * n_params
    if cells > SECURE_WEIGHTING_MAX_CELLS:
        raise ParameterError(
            "secure_weighting",
            f"{fed.num_users} users x {n_params} parameters = {cells:,} encrypted products per "
            f"silo and round is beyond {SECURE_WEIGHTING_MAX_CELLS:,}; the protocol is meant for "
            "small models (Heart Disease, TCGA-BRCA)",
        )
    assert cfg.clip is not None
    noise_std = silo_noise_std(cfg)
    sw = SecureWeighting(
        fed.histogram(),
        n_params=n_params,
        key_bits=cfg.secure_key_bits,
        insecure_small_key=cfg.insecure_test_keys,
        clip_bound=cfg.clip,
        noise_bound=TAIL_SIGMAS * noise_std,
        subsampling=method_spec(cfg.method).sampled,
    )
    return sw, sw.setup()


def _secure_report(
    setup_seconds: dict[str, float], runner: MethodRunner, key_bits: int
) -> dict[str, Any]:
    """``max_abs_deviation`` from the plaintext aggregates, the noise's accounting, seconds."""
    log = runner.secure_log
    phases: dict[str, float] = {}
    for entry in log:
        for k, v in entry.items():
            if k not in ("max_abs_deviation", "engine_float32_deviation"):
                phases[k] = phases.get(k, 0.0) + float(v)
    return {
        # against the same aggregate computed in the clear in float64 (Theorem 4's claim)
        "max_abs_deviation": max((e["max_abs_deviation"] for e in log), default=0.0),
        # against the training engine's own float32 aggregate (float32 rounding dominates)
        "engine_float32_deviation": max((e["engine_float32_deviation"] for e in log), default=0.0),
        "key_bits": key_bits,
        # the silos' discrete Gaussians over the grid sensitivity C_LCM (C / P + sqrt(d) / 2)
        "noise_multiplier_nominal": runner.hyper.noise_multiplier,
        "noise_multiplier_effective": runner.effective_noise_multiplier,
        "rounds": len(log),
        "setup_seconds": {k: round(float(v), 4) for k, v in setup_seconds.items()},
        "round_seconds_total": {k: round(v, 4) for k, v in phases.items()},
    }


def _run_rounds(
    cfg: UldpConfig,
    loop: FederatedRun[RoundRecord],
    algorithm: UldpAlgorithm,
    folder: Path | None,
    resume: bool,
    stop_after_rounds: int | None,
    progress: Callable[[int], None] | None,
) -> tuple[list[RoundRecord], dict[str, float]]:
    """Run (or resume) the rounds, checkpointing after each when ``folder`` is given."""
    if resume:
        if folder is None:
            raise ParameterError("resume", "needs the run's folder")
        state = checkpoint.load(folder / checkpoint.CHECKPOINT, cfg)
        records, initial = checkpoint.restore(state, loop, algorithm)
    else:
        records, initial = [], algorithm.evaluate()
    # what happens after each round is the run's callbacks: the record, a checkpoint, progress
    callbacks: list[Callable[[RoundResult[RoundRecord]], None]] = [
        lambda result: records.append(result.record)
    ]
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / CONFIG, cfg.to_toml())
        if not cfg.secure_weighting:
            path = folder / checkpoint.CHECKPOINT
            callbacks.append(
                lambda _: checkpoint.save(path, cfg, loop, algorithm, records, initial)
            )
    if progress is not None:
        callbacks.append(lambda _: loop.tell(progress))
    loop.callbacks = (*loop.callbacks, *callbacks)
    target = cfg.rounds if stop_after_rounds is None else min(cfg.rounds, stop_after_rounds)
    with quiet_accounting():
        for _ in range(max(0, target - len(records))):
            loop.step(final=len(records) + 1 == target)
    return records, initial
