"""Will the DP noise swamp what it protects? A check before a run, in one line.

A round releases the mean of ``K`` clipped updates plus noise of standard deviation ``z C / K``
per coordinate (central DP; distributed DP holds at least that). Over ``d`` coordinates the
noise's norm is about ``z C sqrt(d) / K``, while the clipped mean's norm is at most ``C`` (all
updates aligned, each at the clip). Their ratio, ``z sqrt(d) / K``, is what
:func:`noise_to_signal` gives: where it exceeds :data:`SWAMPED`, every round's update is mostly
noise, whatever the model learns locally, and the run will learn little (a 2-layer MLP of 800
parameters, 4 users a round at ``z = 1``: ratio 7, test accuracy 0.69 fell to 0.30).
:func:`warn_if_swamped` warns once (:class:`~fedprivacy.errors.NoiseWarning`, one line on the
command line); :func:`swamped` is the sentence the report adds.

Examples
--------
>>> from fedprivacy.fl.mechanism import CentralGaussian
>>> round(noise_to_signal(CentralGaussian(1.0, 1.0), dimension=800, per_round=4), 2)
7.07
>>> print(*swamped(CentralGaussian(1.0, 1.0), dimension=800, per_round=4))  # doctest: +ELLIPSIS
The noise is about 7.1 times the largest clipped update...
"""

from __future__ import annotations

import math
import warnings

from fedprivacy.errors import NoiseWarning
from fedprivacy.fl.mechanism import Mechanism

__all__ = ["SWAMPED", "noise_to_signal", "swamped", "warn_if_swamped"]

#: The noise-to-signal ratio above which a run is warned that its noise swamps its updates.
SWAMPED = 5.0


def noise_to_signal(mechanism: Mechanism, *, dimension: int, per_round: int) -> float | None:
    """``z sqrt(d) / K``: the noise's expected norm over the largest clipped mean's (or None)."""
    z = mechanism.noise_multiplier
    if z is None or per_round < 1:
        return None
    return z * math.sqrt(dimension) / per_round


def swamped(mechanism: Mechanism, *, dimension: int, per_round: int) -> tuple[str, ...]:
    """The report's sentence when the noise swamps the updates (none when it does not)."""
    ratio = noise_to_signal(mechanism, dimension=dimension, per_round=per_round)
    if ratio is None or ratio <= SWAMPED:
        return ()
    return (
        f"The noise is about {ratio:.2g} times the largest clipped update each round releases "
        f"(z sqrt(d) / K = {mechanism.noise_multiplier:g} x sqrt({dimension}) / {per_round}): "
        "the run will learn little; select more users a round, or add less noise (a larger "
        "clip helps only if the updates are larger than the clip).",
    )


def warn_if_swamped(mechanism: Mechanism, *, dimension: int, per_round: int) -> None:
    """Warn (:class:`~fedprivacy.errors.NoiseWarning`) before a run whose noise swamps it."""
    for sentence in swamped(mechanism, dimension=dimension, per_round=per_round):
        warnings.warn(NoiseWarning(sentence), stacklevel=2)
