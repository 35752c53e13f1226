"""User availability models: which users are online (have not dropped out) in each round."""

from __future__ import annotations

import math
import numbers
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int, require_probability_vector
from fedprivacy.errors import ParameterError
from fedprivacy.participation.ledger import ParticipationLedger, participation_matrix, user_names

#: Dropout probabilities of the paper's experiments (Section 6, "Modeling dropouts").
PAPER_DROPOUT_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)


class AvailabilityModel(ABC):
    """Source of the availability vector ``u^(t)`` of each round.

    Attributes
    ----------
    num_users : int
        Number of users ``N``.

    """

    num_users: int

    @abstractmethod
    def sample(self, round_index: int, rng: np.random.Generator) -> NDArray[np.bool_]:
        """Return the availability of every user in round ``round_index``.

        Parameters
        ----------
        round_index : int
            0-based index of the round.
        rng : numpy.random.Generator
            Source of randomness (ignored by deterministic models).

        Returns
        -------
        numpy.ndarray of bool, shape (num_users,)
            ``True`` where the user is available.

        """


class AlwaysAvailable(AvailabilityModel):
    """Every user is reachable in every round (silos, or a simulation without dropouts).

    Draws nothing from the round's generator, so a run's other random draws do not depend on
    the number of users.

    Examples
    --------
    >>> AlwaysAvailable(3).sample(0, np.random.default_rng(0)).tolist()
    [True, True, True]

    """

    def __init__(self, num_users: int) -> None:
        self.num_users = require_int("num_users", num_users, minimum=1)

    def sample(self, round_index: int, rng: np.random.Generator) -> NDArray[np.bool_]:
        """Every user; see base class."""
        require_int("round_index", round_index, minimum=0)
        return np.ones(self.num_users, dtype=np.bool_)


class BernoulliDropout(AvailabilityModel):
    """Each user ``i`` drops out of each round independently with probability ``p_i``.

    Parameters
    ----------
    num_users : int
        Number of users ``N`` (at least 1).
    dropout : float or array_like
        Dropout probability, one for all users or a vector of length ``N``; every entry must lie
        in ``[0, 1)``.

    Attributes
    ----------
    dropout : numpy.ndarray of float, shape (num_users,)
        The dropout probability of every user.

    Examples
    --------
    >>> model = BernoulliDropout(4, 0.0)
    >>> model.sample(0, np.random.default_rng(0)).tolist()
    [True, True, True, True]

    """

    def __init__(self, num_users: int, dropout: float | ArrayLike) -> None:
        self.num_users = require_int("num_users", num_users, minimum=1)
        self.dropout = require_probability_vector("dropout", dropout, self.num_users)
        self.dropout.flags.writeable = False

    @classmethod
    def heterogeneous(
        cls,
        num_users: int,
        rng: np.random.Generator,
        levels: Sequence[float] = PAPER_DROPOUT_LEVELS,
    ) -> BernoulliDropout:
        """Build the paper's dropout model: ``p_i`` drawn uniformly at random from ``levels``.

        Parameters
        ----------
        num_users : int
            Number of users ``N``.
        rng : numpy.random.Generator
            Source of randomness for drawing the ``p_i``.
        levels : sequence of float
            The possible dropout probabilities, each in ``[0, 1)``; defaults to
            ``(0.1, 0.2, 0.3, 0.4, 0.5)`` as in Section 6 of the paper.

        Raises
        ------
        ParameterError
            If ``levels`` is empty, not one-dimensional, or has an entry outside ``[0, 1)``.

        """
        n = require_int("num_users", num_users, minimum=1)
        try:
            arr = np.asarray(levels, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ParameterError("levels", f"must be a sequence of numbers ({exc})") from exc
        if arr.ndim != 1 or arr.size == 0:
            raise ParameterError(
                "levels", "must be a non-empty sequence of probabilities in [0, 1)"
            )
        arr = require_probability_vector("levels", arr, arr.size)
        return cls(n, arr[rng.integers(0, arr.size, size=n)])

    def sample(self, round_index: int, rng: np.random.Generator) -> NDArray[np.bool_]:
        """Draw the availability of every user (one uniform draw per user); see base class."""
        require_int("round_index", round_index, minimum=0)
        out: NDArray[np.bool_] = rng.random(self.num_users) >= self.dropout
        return out


class TraceAvailability(AvailabilityModel):
    """Replay a recorded availability trace (rounds x users, 1 = available).

    Parameters
    ----------
    trace : array_like
        A 0/1 (or boolean) matrix with one row per round and one column per user.
    user_ids : sequence of str, optional
        Display names of the users (for example a CSV header).

    Examples
    --------
    >>> model = TraceAvailability([[1, 0], [1, 1]])
    >>> model.sample(1, np.random.default_rng(0)).tolist()
    [True, True]

    """

    def __init__(self, trace: ArrayLike, user_ids: Sequence[str] | None = None) -> None:
        arr = participation_matrix("trace", trace).astype(np.bool_)
        arr.flags.writeable = False
        self._trace = arr
        self.num_users = int(arr.shape[1])
        self.user_ids = user_names(user_ids, self.num_users)

    @property
    def rounds(self) -> int:
        """Number of recorded rounds."""
        return int(self._trace.shape[0])

    @property
    def trace(self) -> NDArray[np.bool_]:
        """The recorded trace (a read-only view, rounds x users)."""
        return self._trace

    def sample(self, round_index: int, rng: np.random.Generator) -> NDArray[np.bool_]:
        """Return row ``round_index`` of the trace (``rng`` is unused); see base class.

        Raises
        ------
        ParameterError
            If ``round_index`` is negative or past the end of the trace.

        """
        idx = require_int("round_index", round_index, minimum=0)
        if idx >= self.rounds:
            raise ParameterError(
                "round_index",
                f"the trace holds {self.rounds} round(s) (indices 0 to {self.rounds - 1}), "
                f"got {idx}",
            )
        row: NDArray[np.bool_] = self._trace[idx].copy()
        return row

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> TraceAvailability:
        """Read a trace from CSV, in the format of :meth:`ParticipationLedger.from_csv`.

        One row per round and one 0/1 column per user; a first row that is not made of 0/1 values
        is taken as a header of user ids.

        Raises
        ------
        ParameterError
            If the file is empty, ragged, or holds a value other than 0 and 1.

        """
        ledger = ParticipationLedger.from_csv(path)
        return cls(ledger.matrix(), user_ids=ledger.user_ids)


def make_availability(
    num_users: int, dropout: str | float, rng: np.random.Generator
) -> AvailabilityModel:
    """Build an availability model from a command-line style description.

    Parameters
    ----------
    num_users : int
        Number of users ``N``.
    dropout : str or float
        ``"heterogeneous"`` for the paper's model (:meth:`BernoulliDropout.heterogeneous`), or a
        number (or numeric string) in ``[0, 1)`` for the same dropout probability for all users.
    rng : numpy.random.Generator
        Source of randomness for drawing heterogeneous dropout probabilities.

    Raises
    ------
    ParameterError
        If ``dropout`` is neither ``"heterogeneous"`` nor a number in ``[0, 1)``.

    """
    if isinstance(dropout, str) and dropout.strip().lower() == "heterogeneous":
        return BernoulliDropout.heterogeneous(num_users, rng)
    try:
        if isinstance(dropout, bool) or not isinstance(dropout, str | numbers.Real):
            raise TypeError
        value = float(dropout)
    except (TypeError, ValueError):
        raise ParameterError(
            "dropout", f"must be 'heterogeneous' or a probability in [0, 1), got {dropout!r}"
        ) from None
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise ParameterError("dropout", f"must lie in [0, 1), got {value!r}")
    return BernoulliDropout(num_users, value)
