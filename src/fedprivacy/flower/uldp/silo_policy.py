"""A silo's policy in cross-silo ULDP-FL: what its operator writes, what it checks, its noise.

The server proposes a session (the configuration as TOML, Protocol 1's public parameters and
its Paillier key); each silo decides from its own operator's :class:`~fedprivacy.policy.
PartyPolicy`, read on the silo's machine, never from what the server sends.
:func:`check_proposal` refuses, before anything is computed, a session that would weaken it:

=====================  ====================================================================
parameter              refused when
=====================  ====================================================================
``noise_multiplier``   the policy sets no floor (a silo adds the users' noise: it takes part
                       only with one), the configuration's sigma is below the floor, or the
                       session's noise bound leaves no room for the floor's noise (the sigma
                       it implies, ``noise_bound sqrt(|S|) / (16 clip_bound)``, is smaller)
``clip``               the configuration's clip or the session's clip bound is larger than
                       the policy's
``key_bits``           the key size in the configuration, in the parameters or of the modulus
                       actually received is below ``min_key_bits``, or the key is a test key
                       (marked as one, or below 2048 bits) and the policy allows none; or the
                       modulus is not the size the parameters say
``allow_unauthen-``    the silo has no node key and roster (its key-agreement key unsigned:
``ticated``            the server could substitute it) and its policy does not allow it
=====================  ====================================================================

Every violation is reported in one :class:`~fedprivacy.errors.PolicyViolationError`, named
after the first. The noise a silo adds each round (:func:`silo_noise_std_of`) is computed from
its policy's floor and the clip it applies; the configuration can only raise it.

Examples
--------
>>> cfg = UldpConfig(dataset="heart_disease", method="ULDP-AVG-w", noise_multiplier=1.0, clip=0.1)
>>> policy = silo_policy(cfg)
>>> (policy.noise_multiplier, policy.clip, policy.min_key_bits, policy.allow_test_keys)
(1.0, 0.1, 3072, False)
>>> try:
...     check_proposal(policy, cfg.with_overrides(noise_multiplier=1e-6, clip=1.0).resolved())
... except PolicyViolationError as exc:
...     print(exc.name, "|", exc)  # doctest: +NORMALIZE_WHITESPACE
noise_multiplier | noise_multiplier: noise multiplier 1e-06 requested; this party adds at
least 1; clip: clip 1 requested; this party clips at 0.1; allow_unauthenticated: a secure
round without node authentication (this party names no signing_key and roster): an active
server could substitute the keys and read any single input
>>> round(silo_noise_std_of(policy, cfg.resolved()), 6)  # sigma C / sqrt(4 silos)
0.05
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from fedprivacy.crypto.key_size import SECURE_MIN_KEY_BITS
from fedprivacy.errors import PolicyViolationError
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.private_weighting.noise import TAIL_SIGMAS
from fedprivacy.uldp.config import UldpConfig

if TYPE_CHECKING:
    from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters

__all__ = [
    "PolicyViolationError",
    "check_proposal",
    "proposed_config",
    "silo_noise_std_of",
    "silo_policy",
]


def silo_policy(config: UldpConfig) -> PartyPolicy:
    """The policy of a silo whose operator agrees with ``config``.

    Its noise floor is the configuration's ``noise_multiplier``, its clip the configuration's
    (resolved) clip, its smallest key the configured size; test keys only where the configuration
    asks for them (``insecure_test_keys``: tests and quick runs with 1024-bit keys).
    """
    cfg = config.resolved()
    return PartyPolicy(
        noise_multiplier=cfg.noise_multiplier,
        clip=cfg.clip,
        min_key_bits=cfg.secure_key_bits,
        allow_test_keys=cfg.insecure_test_keys,
    )


def proposed_config(config_toml: str) -> UldpConfig:
    """The configuration a ``silo-key`` request carries, validated and resolved.

    Raises
    ------
    MalformedMessageError
        If it is not TOML.
    ParameterError
        If it is not a deployable configuration.
    """
    import tomllib

    from fedprivacy.secagg.private_weighting.errors import MalformedMessageError
    from fedprivacy.uldp.deployment import check_deployable

    try:
        data = tomllib.loads(config_toml)
    except tomllib.TOMLDecodeError as exc:
        raise MalformedMessageError(f"the configuration is not TOML: {exc}") from exc
    return check_deployable(UldpConfig.from_mapping(data))


def _violations(checks: Iterable[Callable[[], None]]) -> list[PolicyViolationError]:
    """The violations the checks raise, each message once, in order."""
    found: dict[str, PolicyViolationError] = {}
    for check in checks:
        try:
            check()
        except PolicyViolationError as exc:
            found.setdefault(str(exc), exc)
    return list(found.values())


def _refuse(name: str, message: str) -> Callable[[], None]:
    def check() -> None:
        raise PolicyViolationError(name, message)

    return check


def _noise_checks(
    policy: PartyPolicy, config: UldpConfig, params: PrivateWeightingParameters | None
) -> list[Callable[[], None]]:
    floor = policy.noise_multiplier
    if floor is None:
        why = (
            "this silo's policy sets no noise floor; a ULDP-FL silo adds the users' noise and "
            "takes part only with one (noise_multiplier in its fedprivacy-policy file)"
        )
        return [_refuse("noise_multiplier", why)]
    checks = [lambda: policy.check_noise(config.noise_multiplier)]
    if params is not None:
        std = floor * params.clip_bound / math.sqrt(params.n_silos)
        if TAIL_SIGMAS * std > params.noise_bound:
            implied = (
                params.noise_bound * math.sqrt(params.n_silos) / (TAIL_SIGMAS * params.clip_bound)
            )
            checks.append(
                _refuse(
                    "noise_multiplier",
                    f"the session's noise bound {params.noise_bound:g} leaves room for noise "
                    f"multiplier {implied:.3g} only; this party adds at least {floor:g}",
                )
            )
    return checks


def _key_checks(
    policy: PartyPolicy,
    config: UldpConfig,
    params: PrivateWeightingParameters | None,
    modulus_bits: int | None,
) -> list[Callable[[], None]]:
    marked = config.insecure_test_keys or (params is not None and params.insecure_small_key)
    sizes = [config.secure_key_bits]
    sizes += [] if params is None else [params.key_bits]
    sizes += [] if modulus_bits is None else [modulus_bits]
    checks: list[Callable[[], None]] = [
        functools.partial(policy.check_key, bits, marked or bits < SECURE_MIN_KEY_BITS)
        for bits in sizes
    ]
    if params is not None and modulus_bits is not None and modulus_bits != params.key_bits:
        checks.append(
            _refuse(
                "key_bits",
                f"the Paillier modulus received has {modulus_bits} bits, the session's "
                f"parameters say {params.key_bits}",
            )
        )
    return checks


def check_proposal(
    policy: PartyPolicy,
    config: UldpConfig,
    params: PrivateWeightingParameters | None = None,
    modulus_bits: int | None = None,
) -> None:
    """Refuse a session that asks a silo for less than ``policy`` (see the module docstring).

    Parameters
    ----------
    policy : PartyPolicy
        The silo's own policy.
    config : UldpConfig
        The configuration the server sent (resolved: :func:`proposed_config`).
    params : PrivateWeightingParameters, optional
        Protocol 1's public parameters the server sent.
    modulus_bits : int, optional
        The size of the Paillier modulus the server sent.

    Raises
    ------
    PolicyViolationError
        Naming ``noise_multiplier``, ``clip``, ``key_bits`` or ``allow_unauthenticated`` (the
        first violation; the message lists every one).
    """
    checks = _noise_checks(policy, config, params)
    checks.append(lambda: policy.check_clip(config.clip))
    if params is not None:
        checks.append(lambda: policy.check_clip(params.clip_bound))
    checks += _key_checks(policy, config, params, modulus_bits)
    checks.append(policy.check_authenticated)  # else the server could substitute DH keys
    found = _violations(checks)
    if found:
        first = found[0]
        message = str(first).removeprefix(f"{first.name}: ")
        raise PolicyViolationError(first.name, "; ".join([message, *map(str, found[1:])]))


def silo_noise_std_of(policy: PartyPolicy, config: UldpConfig) -> float:
    """The standard deviation of the noise a silo adds (real units).

    The policy's floor ``sigma C / sqrt(|S|)``, or the configuration mechanism's party noise
    where that is larger (so the report the server writes from the configuration is never an
    over-claim); ``C`` is the clip the silo applies (the configuration's, at most the policy's
    once :func:`check_proposal` passed).

    Raises
    ------
    PolicyViolationError
        Naming ``noise_multiplier``, if the policy sets no floor.
    """
    from fedprivacy.uldp.deployment import silo_noise_std

    if policy.noise_multiplier is None:
        raise PolicyViolationError("noise_multiplier", "this silo's policy sets no noise floor")
    assert config.clip is not None
    floor = policy.noise_multiplier * config.clip / math.sqrt(config.num_silos)
    return max(floor, silo_noise_std(config))
