from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.fl.mechanism import l2_clip_factors
from fedprivacy.uldp.clipped_sums import clipped_sums, dense_clipped


def _rows() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(6, 5, generator=g) * torch.tensor([0.1, 3, 0, 1, 10, 0.5])[:, None]


def _factors(rows: torch.Tensor, bound: float) -> tuple[torch.Tensor, torch.Tensor]:
    norms = torch.linalg.vector_norm(rows, dim=1)
    return l2_clip_factors(norms, bound), norms


def test_clipping_and_clipped_sum() -> None:
    rows = _rows()
    factors, norms = _factors(rows, 1.0)
    clipped = rows * factors[:, None]
    assert torch.all(torch.linalg.vector_norm(clipped, dim=1) <= 1.0 + 1e-6)
    small = norms <= 1.0
    assert torch.all(factors[small] == 1.0)
    weights = np.array([0.5, 0.25, 1.0, 0.0, 0.25, 1.0])
    (out,) = clipped_sums(
        iter([(np.array([0, 1, 2]), rows[:3]), (np.array([3, 4, 5]), rows[3:])]),
        1.0,
        weights,
        num_params=5,
    )
    expected = (torch.from_numpy(weights).float()[:, None] * clipped).sum(0)
    torch.testing.assert_close(out.total, expected, rtol=1e-6, atol=1e-6)
    assert out.groups == 5  # weight 0 does not count
    assert out.clipped == int(((norms > 1.0) & torch.from_numpy(weights != 0)).sum())
    with pytest.raises(ParameterError, match="clip"):
        clipped_sums(iter([(np.array([0]), rows[:1])]), 0.0, weights, num_params=5)


def test_chunks_mixing_silos_are_split_by_silo() -> None:
    # groups of three silos arrive in chunks that mix them, in no particular order
    rows = _rows()
    silo = np.array([2, 0, 1, 0, 2, 1])
    weights = np.array([0.5, 0.25, 1.0, 0.0, 0.25, 1.0])
    chunks = [(np.array([4, 1]), rows[[4, 1]]), (np.array([0, 5, 3, 2]), rows[[0, 5, 3, 2]])]
    sums = clipped_sums(iter(chunks), 1.0, weights, num_params=5, segment_of=silo, num_segments=3)
    factors, norms = _factors(rows, 1.0)
    for s in range(3):
        mine = np.flatnonzero(silo == s)
        expected = sum(weights[g] * factors[g] * rows[g] for g in mine)
        torch.testing.assert_close(sums[s].total, expected.float(), rtol=1e-6, atol=1e-7)
        live = mine[weights[mine] != 0]
        assert sums[s].groups == len(live)
        assert sums[s].clipped == int((norms[live] > 1.0).sum())
        assert sums[s].mean_norm == pytest.approx(float(norms[live].mean()))
    with pytest.raises(ParameterError, match="segment_of"):
        clipped_sums(iter(chunks), 1.0, weights, num_params=5, segment_of=silo, num_segments=2)


def test_dense_clipped_lays_rows_out_per_silo_and_user() -> None:
    rows = _rows()
    silo = np.array([0, 0, 1, 1, 1, 0])
    user = np.array([3, 0, 0, 2, 1, 1])
    chunks = [(np.array([2, 0, 5]), rows[[2, 0, 5]]), (np.array([4, 1, 3]), rows[[4, 1, 3]])]
    dense = dense_clipped(iter(chunks), user, 4, 5, 1.0, segment_of=silo, num_segments=2)
    wide = rows.double()
    norms = torch.linalg.vector_norm(wide, dim=1)
    clipped = (wide * torch.clamp(1.0 / norms, max=1.0)[:, None]).numpy()
    for g in range(6):
        np.testing.assert_array_equal(dense[silo[g]][user[g]], clipped[g])
    assert not dense[1][3].any()  # user 3 holds no record in silo 1
    assert np.all(np.linalg.norm(dense[0], axis=1) <= 1.0 + 1e-15)
