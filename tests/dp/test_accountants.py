from __future__ import annotations

import numpy as np
import pytest

from fedprivacy.dp.accountants import (
    ACCOUNTANTS,
    AccountantBackend,
    PldBackend,
    RdpBackend,
)
from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.errors import ParameterError


@pytest.fixture
def saved_accountants():
    with ACCOUNTANTS.restoring():
        yield ACCOUNTANTS


class _PureGaussian(AccountantBackend):
    """Plain Gaussian steps only: epsilon of the merged Gaussian at order 2 (a toy)."""

    name = "toy"

    def __init__(self) -> None:
        self.orders = np.empty(0, dtype=np.float64)
        self.precision = 0.0

    @classmethod
    def create(cls, orders, pld_discretization):
        return cls()

    def compose_gaussian(self, noise_multiplier, steps, sampling_rate):
        self.precision += steps / noise_multiplier**2

    def epsilon_and_order(self, delta):
        return self.precision, 2.0

    def copy(self):
        out = _PureGaussian()
        out.precision = self.precision
        return out


def test_builtin_accountants() -> None:
    assert dict(ACCOUNTANTS) == {"rdp": RdpBackend, "pld": PldBackend}
    assert RdpBackend.calibration_start is None and PldBackend.calibration_start == "rdp"
    assert PrivacyAccountant("rdp").orders.size > 0 and PrivacyAccountant("pld").orders.size == 0


def test_register_refuses_a_taken_kind(saved_accountants) -> None:
    class Other(RdpBackend):
        name = "pld"

    with pytest.raises(ParameterError, match="'pld' is registered already") as info:
        ACCOUNTANTS.register(Other.name, Other)
    assert info.value.name == "kind"
    assert ACCOUNTANTS["pld"] is PldBackend


def test_registered_kind_drives_the_accountant(saved_accountants) -> None:
    assert ACCOUNTANTS.register(_PureGaussian.name, _PureGaussian) is _PureGaussian
    acc = PrivacyAccountant("toy")  # type: ignore[arg-type]
    acc.compose_gaussian(2.0, steps=8).compose_gaussian(1.0, steps=0)
    assert acc.kind == "toy" and acc.steps == 8 and acc.history == ((2.0, 1.0, 8),)
    assert acc.epsilon_and_order(1e-5) == (2.0, 2.0)
    other = acc.copy().compose_gaussian(1.0)
    assert (acc.epsilon(1e-5), other.epsilon(1e-5)) == (2.0, 3.0)
    # the RDP-curve methods need an RDP backend
    with pytest.raises(ParameterError, match="kind: rdp\\(\\) needs the 'rdp' accountant"):
        acc.rdp()
    with pytest.raises(ParameterError, match="kind: compose_rdp needs"):
        acc.compose_rdp([2.0], [0.1])
    with pytest.raises(ParameterError) as info:
        PrivacyAccountant("moments")  # type: ignore[arg-type]
    assert str(info.value) == "kind: must be 'rdp', 'pld' or 'toy', got 'moments'"


def test_backends_copy_independently() -> None:
    for backend in (RdpBackend.create(None, 1e-4), PldBackend.create(None, 1e-4)):
        backend.compose_gaussian(2.0, 3, 1.0)
        backend.compose_gaussian(2.0, 3, 0.5)
        eps = backend.epsilon_and_order(1e-5)[0]
        twin = backend.copy()
        twin.compose_gaussian(1.0, 5, 1.0)
        assert backend.epsilon_and_order(1e-5)[0] == eps < twin.epsilon_and_order(1e-5)[0]
    with pytest.raises(ParameterError, match="orders: only apply to the 'rdp' accountant"):
        PldBackend.create([2.0], 1e-4)
    with pytest.raises(ParameterError, match="pld_discretization"):
        PldBackend.create(None, 0.0)
    with pytest.raises(ParameterError, match="orders"):
        RdpBackend.create([0.5], 1e-4)
