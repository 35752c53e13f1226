"""Everyone, and Poisson sampling: the draws they make (or do not) and their errors."""

from __future__ import annotations

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import AlwaysAvailable
from fedprivacy.participation.sampling import EveryUser, PoissonSampler


def test_every_user_takes_the_available_users_and_draws_nothing() -> None:
    rng = np.random.default_rng(5)
    state = rng.bit_generator.state
    avail = np.array([True, False, True, True])
    assert EveryUser(4).select(avail, np.zeros(4, np.int64), rng).tolist() == [0, 2, 3]
    assert rng.bit_generator.state == state
    assert AlwaysAvailable(4).sample(0, rng).all() and rng.bit_generator.state == state


def test_poisson_is_one_uniform_per_user_id_below_the_rate() -> None:
    n, q = 500, 0.3
    got = PoissonSampler(n, q).select(
        np.ones(n, bool), np.zeros(n, np.int64), np.random.default_rng(9)
    )
    expected = np.flatnonzero(np.random.default_rng(9).random(n) < q)
    np.testing.assert_array_equal(got, expected)


def test_poisson_drops_unavailable_users_without_changing_the_others() -> None:
    n = 200
    avail = np.ones(n, bool)
    avail[::2] = False
    all_ = PoissonSampler(n, 0.5).select(
        np.ones(n, bool), np.zeros(n, np.int64), np.random.default_rng(1)
    )
    some = PoissonSampler(n, 0.5).select(avail, np.zeros(n, np.int64), np.random.default_rng(1))
    np.testing.assert_array_equal(some, all_[all_ % 2 == 1])


def test_poisson_rate_is_checked() -> None:
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ParameterError, match="sampling_rate"):
            PoissonSampler(10, bad)
    with pytest.raises(ParameterError, match="num_users"):
        EveryUser(0)
