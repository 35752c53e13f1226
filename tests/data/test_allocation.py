import numpy as np
import pytest

from fedprivacy.data.allocation import Allocation
from fedprivacy.errors import ParameterError


def test_statistics_and_weights():
    silo = np.array([0, 0, 0, 1, 1, 2])
    user = np.array([0, 0, 1, 0, 2, 2])
    a = Allocation(silo=silo, user=user, num_silos=3, num_users=4, distribution="manual")
    assert a.histogram().tolist() == [[2, 1, 0, 0], [1, 0, 1, 0], [0, 0, 1, 0]]
    assert a.records_per_user().tolist() == [3, 1, 2, 0]
    assert a.users_per_silo().tolist() == [2, 2, 1]
    assert a.silos_per_user().tolist() == [2, 1, 2, 0]
    assert a.max_records_per_user() == 3 and a.median_records_per_user() == 2.0
    assert a.users_in_silo(1).tolist() == [0, 2] and a.active_users().tolist() == [0, 1, 2]
    w = a.weights()
    assert np.allclose(w[:, :3].sum(axis=0), 1.0) and np.all(w[:, 3] == 0)
    assert w[0, 0] == pytest.approx(2 / 3)
    assert a.records(0, 0).tolist() == [0, 1] and a.records(user=2).tolist() == [4, 5]
    group = a.silo_users(0)
    assert group.users.tolist() == [0, 1] and group.offsets.tolist() == [0, 2, 3]
    assert group.padded().tolist() == [[0, 1], [2, -1]]
    assert a.summary()["active_users"] == 3
    with pytest.raises(ParameterError):
        Allocation(silo=silo, user=user[:-1], num_silos=3, num_users=4, distribution="x")
    with pytest.raises(ParameterError):
        Allocation(silo=silo, user=user, num_silos=2, num_users=4, distribution="x")
    assert not a.silo.flags.writeable
