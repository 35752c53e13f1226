"""What the parties of a deployed ULDP-FL run compute: a silo's per-user updates, public setup.

In a deployment (:mod:`fedprivacy.flower.uldp.cross_silo`) each silo trains its own users and hands
their clipped updates to the private weighting protocol; the server only sends the model, a
per-round seed for the minibatch order and Protocol 1's messages. The functions here are the
in-process code of :mod:`fedprivacy.uldp.families.user_level` cut at the silo boundary, so that a
deployment and its in-process reference (:func:`plaintext_aggregate`) compute the same numbers:

* :func:`silo_side` builds what a silo holds (the federation from the shared configuration, of
  which it uses only its own rows; a method runner for the per-user trainer), cached by the
  configuration;
* :func:`silo_deltas` is the silo's round: every user with records in the silo trains from
  ``x_t`` (the silo does not know the round's user sample: unsampled users get an encrypted
  weight of 0), the updates are clipped in float64 by the run's mechanism (within the bound
  ``C`` of Protocol 1's encoding);
* :func:`session_parameters` are Protocol 1's public parameters from the configuration alone
  (the server never sees the histogram ``n_{s,u}``).

Examples
--------
>>> cfg = UldpConfig(dataset="creditcard-synthetic", method="ULDP-AVG-w", users=6, silos=2,
...                  secure_key_bits=1024, insecure_test_keys=True).validate().resolved()
>>> p = session_parameters(cfg, n_params=31, session_id=bytes(16))
>>> (p.n_silos, p.n_users, p.key_bits, p.subsampling)
(2, 6, 1024, False)
>>> round(silo_noise_std(cfg), 6)
1.767767
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.data.allocation import Allocation
from fedprivacy.errors import ParameterError
from fedprivacy.fl.mechanism import Mechanism, l2_clip_factors
from fedprivacy.secagg.private_weighting.noise import TAIL_SIGMAS
from fedprivacy.secagg.private_weighting.params import (
    DEFAULT_N_MAX,
    PrivateWeightingParameters,
    encoded_bound,
    largest_feasible_n_max,
)
from fedprivacy.uldp.clipped_sums import dense_clipped
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.families import family_for
from fedprivacy.uldp.families.user_level import UserLevelFamily
from fedprivacy.uldp.federation import Federation, build_federation
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.run_setup import allocate, initial_model, load_dataset, round_hyper, run_seeds

__all__ = [
    "SiloSide",
    "check_allocation",
    "check_deployable",
    "deployed_mechanism",
    "plaintext_aggregate",
    "session_parameters",
    "silo_deltas",
    "silo_noise_std",
    "silo_side",
]


def check_deployable(config: UldpConfig) -> UldpConfig:
    """Validate and resolve ``config`` for a deployment; only the ``-w`` methods deploy.

    Raises
    ------
    ParameterError
        If the method is not one of ULDP-AVG-w, -AVG-ws, -SGD-w, -SGD-ws (the methods whose
        silos send weighted sums of per-user updates through the private weighting protocol),
        or ``dp`` asks for noise the silos would not add (a silo checks the proposal with this
        too, so a server cannot talk it out of its noise), or it has canaries (in process only).
    """
    cfg = config.validate().resolved()
    spec = method_spec(cfg.method)
    if not (spec.weighted and spec.family in ("avg", "sgd")):
        raise ParameterError(
            "method",
            "a cross-silo deployment runs the private weighting protocol: ULDP-AVG-w, "
            f"ULDP-AVG-ws, ULDP-SGD-w or ULDP-SGD-ws, not {cfg.method}",
        )
    if not deployed_mechanism(cfg).adds_noise_in_aggregation:
        raise ParameterError(
            "dp",
            "each silo of a deployment adds its own noise: a mechanism whose parties add noise "
            f"(party_noise), such as 'distributed', not {cfg.dp!r}",
        )
    if cfg.canaries:
        raise ParameterError(
            "canaries", "are inserted in process (fedprivacy uldp), not in a deployment"
        )
    return cfg


def deployed_mechanism(cfg: UldpConfig) -> Mechanism:
    """The run's mechanism: the one ``dp`` names, else the method's default (``distributed``)."""
    named = cfg.mechanism()
    if named is not None:
        return named
    default = family_for(cfg.method).default_mechanism(round_hyper(cfg))
    assert default is not None  # the -w methods' families take mechanisms
    return default


def check_allocation(cfg: UldpConfig) -> None:
    """Refuse an allocation Protocol 1 cannot weight: a user with no record, or more than N_max.

    Protocol 1 weights user ``u`` by the inverse of its blinded count ``B(N_u) = N_u r_u mod n``;
    with ``N_u = 0`` there is none, and the setup would fail at 1(f) after the key exchange; with
    ``N_u > N_max`` (:func:`session_parameters`) every round's aggregate would decrypt out of
    range and be refused. The allocation is the same deterministic one the silos make
    (:func:`silo_side`).

    Raises
    ------
    ParameterError
        Naming ``users``, if some user holds no record (``uniform`` spreads too few records over
        many users) or more than ``N_max`` records (too few users for the pool).
    """
    cfg = cfg.resolved()
    allocation = allocate(cfg, load_dataset(cfg), np.random.default_rng(run_seeds(cfg)[0]))
    active = allocation.active_users()
    if len(active) < cfg.users:
        empty = np.setdiff1d(np.arange(cfg.users), active)
        raise ParameterError(
            "users",
            f"{len(empty)} of {cfg.users} users hold no record in any silo under the "
            f"{cfg.distribution} allocation (users {empty[:5].tolist()}...): Protocol 1 cannot "
            "weight them (their blinded count B(N_u) = 0 has no inverse modulo n); use fewer "
            'users or distribution = "zipf"',
        )
    n_max = session_parameters(cfg, 1, bytes(16)).n_max
    most = allocation.max_records_per_user()
    if most > n_max:
        raise ParameterError(
            "users",
            f"a user holds {most} records over the silos, more than Protocol 1's N_max = {n_max} "
            f"(at {cfg.secure_key_bits}-bit keys): every round's aggregate would decrypt out of "
            "range; use more users or larger keys",
        )


def silo_noise_std(cfg: UldpConfig) -> float:
    """Each silo's noise standard deviation: the mechanism's party noise for ``|S|`` silos.

    ``sigma C / sqrt(|S|)`` (real units) for ``distributed``
    (:meth:`~fedprivacy.dp.party_noise.PartyNoise.std`).
    """
    noise = deployed_mechanism(cfg).party_noise
    if noise is None:
        raise ParameterError("dp", "the silos of a deployment add the noise (party_noise)")
    return noise.std(cfg.num_silos)


def session_parameters(
    cfg: UldpConfig, n_params: int, session_id: bytes
) -> PrivateWeightingParameters:
    """Protocol 1's public parameters of a resolved configuration (no histogram needed).

    ``N_max`` is the paper's 2000, or the largest value the key size allows if smaller; the
    noise bound is ``16`` noise standard deviations (the tail cut of the silos' noise).
    """
    assert cfg.clip is not None
    precision = 1e-10
    noise_bound = TAIL_SIGMAS * silo_noise_std(cfg)
    feasible = largest_feasible_n_max(
        cfg.secure_key_bits,
        cfg.users,
        cfg.num_silos,
        encoded_bound(cfg.clip, precision, "clip"),
        encoded_bound(noise_bound, precision, "noise_bound"),
    )
    return PrivateWeightingParameters(
        session_id=session_id,
        n_silos=cfg.num_silos,
        n_users=cfg.users,
        n_params=n_params,
        clip_bound=cfg.clip,
        noise_bound=noise_bound,
        key_bits=cfg.secure_key_bits,
        precision=precision,
        n_max=min(DEFAULT_N_MAX, feasible),
        subsampling=method_spec(cfg.method).sampled,
        insecure_small_key=cfg.insecure_test_keys,
    )


@dataclass(frozen=True, eq=False)
class SiloSide:
    """What a silo holds: the federation (it reads only its own rows) and the trainer."""

    config: UldpConfig
    fed: Federation
    runner: MethodRunner
    allocation: Allocation
    n_params: int


@functools.lru_cache(maxsize=2)
def silo_side(config_toml: str, data_dir: str | None = None) -> SiloSide:
    """The silo's data and trainer for a configuration given as TOML (cached).

    ``data_dir`` is the silo's own data directory (``None``: ``$FEDPRIVACY_DATA``); the
    configuration the server sends carries none.
    """
    import tomllib

    config = UldpConfig.from_mapping(tomllib.loads(config_toml))
    cfg = check_deployable(config.with_overrides(data_dir=data_dir))
    ds = load_dataset(cfg)
    allocation = allocate(cfg, ds, np.random.default_rng(run_seeds(cfg)[0]))
    fed = build_federation(ds, allocation)
    _, model, flat = initial_model(cfg, ds)
    runner = MethodRunner(
        cfg.method, fed, round_hyper(cfg), delta=cfg.delta, model=model, mechanism=cfg.mechanism()
    )
    return SiloSide(cfg, fed, runner, allocation, int(flat.numel()))


def silo_deltas(
    side: SiloSide, silo: int, flat: NDArray[np.float32], keys_seed: int
) -> NDArray[np.float64]:
    """Silo ``silo``'s clipped per-user updates from ``x_t = flat``, shape ``(|U|, P)``.

    The minibatch keys are ``rng.random((Q, pool_size))`` of ``default_rng(keys_seed)``,
    indexed by pool position, so a user's update depends only on its own records. Rows of
    users without records in the silo are zero.
    """
    fed, runner = side.fed, side.runner
    if not 0 <= silo < fed.num_silos:
        raise ParameterError("silo", f"must lie in [0, {fed.num_silos}), got {silo}")
    family = runner.family
    assert isinstance(family, UserLevelFamily)
    h = runner.hyper
    keys = family.draw_keys(h, fed, np.random.default_rng(keys_seed))
    sl = fed.silo_slice(silo)
    off, users = fed.user_offsets[silo], fed.silo_users[silo]
    silo_keys = None if keys is None else keys[:, fed.record_index[sl]]
    global_flat = torch.from_numpy(np.array(flat, dtype=np.float32))
    live = np.arange(len(users), dtype=np.int64)
    data = (fed.x[sl], fed.y[sl], off)
    chunks = list(family.vectors(runner.trainer, h, global_flat, data, silo_keys, live))
    mechanism = runner.mechanism
    assert mechanism is not None  # a MethodRunner gives every per-user family one

    def factors(norms: torch.Tensor) -> torch.Tensor:
        """The mechanism's, never past Protocol 1's bound ``C`` (the silo's sensitivity)."""
        return torch.minimum(mechanism.clip_factors(norms), l2_clip_factors(norms, h.clip))

    return dense_clipped(chunks, users, fed.num_users, global_flat.numel(), factors)[0]


def plaintext_aggregate(
    side: SiloSide,
    flat: NDArray[np.float32],
    keys_seed: int,
    sampled: NDArray[np.bool_] | None,
) -> NDArray[np.float64]:
    """``sum_s sum_u w_{s,u} Delta_{s,u}`` in float64, in one process (the reference).

    What the private weighting protocol computes from the silos' :func:`silo_deltas`, without
    the silos' noise; ``w`` is zero for users outside ``sampled``.
    """
    w = side.fed.weights(True)
    if sampled is not None:
        w = w * np.asarray(sampled, dtype=np.float64)[None, :]
    total = np.zeros(flat.size, dtype=np.float64)
    for s in range(side.fed.num_silos):
        total += w[s] @ silo_deltas(side, s, flat, keys_seed)
    return total
