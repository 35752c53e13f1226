"""The distributed noise a server asks of a node, as the ``noise`` field of its advertise request.

The field names the noise mode (:mod:`fedprivacy.dp.noise_modes`) and each draw's variance on the
grid: ``"<variance>"`` over-provisioned, ``"exact:<variance>"`` in the exact mode; empty for no
noise. It is only a request: a node with a noise policy checks it against its own floor and mode
(:func:`fedprivacy.flower.nodes.node_policy.check_secure_round`), and a node in the exact mode
computes how many components to draw and keep from the round's public parameters, never from the
server.

Examples
--------
>>> from fractions import Fraction
>>> encode_noise_request("exact", Fraction(12))
'exact:12'
>>> parse_noise_request("exact:12"), parse_noise_request("7"), parse_noise_request("")
(('exact', Fraction(12, 1)), ('over-provisioned', Fraction(7, 1)), None)
"""

from __future__ import annotations

from fractions import Fraction

from fedprivacy.config_sections import DEFAULT_NOISE_MODE
from fedprivacy.dp.noise_modes import NOISE_MODES
from fedprivacy.dp.party_noise import PartyNoise, RoundNoise
from fedprivacy.secagg.errors import MalformedMessageError

__all__ = ["encode_noise_request", "noise_request", "parse_noise_request"]


def encode_noise_request(mode: str, variance: Fraction) -> str:
    """The ``noise`` field asking for draws of ``variance`` in ``mode``."""
    return str(variance) if mode == DEFAULT_NOISE_MODE else f"{mode}:{variance}"


def noise_request(party_noise: PartyNoise | None, noise: RoundNoise | None) -> str:
    """The ``noise`` field of a round planned with ``noise`` (empty without distributed DP)."""
    if party_noise is None or noise is None:
        return ""
    return encode_noise_request(party_noise.mode, noise.variance)


def parse_noise_request(text: str) -> tuple[str, Fraction] | None:
    """The mode and variance a ``noise`` field asks for (None: no noise).

    Raises
    ------
    MalformedMessageError
        For an unknown mode or a variance that is not a positive number.
    """
    if not text:
        return None
    mode, _, value = text.rpartition(":")
    mode = mode or DEFAULT_NOISE_MODE
    if mode not in NOISE_MODES:
        raise MalformedMessageError(f"unknown noise mode {mode!r} in the noise request")
    try:
        variance = Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise MalformedMessageError(f"the noise variance {value!r} is not a number") from None
    if variance <= 0:
        raise MalformedMessageError(f"the noise variance {value!r} is not positive")
    return mode, variance
