"""Differential privacy core: clipping, Gaussian and Laplace mechanisms, accounting, group privacy.

* :mod:`fedprivacy.dp.mechanisms` -- L2 / L1 clipping (one vector or row-wise) and the Gaussian
  and Laplace mechanisms with noise from a caller's seeded :class:`numpy.random.Generator`.
* :mod:`fedprivacy.dp.rdp` -- the RDP of one (Poisson-sub-sampled) Gaussian step on dp-accounting
  over :data:`DEFAULT_ORDERS`, and the RDP -> (epsilon, delta) conversion of Balle et al. 2020.
* :mod:`fedprivacy.dp.accounting` -- :class:`PrivacyAccountant` (RDP or PLD, on dp-accounting)
  for Gaussian and Poisson-sub-sampled Gaussian steps composed over rounds, and external RDP
  curves (e.g. Opacus).
* :mod:`fedprivacy.dp.group_privacy` -- group privacy from an RDP curve: the RDP route (Lemma 6,
  valid orders only) and the (epsilon, delta) route (Lemma 5), with the tightest valid bound.
* :mod:`fedprivacy.dp.calibration` -- the noise multiplier for a target (epsilon, delta).

The names load on first use, so importing a submodule (the secure aggregation client imports
:mod:`fedprivacy.dp.party_noise`) does not load dp-accounting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy._lazy import lazy_exports

if TYPE_CHECKING:
    from fedprivacy.dp.accounting import AccountantKind, PrivacyAccountant, epsilon_for
    from fedprivacy.dp.calibration import noise_multiplier_for
    from fedprivacy.dp.group_privacy import (
        GroupBound,
        GroupPrivacyResult,
        approx_dp_group_bound,
        group_privacy_bounds,
        rdp_group_bound,
    )
    from fedprivacy.dp.mechanisms import (
        clip_l1,
        clip_l2,
        clip_rows_l1,
        clip_rows_l2,
        gaussian_mechanism,
        laplace_mechanism,
    )
    from fedprivacy.dp.rdp import DEFAULT_ORDERS, gaussian_rdp, lemma2_epsilons, rdp_to_epsilon

_LAZY = {
    "AccountantKind": "fedprivacy.dp.accounting",
    "PrivacyAccountant": "fedprivacy.dp.accounting",
    "epsilon_for": "fedprivacy.dp.accounting",
    "noise_multiplier_for": "fedprivacy.dp.calibration",
    "GroupBound": "fedprivacy.dp.group_privacy",
    "GroupPrivacyResult": "fedprivacy.dp.group_privacy",
    "approx_dp_group_bound": "fedprivacy.dp.group_privacy",
    "group_privacy_bounds": "fedprivacy.dp.group_privacy",
    "rdp_group_bound": "fedprivacy.dp.group_privacy",
    "clip_l1": "fedprivacy.dp.mechanisms",
    "clip_l2": "fedprivacy.dp.mechanisms",
    "clip_rows_l1": "fedprivacy.dp.mechanisms",
    "clip_rows_l2": "fedprivacy.dp.mechanisms",
    "gaussian_mechanism": "fedprivacy.dp.mechanisms",
    "laplace_mechanism": "fedprivacy.dp.mechanisms",
    "DEFAULT_ORDERS": "fedprivacy.dp.rdp",
    "gaussian_rdp": "fedprivacy.dp.rdp",
    "lemma2_epsilons": "fedprivacy.dp.rdp",
    "rdp_to_epsilon": "fedprivacy.dp.rdp",
}

__all__ = [
    "DEFAULT_ORDERS",
    "AccountantKind",
    "GroupBound",
    "GroupPrivacyResult",
    "PrivacyAccountant",
    "approx_dp_group_bound",
    "clip_l1",
    "clip_l2",
    "clip_rows_l1",
    "clip_rows_l2",
    "epsilon_for",
    "gaussian_mechanism",
    "gaussian_rdp",
    "group_privacy_bounds",
    "laplace_mechanism",
    "lemma2_epsilons",
    "noise_multiplier_for",
    "rdp_group_bound",
    "rdp_to_epsilon",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
