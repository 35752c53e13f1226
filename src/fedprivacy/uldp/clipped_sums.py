"""Clip per-user vectors and sum them per silo: the reduction of a ULDP-AVG / ULDP-SGD round.

The per-user trainer (:class:`~fedprivacy.fl.local_training.VectorisedTrainer`) yields the
users' updates chunk by chunk as ``(group_ids, (k, P) vectors)``; a *group* is one user's
records in one silo. An in-process round trains the groups of every silo in one pass
(:attr:`Federation.group_offsets <fedprivacy.uldp.federation.Federation.group_offsets>`), so
a chunk mixes silos: :func:`clipped_sums` clips every row to ``C`` and adds
``w_g * clip_C(v_g)`` into its silo's sum with one matrix product per block of rows;
:func:`dense_clipped` lays the clipped rows out per silo and user for the private weighting
protocol.

Examples
--------
>>> import numpy as np, torch
>>> rows = torch.tensor([[3.0, 4.0], [0.3, 0.4], [1.0, 0.0]])
>>> sums = clipped_sums(iter([(np.arange(3), rows)]), 1.0, np.ones(3),
...                     segment_of=np.array([0, 1, 0]), num_segments=2, num_params=2)
>>> [s.total.tolist() for s in sums]
[[1.600000023841858, 0.800000011920929], [0.30000001192092896, 0.4000000059604645]]
>>> [(s.groups, s.clipped) for s in sums]
[(2, 1), (1, 0)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.fl.mechanism import l2_clip_factors

__all__ = ["ClipRule", "ClippedSum", "clipped_sums", "dense_clipped"]

#: How rows are clipped: an L2 bound ``C``, or ``factors(norms)`` (a mechanism's
#: :meth:`~fedprivacy.fl.mechanism.Mechanism.clip_factors`), the scale of each row from its norm.
ClipRule = float | Callable[[torch.Tensor], torch.Tensor]

_I64 = NDArray[np.int64]
#: Rows per float64 matrix product: bounds the float64 copy of a chunk (8 bytes x rows x P).
_BLOCK_ROWS = 4096


def _rule(clip: ClipRule) -> Callable[[torch.Tensor], torch.Tensor]:
    """``factors(norms)`` of a clip rule (a bound is checked and means L2 clipping)."""
    if callable(clip):
        return clip
    bound = clip
    if not (isinstance(bound, int | float) and math.isfinite(bound) and bound > 0):
        raise ParameterError("clip", f"must be a finite number > 0, got {bound!r}")
    return lambda norms: l2_clip_factors(norms, bound)


@dataclass(frozen=True)
class ClippedSum:
    """The weighted sum of clipped per-group vectors of one silo, with clipping statistics.

    Attributes
    ----------
    total : torch.Tensor
        ``sum_g w_g * clip_C(v_g)``, shape ``(P,)``.
    groups : int
        Number of groups that contributed (non-empty, non-zero weight).
    clipped : int
        How many of them were scaled (a clip factor other than 1).
    mean_norm : float
        Mean L2 norm before clipping (``nan`` for no group).
    """

    total: torch.Tensor
    groups: int
    clipped: int
    mean_norm: float


def _segments(segment_of: ArrayLike | None, num_segments: int, size: int) -> _I64:
    if segment_of is None:
        return np.zeros(size, dtype=np.int64)
    seg = np.asarray(segment_of, dtype=np.int64)
    if seg.shape != (size,) or (size and (seg.min() < 0 or seg.max() >= num_segments)):
        raise ParameterError(
            "segment_of", f"must give every group a segment in [0, {num_segments})"
        )
    return seg


def clipped_sums(
    chunks: Iterable[tuple[_I64, torch.Tensor]],
    clip: ClipRule,
    weights: ArrayLike,
    *,
    num_params: int,
    segment_of: ArrayLike | None = None,
    num_segments: int = 1,
    device: torch.device | str = "cpu",
) -> tuple[ClippedSum, ...]:
    """Reduce per-group vectors to ``sum_{g in s} w_g clip_C(v_g)`` per segment (silo).

    Parameters
    ----------
    chunks : iterable of (group_ids, vectors)
        From :meth:`~fedprivacy.fl.local_training.VectorisedTrainer.iter_deltas` or
        :meth:`~fedprivacy.fl.local_training.VectorisedTrainer.iter_gradients`.
    clip : float or callable
        Clipping bound ``C``, or the rule ``factors(norms)`` (:data:`ClipRule`).
    weights : array_like of float, shape (G,)
        Weight of every group (indexed by group id).
    num_params : int
        ``P``.
    segment_of : array_like of int, shape (G,), optional
        The segment (silo) of every group; default all in segment 0.
    num_segments : int
        Number of segments.
    device : torch.device or str
        Device of the sums.

    Returns
    -------
    tuple of ClippedSum
        One per segment: the sum (accumulated in float64, returned in float32) and the clipping
        statistics of its groups with a non-zero weight.
    """
    rule = _rule(clip)
    w_all = np.asarray(weights, dtype=np.float64)
    seg_all = _segments(segment_of, num_segments, len(w_all))
    totals = torch.zeros((num_segments, num_params), dtype=torch.float64, device=device)
    groups = np.zeros(num_segments, dtype=np.int64)
    clipped = np.zeros(num_segments, dtype=np.int64)
    norm_sum = np.zeros(num_segments, dtype=np.float64)
    for ids, vectors in chunks:
        norms = torch.linalg.vector_norm(vectors, dim=1)
        factors = rule(norms)
        w = torch.from_numpy(w_all[ids]).to(device=vectors.device, dtype=torch.float64)
        coef = w * factors.to(torch.float64)
        seg = torch.from_numpy(seg_all[ids]).to(vectors.device)
        for lo in range(0, len(ids), _BLOCK_ROWS):
            hi = min(lo + _BLOCK_ROWS, len(ids))
            spread = torch.zeros((num_segments, hi - lo), dtype=torch.float64, device=w.device)
            spread[seg[lo:hi], torch.arange(hi - lo, device=w.device)] = coef[lo:hi]
            totals += (spread @ vectors[lo:hi].to(torch.float64)).to(device)
        live = w_all[ids] != 0
        norms_np = norms.detach().cpu().numpy().astype(np.float64)
        scaled = factors.detach().cpu().numpy() != 1
        seg_np = seg_all[ids]
        groups += np.bincount(seg_np[live], minlength=num_segments)
        clipped += np.bincount(seg_np[live & scaled], minlength=num_segments)
        norm_sum += np.bincount(seg_np[live], weights=norms_np[live], minlength=num_segments)
    return tuple(
        ClippedSum(
            total=totals[s].to(torch.float32),
            groups=int(groups[s]),
            clipped=int(clipped[s]),
            mean_norm=float(norm_sum[s] / groups[s]) if groups[s] else math.nan,
        )
        for s in range(num_segments)
    )


def dense_clipped(
    chunks: Iterable[tuple[_I64, torch.Tensor]],
    group_user: ArrayLike,
    num_users: int,
    num_params: int,
    clip: ClipRule,
    *,
    segment_of: ArrayLike | None = None,
    num_segments: int = 1,
) -> list[NDArray[np.float64]]:
    """The clipped per-user vectors of every segment (silo) as dense ``(num_users, P)`` arrays.

    Rows of users without records in a silo (or not trained this round) are zero; the private
    weighting protocol multiplies them by their encrypted weights. Clipped in float64: the L2
    bound the accounting assumes then holds to a few ulps (a float32 factor would let norms
    exceed the clip by ~1e-7 relative).

    Parameters
    ----------
    chunks : iterable of (group_ids, vectors)
        As in :func:`clipped_sums`.
    group_user : array_like of int, shape (G,)
        The user of every group.
    num_users, num_params : int
        ``|U|`` and ``P``.
    clip : float or callable
        As in :func:`clipped_sums`.
    segment_of, num_segments
        As in :func:`clipped_sums`.

    Returns
    -------
    list of numpy.ndarray
        One float64 ``(num_users, P)`` array per segment.
    """
    rule = _rule(clip)
    users = np.asarray(group_user, dtype=np.int64)
    seg_all = _segments(segment_of, num_segments, len(users))
    out = [np.zeros((num_users, num_params), dtype=np.float64) for _ in range(num_segments)]
    for ids, vectors in chunks:
        wide = vectors.to(torch.float64)
        factors = rule(torch.linalg.vector_norm(wide, dim=1))
        rows = (wide * factors[:, None]).cpu().numpy()
        for s in np.unique(seg_all[ids]):
            here = seg_all[ids] == s
            out[int(s)][users[ids[here]]] = rows[here]
    return out
