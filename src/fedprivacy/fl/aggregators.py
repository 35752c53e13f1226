"""The aggregator a training configuration asks for: plaintext, float or secure.

:func:`make_aggregator` picks among :class:`~fedprivacy.fl.aggregation.PlaintextAggregator`,
:class:`~fedprivacy.fl.aggregation.FloatAggregator` and
:class:`~fedprivacy.fl.secure_aggregation.SecureAggregator` (which builds on
:mod:`fedprivacy.fl.aggregation`, hence a module of its own), and refuses the combinations that
make no sense.

Examples
--------
>>> type(make_aggregator(False, clip=1.0, per_round=4, bits=32, seed=0)).__name__
'PlaintextAggregator'
>>> make_aggregator(False, clip=1.0, per_round=4, bits=32, seed=0, encoding="int8")
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: encoding: must be one of fixed-point, float; got 'int8'
"""

from __future__ import annotations

from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import ENCODINGS, Aggregator, FloatAggregator, PlaintextAggregator
from fedprivacy.fl.secure_aggregation import SecureAggregator

__all__ = ["make_aggregator"]


def make_aggregator(
    secure: bool,
    *,
    clip: float,
    per_round: int,
    bits: int,
    seed: int,
    degree: int | None = None,
    protocol_dropout: float = 0.0,
    batch_policy: str = "atomic",
    encoding: str = "fixed-point",
    party_noise: PartyNoise | None = None,
) -> Aggregator:
    """The plaintext or the secure aggregator (see the module docstring).

    ``encoding="float"`` gives :class:`FloatAggregator` (plaintext only); ``party_noise``
    (distributed DP) needs the secure aggregator.
    """
    if party_noise is not None and not secure:
        raise ParameterError("dp", "distributed DP is added inside secure aggregation (--secagg)")
    if encoding not in ENCODINGS:
        raise ParameterError("encoding", f"must be one of {', '.join(ENCODINGS)}; got {encoding!r}")
    if encoding == "float":
        if secure:
            raise ParameterError(
                "encoding", "the secure path always encodes in fixed point; use 'fixed-point'"
            )
        if protocol_dropout:
            raise ParameterError("protocol_dropout", "applies to the secure path only (--secagg)")
        return FloatAggregator(clip, per_round, bits, seed)
    if secure:
        return SecureAggregator(
            clip,
            per_round,
            bits,
            seed,
            degree=degree,
            protocol_dropout=protocol_dropout,
            batch_policy=batch_policy,
            party_noise=party_noise,
        )
    if protocol_dropout:
        raise ParameterError("protocol_dropout", "applies to the secure path only (--secagg)")
    return PlaintextAggregator(clip, per_round, bits, seed)
