import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.regression.schedule import iteration_count, learning_rates


def test_iteration_count_appendix_c2():
    # T = c N^(3/4) / alpha with the paper's alpha = 0.01 and c = 0.25
    assert iteration_count(10_000) == 25_000
    assert iteration_count(2_250, lr=0.25) == int(np.ceil(2_250**0.75))
    assert iteration_count(1, lr=100.0) == 1
    with pytest.raises(ParameterError, match="total_samples"):
        iteration_count(0)
    with pytest.raises(ParameterError, match="lr"):
        iteration_count(100, lr=0.0)


def test_learning_rates():
    assert learning_rates(3, 0.5).tolist() == [0.5, 0.5, 0.5]
    dim = learning_rates(4, 1.0, 0.5)
    assert np.allclose(dim, [1.0, 2**-0.5, 3**-0.5, 0.5])
    with pytest.raises(ParameterError, match="gamma"):
        learning_rates(3, 1.0, -0.1)
