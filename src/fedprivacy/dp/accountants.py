"""The accountant registry: the kinds of :class:`~fedprivacy.dp.accounting.PrivacyAccountant`.

:data:`ACCOUNTANTS` maps a kind to its :class:`AccountantBackend`, both on dp-accounting:
``"rdp"`` (:class:`RdpBackend`: Renyi DP on a grid of orders, converted by Lemma 2 of the
ULDP-FL paper) and ``"pld"`` (:class:`PldBackend`: dp-accounting's privacy-loss-distribution
accountant). ``PrivacyAccountant(kind)`` looks the kind up and keeps a backend;
:func:`~fedprivacy.dp.calibration.noise_multiplier_for` asks the backend where to start its
search (:attr:`AccountantBackend.calibration_start`). ``ACCOUNTANTS.register(name, backend)`` adds
a kind.

Every kind also converts per-user compositions (:mod:`fedprivacy.dp.per_user`): a user whose
rounds compose to one Gaussian of ``mu^2 = sum z_t^-2`` has the epsilon
:meth:`AccountantBackend.user_epsilons` gives, and :meth:`AccountantBackend.mu2_budget` is the
largest ``mu^2`` within an epsilon budget. The base class computes both from the kind's own
:meth:`~AccountantBackend.compose_gaussian` (a new kind gets them for free); RDP and PLD override
them with closed forms.

Examples
--------
>>> list(ACCOUNTANTS)
['rdp', 'pld']
>>> rdp = RdpBackend.create(None, 1e-4)
>>> rdp.compose_gaussian(5.0, 100_000, 0.01)
>>> round(rdp.epsilon_and_order(1e-5)[0], 3)  # the paper's 2.85
2.849
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from typing import ClassVar, Literal

import dp_accounting
import numpy as np
from dp_accounting.pld import PLDAccountant
from numpy.typing import ArrayLike, NDArray

from fedprivacy._registry import Registry
from fedprivacy.dp._checks import require_orders, require_positive
from fedprivacy.dp.gaussian_pld import gaussian_epsilon, mu_for_epsilon
from fedprivacy.dp.rdp import DEFAULT_ORDERS, rdp_to_epsilon, step_rdp_cached
from fedprivacy.errors import ParameterError

__all__ = [
    "ACCOUNTANTS",
    "AccountantBackend",
    "AccountantKind",
    "PldBackend",
    "RdpBackend",
]

#: The built-in accountant kinds.
AccountantKind = Literal["rdp", "pld"]


class AccountantBackend(ABC):
    """What one kind of accountant keeps: composed Gaussian steps, and epsilon at a delta.

    :class:`~fedprivacy.dp.accounting.PrivacyAccountant` validates the parameters, keeps the
    history and calls these methods; a subclass sets :attr:`name` and implements them.
    Neighbouring datasets differ by adding or removing one unit (dp-accounting's
    ``ADD_OR_REMOVE_ONE`` relation).
    """

    #: The kind, its key in :data:`ACCOUNTANTS`.
    name: ClassVar[str]
    #: For a kind that is expensive at small noise: the kind whose calibrated noise starts
    #: :func:`~fedprivacy.dp.calibration.noise_multiplier_for`'s search (which then never probes
    #: the lower end blindly). ``None``: search the whole range.
    calibration_start: ClassVar[AccountantKind | None] = None
    #: RDP orders of the curve it keeps; empty when it keeps no RDP curve.
    orders: NDArray[np.float64]

    @classmethod
    @abstractmethod
    def create(cls, orders: ArrayLike | None, pld_discretization: float) -> AccountantBackend:
        """A backend with nothing composed, from the options of ``PrivacyAccountant``.

        Raises
        ------
        ParameterError
            For an option out of range or that this kind does not take.
        """

    @abstractmethod
    def compose_gaussian(self, noise_multiplier: float, steps: int, sampling_rate: float) -> None:
        """Compose ``steps >= 1`` runs of the Gaussian mechanism (arguments already checked)."""

    @abstractmethod
    def epsilon_and_order(self, delta: float) -> tuple[float, float | None]:
        """Epsilon at ``delta`` (checked) and the RDP order attaining it (``None`` if none)."""

    @abstractmethod
    def copy(self) -> AccountantBackend:
        """An independent copy."""

    @classmethod
    def user_epsilons(cls, mu2: NDArray[np.float64], delta: float) -> NDArray[np.float64]:
        """Epsilon at ``delta`` of users whose rounds compose to ``mu2`` (checked; 0: no round).

        By default one Gaussian step of noise multiplier ``mu2^-1/2`` on a fresh backend per
        distinct value.
        """
        values, where = np.unique(mu2, return_inverse=True)
        out = np.zeros(values.size, dtype=np.float64)
        for i, m in enumerate(values):
            if m > 0:
                backend = cls.create(None, 1e-4)
                backend.compose_gaussian(float(m) ** -0.5, 1, 1.0)
                out[i] = backend.epsilon_and_order(delta)[0]
        return np.asarray(out[where], dtype=np.float64)

    @classmethod
    def mu2_budget(cls, budget: float, delta: float) -> float:
        """The largest ``mu^2`` whose epsilon at ``delta`` is at most ``budget`` (both checked).

        By default a bisection of :meth:`user_epsilons` (increasing in ``mu^2``) to 1e-12.
        """
        low, high = 0.0, 1.0
        while cls.user_epsilons(np.array([high]), delta)[0] <= budget:
            low, high = high, 2.0 * high
        while high - low > 1e-12 * high:
            mid = (low + high) / 2.0
            low, high = (
                (mid, high)
                if cls.user_epsilons(np.array([mid]), delta)[0] <= budget
                else (low, mid)
            )
        return low


#: The backend class of every accountant kind (``ACCOUNTANTS.register(kind, backend)`` adds one).
ACCOUNTANTS: Registry[type[AccountantBackend]] = Registry(
    "kind", "must be {alternatives}, got {name!r}"
)


class RdpBackend(AccountantBackend):
    """Renyi DP: the curve ``rho(alpha)`` over a grid of orders, one numpy vector.

    Composing adds ``steps * rho_step(alpha)``, where ``rho_step`` comes from dp-accounting once
    per ``(noise_multiplier, sampling_rate)`` (cached); epsilon is the minimum over the orders of
    the Lemma 2 conversion (Balle et al. 2020). Takes ``orders`` (:data:`DEFAULT_ORDERS` when
    ``None``); ignores ``pld_discretization``.
    """

    name = "rdp"

    def __init__(self, orders: NDArray[np.float64]) -> None:
        self.orders = orders
        self.rho = np.zeros(orders.shape, dtype=np.float64)
        self._orders_key = tuple(float(a) for a in orders)

    @classmethod
    def create(cls, orders: ArrayLike | None, pld_discretization: float) -> RdpBackend:
        """A zero curve on ``orders`` (checked: finite, > 1)."""
        return cls(DEFAULT_ORDERS if orders is None else require_orders("orders", orders))

    def compose_gaussian(self, noise_multiplier: float, steps: int, sampling_rate: float) -> None:
        """Add ``steps`` times the RDP of one step."""
        self.rho = self.rho + steps * step_rdp_cached(
            noise_multiplier, sampling_rate, self._orders_key
        )

    def add_curve(self, rho: NDArray[np.float64]) -> None:
        """Add an RDP curve given on :attr:`orders`."""
        self.rho = self.rho + rho

    def epsilon_and_order(self, delta: float) -> tuple[float, float | None]:
        """Epsilon by Lemma 2, minimised over the orders, and the best order."""
        return rdp_to_epsilon(self.orders, self.rho, delta)

    def copy(self) -> RdpBackend:
        """An independent copy (the curve is copied; the orders are never modified)."""
        out = copy.copy(self)
        out.rho = self.rho.copy()
        return out

    @classmethod
    def user_epsilons(cls, mu2: NDArray[np.float64], delta: float) -> NDArray[np.float64]:
        """RDP epsilons of composed Gaussians, vectorised over users.

        ``rho(alpha) = alpha mu^2 / 2`` on :data:`~fedprivacy.dp.rdp.DEFAULT_ORDERS`, converted
        as ``dp_accounting.rdp.compute_epsilon`` converts one curve (Lemma 2 for orders above
        1.01, epsilon 0 where the KL bound already gives delta, the minimum over orders clipped
        at 0): what :func:`~fedprivacy.dp.accounting.epsilon_for` gives, to rounding.
        """
        values, where = np.unique(mu2, return_inverse=True)
        orders = _LEMMA2_ORDERS
        out = np.empty(values.size, dtype=np.float64)
        for start in range(0, values.size, _RDP_BLOCK):
            rho = np.outer(values[start : start + _RDP_BLOCK] / 2.0, orders)
            lemma2 = rho + np.log1p(-1.0 / orders) - np.log(delta * orders) / (orders - 1.0)
            eps = np.where(delta**2 + np.expm1(-rho) > 0, 0.0, lemma2)
            out[start : start + _RDP_BLOCK] = np.maximum(eps.min(axis=1), 0.0)
        return np.asarray(out[where], dtype=np.float64)

    @classmethod
    def mu2_budget(cls, budget: float, delta: float) -> float:
        """:meth:`user_epsilons`'s minimum inverted order by order, in closed form.

        Epsilon is at most ``budget`` exactly when some order's Lemma 2 value is, or when the KL
        bound already gives ``delta`` (epsilon 0); each is a bound on ``mu^2``.
        """
        orders = _LEMMA2_ORDERS
        shift = np.log1p(-1.0 / orders) - np.log(delta * orders) / (orders - 1.0)
        lemma2 = 2.0 * (budget - shift) / orders
        kl = -2.0 * np.log1p(-(delta**2)) / orders  # delta^2 + expm1(-rho) > 0
        return float(max(lemma2.max(), kl.max(), 0.0))


#: Users converted at once by :meth:`RdpBackend.user_epsilons` (a block of users x orders).
_RDP_BLOCK = 2048
_LEMMA2_ORDERS = DEFAULT_ORDERS[DEFAULT_ORDERS > 1.01]


class PldBackend(AccountantBackend):
    """dp-accounting's ``PLDAccountant``: tighter (exact up to its discretisation), no RDP curve.

    Its cost grows as the noise shrinks (the grid spans the privacy-loss range at
    ``pld_discretization`` spacing), so plain (not sub-sampled) Gaussian steps are merged exactly
    into one Gaussian of noise multiplier ``(sum steps / z^2)^(-1/2)``, composed when epsilon is
    asked for. Takes ``pld_discretization`` (> 0); refuses ``orders``.
    """

    name = "pld"
    calibration_start = "rdp"

    def __init__(self, discretization: float) -> None:
        self.orders = np.empty(0, dtype=np.float64)
        self.pld = PLDAccountant(value_discretization_interval=discretization)
        self.gaussian_precision = 0.0

    @classmethod
    def create(cls, orders: ArrayLike | None, pld_discretization: float) -> PldBackend:
        """An empty PLD accountant with ``value_discretization_interval=pld_discretization``."""
        if orders is not None:
            raise ParameterError("orders", "only apply to the 'rdp' accountant")
        return cls(require_positive("pld_discretization", pld_discretization))

    def compose_gaussian(self, noise_multiplier: float, steps: int, sampling_rate: float) -> None:
        """Merge plain Gaussian steps; compose Poisson-sub-sampled ones into the PLD."""
        if sampling_rate == 1.0:
            self.gaussian_precision += steps / noise_multiplier**2
        else:
            event = dp_accounting.PoissonSampledDpEvent(
                sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier)
            )
            self.pld.compose(event, steps)

    def epsilon_and_order(self, delta: float) -> tuple[float, float | None]:
        """The PLD's epsilon, the merged Gaussian composed into a copy; no order."""
        pld = self.pld
        if self.gaussian_precision > 0:
            pld = copy.deepcopy(self.pld)
            z_merged = 1.0 / math.sqrt(self.gaussian_precision)
            pld.compose(dp_accounting.GaussianDpEvent(z_merged))
        return float(pld.get_epsilon(delta)), None

    def copy(self) -> PldBackend:
        """An independent copy."""
        out = copy.copy(self)
        out.pld = copy.deepcopy(self.pld)
        return out

    @classmethod
    def user_epsilons(cls, mu2: NDArray[np.float64], delta: float) -> NDArray[np.float64]:
        """The exact privacy profile of the composed Gaussian, never above RDP's.

        The closed form of :mod:`fedprivacy.dp.gaussian_pld`, which dp-accounting's PLD
        approximates on a grid.
        """
        return gaussian_epsilon(np.sqrt(mu2), delta)

    @classmethod
    def mu2_budget(cls, budget: float, delta: float) -> float:
        """The closed form inverted (:func:`~fedprivacy.dp.gaussian_pld.mu_for_epsilon`)."""
        return mu_for_epsilon(budget, delta) ** 2


for _backend in (RdpBackend, PldBackend):
    ACCOUNTANTS.register(_backend.name, _backend)
