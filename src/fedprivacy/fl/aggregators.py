"""The aggregators by name, and the one a training configuration asks for.

:data:`AGGREGATORS` is the registry of aggregator classes (``plaintext``:
:class:`~fedprivacy.fl.aggregation.PlaintextAggregator`, ``float``:
:class:`~fedprivacy.fl.aggregation.FloatAggregator`, ``secagg``:
:class:`~fedprivacy.fl.secure_aggregation.SecureAggregator`, which builds on
:mod:`fedprivacy.fl.aggregation`, hence a module of its own). Each class builds itself from an
:class:`~fedprivacy.fl.aggregation.AggregatorOptions` with its
:meth:`~fedprivacy.fl.aggregation.Aggregator.from_options`, refusing the options it cannot
honour; :func:`build_aggregator` looks a name up and builds. A training configuration names its
aggregator with ``secagg`` and ``encoding`` (:func:`aggregator_name`), and
:func:`make_aggregator` is the two together.

A new aggregator is one :class:`~fedprivacy.fl.aggregation.Aggregator` subclass and one
:data:`AGGREGATORS` registration; the in-process FedAvg round and the server of a deployed
plaintext round (:class:`fedprivacy.flower.fedavg.training.DeployedTraining`) call its
:meth:`~fedprivacy.fl.aggregation.Aggregator.aggregate` (``tests/pipeline/test_seams.py``).

Examples
--------
>>> AGGREGATORS.names()
('plaintext', 'float', 'secagg')
>>> type(make_aggregator(False, clip=1.0, per_round=4, bits=32, seed=0)).__name__
'PlaintextAggregator'
>>> make_aggregator(False, clip=1.0, per_round=4, bits=32, seed=0, encoding="int8")
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: encoding: must be one of fixed-point, float; got 'int8'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy._registry import Registry
from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import (
    ENCODINGS,
    Aggregator,
    AggregatorOptions,
    FloatAggregator,
    PlaintextAggregator,
)
from fedprivacy.fl.secure_aggregation import SecureAggregator

if TYPE_CHECKING:
    from fedprivacy.config_sections import SecureAggregationSection

__all__ = [
    "AGGREGATORS",
    "AggregatorOptions",
    "aggregator_name",
    "build_aggregator",
    "make_aggregator",
    "section_aggregator",
]

#: The aggregator classes by name (each class's ``name``).
AGGREGATORS: Registry[type[Aggregator]] = Registry("aggregator")
for _aggregator in (PlaintextAggregator, FloatAggregator, SecureAggregator):
    AGGREGATORS.register(_aggregator.name, _aggregator)


def aggregator_name(secure: bool, encoding: str = "fixed-point") -> str:
    """The registered name that a configuration's ``secagg`` and ``encoding`` choose.

    Parameters
    ----------
    secure : bool
        Secure aggregation (``--secagg``).
    encoding : str
        ``fixed-point`` (what SecAgg sums) or ``float`` (plaintext only).

    Returns
    -------
    str
        ``secagg``, ``float`` or ``plaintext``.

    Raises
    ------
    ParameterError
        Naming ``encoding``: an unknown one, or ``float`` with ``secure``.

    Examples
    --------
    >>> aggregator_name(True), aggregator_name(False), aggregator_name(False, "float")
    ('secagg', 'plaintext', 'float')
    >>> aggregator_name(True, "float")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: encoding: the secure path always encodes in fixed point; ...
    """
    if encoding not in ENCODINGS:
        raise ParameterError("encoding", f"must be one of {', '.join(ENCODINGS)}; got {encoding!r}")
    if secure:
        if encoding == "float":
            raise ParameterError(
                "encoding", "the secure path always encodes in fixed point; use 'fixed-point'"
            )
        return SecureAggregator.name
    return FloatAggregator.name if encoding == "float" else PlaintextAggregator.name


def build_aggregator(name: str, options: AggregatorOptions) -> Aggregator:
    """The aggregator registered as ``name``, built from ``options``.

    Raises
    ------
    ParameterError
        Naming ``aggregator`` if ``name`` is not registered, or the option the class refuses.

    Examples
    --------
    >>> options = AggregatorOptions(clip=1.0, per_round=4, bits=32, seed=0)
    >>> type(build_aggregator("float", options)).__name__
    'FloatAggregator'
    >>> build_aggregator("median", options)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: aggregator: must be one of plaintext, float, secagg; got ...
    """
    return AGGREGATORS.lookup(name).from_options(options)


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
    """The aggregator of a training configuration: :func:`aggregator_name`, then build it.

    ``encoding="float"`` gives :class:`FloatAggregator` (plaintext only); ``party_noise``
    (distributed DP) and ``protocol_dropout`` need the secure aggregator.

    Examples
    --------
    >>> make_aggregator(False, clip=1.0, per_round=4, bits=32, seed=0, protocol_dropout=0.1)
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: protocol_dropout: applies to the secure path only (--secagg)
    """
    options = AggregatorOptions(
        clip,
        per_round,
        bits,
        seed,
        degree=degree,
        protocol_dropout=protocol_dropout,
        batch_policy=batch_policy,
        party_noise=party_noise,
    )
    return build_aggregator(aggregator_name(secure, encoding), options)


def section_aggregator(
    section: SecureAggregationSection,
    *,
    per_round: int,
    seed: int,
    party_noise: PartyNoise | None,
    encoding: str = "fixed-point",
) -> Aggregator:
    """The aggregator a configuration's secure-aggregation section describes.

    ``TrainConfig`` and ``PrivateFedAvgConfig`` build theirs here, so that every field of the
    section reaches the aggregator.

    Examples
    --------
    >>> from fedprivacy.config_sections import SecureAggregationSection
    >>> section = SecureAggregationSection(secagg=True, secagg_degree=3, batch_policy="atomic")
    >>> section_aggregator(section, per_round=6, seed=0, party_noise=None).degree
    3
    """
    if section.batch_policy is None:
        raise ParameterError("batch_policy", "must be set to build an aggregator")
    return make_aggregator(
        section.secagg,
        clip=section.update_clip,
        per_round=per_round,
        bits=section.bits,
        seed=seed,
        degree=section.secagg_degree,
        protocol_dropout=section.protocol_dropout,
        batch_policy=section.batch_policy,
        encoding=encoding,
        party_noise=party_noise,
    )
