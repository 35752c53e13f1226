"""The in-process reference of a cross-silo run: every round's aggregate recomputed in the clear.

A deployed ULDP-FL round releases ``sum_s sum_u w_{s,u} Delta_{s,u} + sum_s z_s``, where each
silo's noise ``z_s`` comes from OS randomness on the silo and never leaves it. The reference
replays the run from its directory: ``x_0`` from the configuration, then for every aggregated
round the same update the server made; at each ``x_t`` it recomputes, in one process, every
silo's clipped per-user updates with the round's minibatch seed and sums them with the plaintext
weights ``n_{s,u} / N_u`` (:func:`~fedprivacy.uldp.deployment.plaintext_aggregate`). The
deployed aggregate minus the reference is then the silos' summed noise (plus the encoding's
rounding, at most ``|U| P / 2``): :func:`compare_cross_silo` reports its largest entry and its
standard deviation next to the expected ``sqrt(|S|) sigma C / sqrt(|S|) = sigma C``.

Examples
--------
>>> sorted(noise_statistics([np.array([0.1, -0.1])], 0.1))
['deviation_std', 'max_abs_error_vs_simulation', 'noise_std_expected', 'samples']
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.deployment import plaintext_aggregate, silo_noise_std, silo_side
from fedprivacy.uldp.families import FAMILIES, UserLevelFamily
from fedprivacy.uldp.families.user_level import global_step
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.run_setup import initial_model, load_dataset

__all__ = ["compare_cross_silo", "noise_statistics"]


def noise_statistics(deviations: list[NDArray[np.float64]], expected_std: float) -> dict[str, Any]:
    """Largest absolute deviation, its empirical standard deviation, the expected one."""
    flat = np.concatenate(deviations) if deviations else np.zeros(0)
    return {
        "max_abs_error_vs_simulation": float(np.max(np.abs(flat))) if flat.size else None,
        "deviation_std": float(np.sqrt(np.mean(flat**2))) if flat.size else None,
        "noise_std_expected": float(expected_std),
        "samples": int(flat.size),
    }


def compare_cross_silo(run_dir: Path, data_dir: str | None = None) -> dict[str, Any]:
    """Replay a cross-silo run directory in process; the deviation statistics.

    Parameters
    ----------
    run_dir : pathlib.Path
        A directory written by :func:`fedprivacy.flower.uldp.cross_silo.run_cross_silo`.
    data_dir : str, optional
        The data directory (default ``$FEDPRIVACY_DATA``).

    Returns
    -------
    dict
        :func:`noise_statistics` over every aggregated round's entries.
    """
    text = (run_dir / "config.toml").read_text()
    side = silo_side(text, data_dir)
    cfg: UldpConfig = side.config
    spec = method_spec(cfg.method)
    family = FAMILIES[spec.family]
    assert isinstance(family, UserLevelFamily)
    _, _, flat = initial_model(cfg, load_dataset(cfg))
    assert cfg.global_lr is not None
    step = global_step(cfg.global_lr, cfg.effective_sampling_rate, cfg.users, cfg.num_silos)
    deviations = []
    with np.load(run_dir / "aggregates.npz") as z:
        rounds = sorted(int(k.removeprefix("round_")) for k in z.files if k.startswith("round_"))
        for t in rounds:
            aggregate = z[f"round_{t}"]
            keys, sampled = int(z[f"keys_{t}"]), z[f"sampled_{t}"]
            x = flat.numpy().astype(np.float32)
            reference = plaintext_aggregate(side, x, keys, sampled if spec.sampled else None)
            deviations.append(aggregate - reference)
            flat = family.server_update(flat, torch.from_numpy(aggregate).to(flat.dtype), step)
    # the sum of |S| independent silo noises of std sigma C / sqrt(|S|) each
    expected = silo_noise_std(cfg) * math.sqrt(cfg.num_silos)
    return noise_statistics(deviations, expected)
