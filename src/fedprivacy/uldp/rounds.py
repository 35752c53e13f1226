"""The hyper-parameters of a ULDP-FL round and what a round returns.

:class:`RoundHyper` is what every method family reads; :class:`RoundOutput` what each returns
from :meth:`fedprivacy.uldp.families.MethodFamily.round`.

Examples
--------
>>> from fedprivacy.fl.local_training import LocalTrainingSpec
>>> hyper = RoundHyper(LocalTrainingSpec(epochs=2, batch_size=8, lr=0.1), noise_multiplier=3.0)
>>> (hyper.clip, hyper.noise_multiplier, hyper.naive_noise)
(1.0, 3.0, 'corrected')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.fl.local_spec import LocalTrainingSpec

__all__ = ["RoundHyper", "RoundOutput"]


@dataclass(frozen=True)
class RoundHyper:
    """Hyper-parameters of a round.

    Attributes
    ----------
    local : LocalTrainingSpec
        Local epochs ``Q``, batch size ``B``, local learning rate ``eta_l`` (ULDP-SGD uses none
        of them: one full-batch gradient per user); plain SGD, so momentum and weight decay 0
        (:func:`~fedprivacy.fl.local_spec.require_plain_sgd`).
    global_lr : float
        ``eta_g``.
    clip : float
        ``C``.
    noise_multiplier : float
        Noise multiplier.
    sampling_rate : float
        ``q`` of the ``-s`` variants (ignored otherwise).
    naive_noise : {"corrected", "paper"}
        ULDP-NAIVE's noise, see :mod:`fedprivacy.uldp.methods`.
    """

    local: LocalTrainingSpec
    global_lr: float = 1.0
    clip: float = 1.0
    noise_multiplier: float = 5.0
    sampling_rate: float = 1.0
    naive_noise: Literal["corrected", "paper"] = "corrected"


@dataclass
class RoundOutput:
    """The result of one round.

    Attributes
    ----------
    flat : torch.Tensor
        ``x_{t+1}``.
    presum : torch.Tensor
        ``sum_s`` of the silos' contributions before noise (for ULDP-GROUP-k, whose noise is
        added inside DP-SGD, the noisy deltas).
    noisy_sum : torch.Tensor
        ``sum_s Delta_s`` as the server receives it.
    sampled : numpy.ndarray or None
        Boolean mask of the sampled users (``-s`` variants).
    groups : int
        Users (AVG / SGD) or silos that contributed.
    clipped : int
        How many of their updates were clipped.
    mean_norm : float
        Mean norm of the updates before clipping.
    seconds : float
        Wall time of the round.
    """

    flat: torch.Tensor
    presum: torch.Tensor
    noisy_sum: torch.Tensor
    sampled: NDArray[np.bool_] | None = None
    groups: int = 0
    clipped: int = 0
    mean_norm: float = math.nan
    seconds: float = 0.0
