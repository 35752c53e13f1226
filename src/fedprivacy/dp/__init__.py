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
"""

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
