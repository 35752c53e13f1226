"""What the server learns from a completed round."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fedprivacy.errors import ParameterError


@dataclass(frozen=True)
class AggregationResult:
    """What the server learns from one round.

    Attributes
    ----------
    aggregated : tuple of int
        The users whose inputs are in the sum (sorted).
    field_sum : numpy.ndarray
        The sum of their encoded vectors modulo ``2**bits``.
    total : numpy.ndarray
        ``field_sum`` decoded to floats (length ``vector_length``).
    weighted : bool
        Whether the last entry of ``total`` is the total weight.
    seconds : dict of str to float
        Server time per stage.
    excess_removed : tuple of int
        The exact noise mode (:mod:`fedprivacy.dp.noise_modes`): the aggregated users whose
        excess noise was subtracted from the sum (sorted).

    """

    aggregated: tuple[int, ...]
    field_sum: np.ndarray
    total: np.ndarray
    weighted: bool
    seconds: dict[str, float] = field(default_factory=dict)
    excess_removed: tuple[int, ...] = ()

    @property
    def sum(self) -> np.ndarray:
        """Sum of the updates (weighted by the users' weights when weighted)."""
        return self.total[:-1] if self.weighted else self.total

    @property
    def total_weight(self) -> float:
        """Sum of the weights (the number of users when unweighted)."""
        return float(self.total[-1]) if self.weighted else float(len(self.aggregated))

    @property
    def mean(self) -> np.ndarray:
        """The (weighted) average update; :class:`ParameterError` if the total weight is 0."""
        weight = self.total_weight
        if weight <= 0:
            raise ParameterError("total_weight", "is not positive; the average is undefined")
        return self.sum / weight
