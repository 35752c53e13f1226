"""A lying cross-silo server, for fault injection: what it proposes instead of its configuration.

``fedprivacy flower deploy`` (:class:`~fedprivacy.flower.deploy.deploy.FaultPlan`'s ``forge``) and
the tests make :func:`~fedprivacy.flower.uldp.cross_silo.run_cross_silo` propose weaker parameters
than its own configuration, to show that every silo refuses them under its own policy
(:mod:`fedprivacy.flower.uldp.silo_policy`) and names the parameter, and that the run still ends
with its report. The names (:data:`SILO_FORGES`):

=================  =========================================================================
``sigma=S``        ``noise_multiplier`` (ULDP's sigma) in the configuration sent, and the
                   session's noise bound
``clip=C``         the clip in the configuration sent, and the session's clip bound
``key_bits=B``     a ``B``-bit Paillier key, with a configuration and parameters that say so
                   (below 2048 bits the key is marked as a test key, as they require)
``test_key=1``     the key marked as a test key (``insecure_test_keys``), at its size
``modulus=B``      the configuration and parameters say the configured size; the modulus the
                   server sends has ``B`` bits
``round=R``        in the round after ``R`` the server starts a new Protocol 1 session (fresh
                   keys and masks) and asks round ``R`` again with its model, minibatch seed
                   and sample: a second release of round ``R`` whose noise could be averaged
=================  =========================================================================

The server's own report is still that of its configuration (it lies to the silos, not in its
log); the silos' refusals are its ``node_refused`` events.

Examples
--------
>>> forge = SiloForge.parse("sigma=1e-6,clip=1.0,key_bits=1024")
>>> cfg = UldpConfig(dataset="heart_disease", method="ULDP-AVG-w", clip=0.1).resolved()
>>> p = forge.proposal(cfg)
>>> (p.noise_multiplier, p.clip, p.secure_key_bits, p.insecure_test_keys)
(1e-06, 1.0, 1024, True)
>>> SiloForge.parse("round=1").repeats(2), SiloForge().repeats(2)
(True, False)
>>> SiloForge.parse("noise=0")
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: forge: 'noise' is not one of [...]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from fedprivacy.crypto.key_size import SECURE_MIN_KEY_BITS
from fedprivacy.errors import ParameterError
from fedprivacy.flower.faults.forge import parse_forge
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters
from fedprivacy.uldp.config import UldpConfig

__all__ = ["SILO_FORGES", "SiloForge"]

SILO_FORGES = ("sigma", "clip", "key_bits", "test_key", "modulus", "round")
"""The parameters a lying cross-silo server can forge (see the module docstring)."""

_T = TypeVar("_T")


def _value(raw: Mapping[str, str], name: str, kind: Callable[[str], _T]) -> _T | None:
    if name not in raw:
        return None
    try:
        return kind(raw[name])
    except ValueError:
        raise ParameterError("forge", f"{name}={raw[name]!r} is not a number") from None


def _flag(raw: Mapping[str, str], name: str) -> bool:
    return raw.get(name, "0").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True)
class SiloForge:
    """The lies of a cross-silo server (none by default; see the module docstring)."""

    sigma: float | None = None
    clip: float | None = None
    key_bits: int | None = None
    test_key: bool = False
    modulus: int | None = None
    round_index: int | None = None

    @classmethod
    def parse(cls, text: str) -> SiloForge:
        """The forge of ``"NAME=VALUE,..."`` (names in :data:`SILO_FORGES`).

        Raises
        ------
        ParameterError
            Named ``forge``, for an unknown name or a value that is not a number.
        """
        raw = parse_forge(text, SILO_FORGES)
        return cls(
            sigma=_value(raw, "sigma", float),
            clip=_value(raw, "clip", float),
            key_bits=_value(raw, "key_bits", int),
            test_key=_flag(raw, "test_key"),
            modulus=_value(raw, "modulus", int),
            round_index=_value(raw, "round", int),
        )

    def proposal(self, cfg: UldpConfig) -> UldpConfig:
        """The configuration the server sends the silos instead of ``cfg``.

        Raises
        ------
        ParameterError
            If the forged values do not make a valid configuration.
        """
        changes: dict[str, Any] = {
            k: v
            for k, v in (("noise_multiplier", self.sigma), ("clip", self.clip))
            if v is not None
        }
        if self.key_bits is not None:
            changes["secure_key_bits"] = self.key_bits
            if self.key_bits < SECURE_MIN_KEY_BITS:
                changes["insecure_test_keys"] = True
        if self.test_key:
            changes["insecure_test_keys"] = True
        return cfg.with_overrides(**changes).validate().resolved() if changes else cfg

    def key_params(self, sent: PrivateWeightingParameters) -> PrivateWeightingParameters:
        """The parameters the server makes its Paillier key with (``sent``'s unless ``modulus``).

        ``N_max`` is lowered where the forged size needs it, so that the server's own checks
        pass: the lie is in what the silos are told.
        """
        if self.modulus is None:
            return sent
        from fedprivacy.secagg.private_weighting.params import largest_feasible_n_max

        bits = self.modulus
        feasible = largest_feasible_n_max(
            bits, sent.n_users, sent.n_silos, sent.delta_max, sent.noise_max
        )
        return dataclasses.replace(
            sent,
            key_bits=bits,
            insecure_small_key=sent.insecure_small_key or bits < SECURE_MIN_KEY_BITS,
            n_max=min(sent.n_max, feasible),
        )

    def repeats(self, r: int) -> bool:
        """Whether Protocol 1's round ``r`` is where the server asks round ``round`` again."""
        return self.round_index is not None and r == self.round_index + 1
