"""The checks every selection's inputs go through: a bad size or vector names its parameter."""

from __future__ import annotations

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.participation.selection_inputs import (
    check_available,
    check_frequency,
    check_sizes,
    validate_batch_parameters,
)


@pytest.mark.parametrize(
    ("n", "k", "t", "name", "why"),
    [
        (12, 4, 5, "target_privacy", r"\[1, 4\]"),
        (12, 4, 3, "target_privacy", "must divide per_round"),
        (10, 4, 4, "target_privacy", "must divide num_users"),
        (4, 6, 2, "per_round", "must not exceed num_users"),
        (0, 1, 1, "num_users", ">= 1"),
    ],
)
def test_batch_parameters_name_the_first_bad_one(
    n: int, k: int, t: int, name: str, why: str
) -> None:
    with pytest.raises(ParameterError, match=why) as info:
        validate_batch_parameters(n, k, t)
    assert info.value.name == name


def test_good_sizes_come_back_as_ints() -> None:
    assert validate_batch_parameters(np.int64(12), 4, 2) == (12, 4, 2)
    assert check_sizes(5, 5) == (5, 5)


def test_the_round_vectors_have_one_entry_a_user_and_the_right_values() -> None:
    assert check_available(np.array([1.0, 0.0]), 2).tolist() == [True, False]
    with pytest.raises(ParameterError, match="0/1"):
        check_available([2, 0], 2)
    with pytest.raises(ParameterError, match="length num_users = 3"):
        check_available([True, False], 3)
    with pytest.raises(ParameterError, match="numbers"):
        check_frequency(np.array(["a", "b"]), 2)
    assert check_frequency([3, 0], 2).tolist() == [3, 0]
