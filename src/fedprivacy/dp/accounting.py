"""Privacy accounting of (sub-sampled) Gaussian mechanisms composed over steps or rounds.

The RDP of the Gaussian and Poisson-sub-sampled Gaussian mechanisms comes from ``dp-accounting``
through :mod:`fedprivacy.dp.rdp` (which also converts RDP to (epsilon, delta) by Lemma 2 of the
ULDP-FL paper, Balle et al. 2020) and the PLD accountant is
``dp_accounting.pld.PLDAccountant``; each kind of accountant is a backend registered in
:data:`fedprivacy.dp.accountants.ACCOUNTANTS`.

Typical per-round use (the RDP of one step is computed once per ``(noise, rate)`` and cached, so
composing a round and asking for epsilon afterwards costs a vector addition and a minimum)::

    acc = PrivacyAccountant("rdp")
    for _ in range(rounds):
        acc.compose_gaussian(noise_multiplier=5.0, steps=local_steps, sampling_rate=0.01)
        eps = acc.epsilon(1e-5)
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy.dp._checks import (
    require_delta,
    require_positive,
    require_sampling_rate,
    require_steps,
)
from fedprivacy.dp.accountants import ACCOUNTANTS, AccountantKind, RdpBackend
from fedprivacy.dp.rdp import rdp_curve
from fedprivacy.dp.rdp import step_rdp_cached as step_rdp_cached  # its cache, seen from here
from fedprivacy.errors import ParameterError

if TYPE_CHECKING:
    from fedprivacy.dp.group_privacy import GroupPrivacyResult

__all__ = [
    "AccountantKind",
    "PrivacyAccountant",
    "epsilon_for",
    "quiet_accounting",
]

#: The largest noise multiplier composed: dp-accounting squares it (1e100 squared is far from
#: float64's 1.8e308), and the epsilon of anything larger is below 1e-90 at any useful delta.
MAX_NOISE_MULTIPLIER = 1e100


class PrivacyAccountant:
    """Composes Gaussian mechanisms and reports epsilon at a delta.

    Parameters
    ----------
    kind : {"rdp", "pld"}
        ``"rdp"``: Renyi DP on a grid of orders, converted by Lemma 2 (Balle et al. 2020);
        supports external RDP curves (:meth:`compose_rdp`) and group privacy
        (:meth:`group_privacy`). ``"pld"``: dp-accounting's privacy-loss-distribution accountant,
        tighter (it is numerically exact up to its discretisation) but without RDP curves. A
        kind of :data:`~fedprivacy.dp.accountants.ACCOUNTANTS` (its backend keeps the state).
    orders : array_like, optional
        RDP orders (kind ``"rdp"`` only); :data:`DEFAULT_ORDERS` when omitted.
    pld_discretization : float
        ``value_discretization_interval`` of the PLD accountant (kind ``"pld"`` only).

    Notes
    -----
    The PLD accountant's cost grows as the noise shrinks (its grid spans the privacy-loss range
    at ``pld_discretization`` spacing); plain Gaussian steps are therefore merged exactly into one
    Gaussian (``noise_multiplier = (sum steps / z^2)^(-1/2)``) before they reach it.

    With kind ``"rdp"`` the state is one numpy vector ``rho(alpha)``: composing adds
    ``steps * rho_step(alpha)`` where ``rho_step`` comes from dp-accounting once per
    ``(noise_multiplier, sampling_rate)`` (cached), and :meth:`epsilon` is a minimum over the
    orders. Neighbouring datasets differ by adding or removing one unit (record, or user for
    user-level accounting) -- dp-accounting's ``ADD_OR_REMOVE_ONE`` relation.
    """

    def __init__(
        self,
        kind: AccountantKind = "rdp",
        orders: ArrayLike | None = None,
        *,
        pld_discretization: float = 1e-4,
    ) -> None:
        backend = ACCOUNTANTS.lookup(kind)
        self._kind: AccountantKind = kind
        self._history: list[tuple[float, float, int]] = []
        self._external_curves = 0
        self._state = backend.create(orders, pld_discretization)

    # ------------------------------------------------------------------ properties
    @property
    def kind(self) -> AccountantKind:
        """``"rdp"`` or ``"pld"``."""
        return self._kind

    @property
    def orders(self) -> NDArray[np.float64]:
        """The RDP orders (a copy; empty for the PLD accountant)."""
        return self._state.orders.copy()

    @property
    def history(self) -> tuple[tuple[float, float, int], ...]:
        """Every :meth:`compose_gaussian` call as ``(noise_multiplier, sampling_rate, steps)``."""
        return tuple(self._history)

    @property
    def steps(self) -> int:
        """Total number of Gaussian steps composed (external RDP curves not counted)."""
        return sum(s for _, _, s in self._history)

    @property
    def external_curves(self) -> int:
        """How many external RDP curves :meth:`compose_rdp` has added."""
        return self._external_curves

    # ------------------------------------------------------------------ composition
    def compose_gaussian(
        self, noise_multiplier: float, steps: int = 1, sampling_rate: float = 1.0
    ) -> PrivacyAccountant:
        """Compose ``steps`` runs of the (Poisson-sub-sampled) Gaussian mechanism.

        Parameters
        ----------
        noise_multiplier : float
            Noise standard deviation over the L2 sensitivity, > 0.
        steps : int
            Number of runs, >= 0 (0 composes nothing).
        sampling_rate : float
            Poisson sampling probability in (0, 1]; 1 means no sub-sampling.

        Returns
        -------
        PrivacyAccountant
            ``self``, so calls can be chained.

        Raises
        ------
        ParameterError
            If a parameter is out of range.
        """
        z = require_positive("noise_multiplier", noise_multiplier)
        if z > MAX_NOISE_MULTIPLIER:
            raise ParameterError(
                "noise_multiplier",
                f"must be at most {MAX_NOISE_MULTIPLIER:g}, got {z:g} (dp-accounting's arithmetic "
                "overflows beyond it; epsilon is then below 1e-90 anyway)",
            )
        t = require_steps("steps", steps)
        q = require_sampling_rate("sampling_rate", sampling_rate)
        if t == 0:
            return self
        self._state.compose_gaussian(z, t, q)
        self._history.append((z, q, t))
        return self

    def compose_rdp(self, orders: ArrayLike, rdp: ArrayLike) -> PrivacyAccountant:
        """Add an RDP curve computed elsewhere (e.g. Opacus' ``RDPAccountant``).

        The curve must cover every order of this accountant (it may have more orders; they are
        ignored). Build the accountant with ``orders=`` equal to the curve's orders, or compute
        the curve at :attr:`orders` (Opacus' ``analysis.rdp.compute_rdp`` accepts any orders).

        Parameters
        ----------
        orders : array_like
            Orders of the curve (> 1).
        rdp : array_like
            ``rho(alpha)`` per order, >= 0.

        Returns
        -------
        PrivacyAccountant
            ``self``.

        Raises
        ------
        ParameterError
            With the PLD accountant, or if the curve lacks an order of this accountant.
        """
        state = self._rdp_state("compose_rdp needs the 'rdp' accountant")
        grid, values = rdp_curve(orders, rdp)
        perm = np.argsort(grid, kind="stable")
        sorted_grid, sorted_values = grid[perm], values[perm]
        pos = np.searchsorted(sorted_grid, state.orders)
        idx = np.full(state.orders.shape, -1)
        for candidate in (pos - 1, pos):  # the nearest curve orders on either side
            cand = np.clip(candidate, 0, sorted_grid.size - 1)
            hit = np.isclose(sorted_grid[cand], state.orders, rtol=1e-9, atol=0.0) & (idx < 0)
            idx = np.where(hit, cand, idx)
        if np.any(idx < 0):
            missing = state.orders[idx < 0]
            raise ParameterError(
                "orders",
                f"the curve lacks {missing.size} order(s) of this accountant (first: "
                f"{float(missing[0])!r}); build the accountant with orders= the curve's orders",
            )
        state.add_curve(sorted_values[idx])
        self._external_curves += 1
        return self

    def _rdp_state(self, refusal: str) -> RdpBackend:
        """The RDP backend, or a :class:`ParameterError` ``kind: refusal`` for another kind."""
        if not isinstance(self._state, RdpBackend):
            raise ParameterError("kind", refusal)
        return self._state

    # ------------------------------------------------------------------ queries
    def rdp(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The composed RDP curve ``(orders, rho)`` (copies).

        Raises
        ------
        ParameterError
            With the PLD accountant.
        """
        state = self._rdp_state("rdp() needs the 'rdp' accountant")
        return state.orders.copy(), state.rho.copy()

    def epsilon_and_order(self, delta: float) -> tuple[float, float | None]:
        """Epsilon at ``delta`` and the RDP order attaining it (``None`` for PLD).

        Raises
        ------
        ParameterError
            If ``delta`` is outside (0, 1).
        """
        d = require_delta("delta", delta)
        return self._state.epsilon_and_order(d)

    def epsilon(self, delta: float) -> float:
        """Epsilon of everything composed so far, at ``delta`` in (0, 1).

        Raises
        ------
        ParameterError
            If ``delta`` is outside (0, 1).
        """
        return self.epsilon_and_order(delta)[0]

    def group_privacy(self, group_size: int, delta: float) -> GroupPrivacyResult:
        """Group-privacy bounds for groups of ``group_size`` units at group delta ``delta``.

        See :func:`fedprivacy.dp.group_privacy.group_privacy_bounds`.

        Raises
        ------
        ParameterError
            With the PLD accountant (group privacy here is built on the RDP curve), or for
            parameters out of range.
        """
        state = self._rdp_state(
            "group privacy needs the 'rdp' accountant (it works on the RDP curve)"
        )
        from fedprivacy.dp.group_privacy import group_privacy_bounds

        return group_privacy_bounds(state.orders, state.rho, group_size, delta)

    def copy(self) -> PrivacyAccountant:
        """An independent copy (compose into it without touching this one)."""
        out = copy.copy(self)
        out._history = list(self._history)
        out._state = self._state.copy()
        return out

    def __repr__(self) -> str:
        return (
            f"PrivacyAccountant(kind={self._kind!r}, steps={self.steps}, "
            f"external_curves={self._external_curves})"
        )


def epsilon_for(
    noise_multiplier: float,
    steps: int,
    delta: float,
    sampling_rate: float = 1.0,
    accountant: AccountantKind = "rdp",
) -> float:
    """Epsilon of ``steps`` compositions of the (Poisson-sub-sampled) Gaussian mechanism.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the L2 sensitivity, > 0.
    steps : int
        Number of compositions, >= 0.
    delta : float
        Target delta in (0, 1).
    sampling_rate : float
        Poisson sampling probability in (0, 1].
    accountant : {"rdp", "pld"}
        Which accountant.

    Returns
    -------
    float
        Epsilon.

    Raises
    ------
    ParameterError
        If a parameter is out of range.

    Examples
    --------
    >>> round(epsilon_for(5.0, 100_000, 1e-5, sampling_rate=0.01), 3)  # the paper's 2.85
    2.849
    """
    d = require_delta("delta", delta)
    acc = PrivacyAccountant(accountant)
    acc.compose_gaussian(noise_multiplier, steps, sampling_rate)
    return acc.epsilon(d)


@contextmanager
def quiet_accounting() -> Iterator[None]:
    """Silence dp-accounting's absl warnings about unconverged fractional orders.

    dp-accounting logs one line per skipped order the first time a ``(sigma, q)`` pair is
    computed (e.g. ``q = 0.5``); the orders are correctly left out of the epsilon. Wrap the
    calls that compose sub-sampled Gaussians (a run, the ``account`` command) in it.
    """
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
