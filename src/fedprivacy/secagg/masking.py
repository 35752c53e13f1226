"""The masks of one round: what a client adds to its encoded input and the server removes.

A client ``u`` sends ``y_u = x_u + PRG(b_u) + sum_v +-PRG(s_uv) mod 2^bits`` (:func:`mask`): its
self mask from the seed ``b_u`` and one pairwise mask per neighbour, ``+`` towards a higher id
and ``-`` towards a lower one (:func:`~fedprivacy.secagg.party.pairwise_sign`), so the pairwise
masks of two aggregated neighbours cancel in the sum. The server adds the aggregated inputs and
subtracts each aggregated user's self mask, the pairwise masks the aggregated users applied
towards the neighbours left out, and, in the exact noise mode, the excess noise the survivors
report (:func:`unmask_sum`). Both sides expand the masks with the same
:class:`~fedprivacy.crypto.prg.MaskExpander`, keyed as :mod:`fedprivacy.secagg.derivation` says.

Examples
--------
>>> from fedprivacy.crypto.fixed_point import FixedPointCodec
>>> p = SecAggParameters.create(bytes(16), 0, range(3), 2, FixedPointCodec.for_sum(1, 3, 32))
>>> x = {u: p.codec.encode(np.full(2, 0.25), np.random.default_rng(u)) for u in range(3)}
>>> keys = {(0, 1): b"a" * 32, (0, 2): b"b" * 32, (1, 2): b"c" * 32}
>>> seeds = {u: bytes([u]) * 32 for u in range(3)}
>>> peers = lambda u: {v: keys[min(u, v), max(u, v)] for v in range(3) if v != u}
>>> y = {u: mask(p, x[u], seeds[u], u, peers(u)) for u in range(3)}
>>> total = unmask_sum(p, y, seeds, {}, {})
>>> p.codec.decode_sum(total, 3).tolist()
[0.75, 0.75]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fedprivacy.crypto.prg import MaskExpander, reduce
from fedprivacy.secagg.derivation import self_mask_key
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.party import pairwise_sign

__all__ = ["mask", "unmask_sum"]


def mask(
    params: SecAggParameters,
    encoded: np.ndarray,
    seed: bytes,
    user: int,
    pair_keys: Mapping[int, bytes],
) -> np.ndarray:
    """``encoded + PRG(b_u) + sum_v +-PRG(s_uv) mod 2^bits``: ``user``'s masked input.

    ``pair_keys`` maps each neighbour ``v`` to the key of this round's mask shared with it.
    """
    expander = MaskExpander(params.vector_length, params.codec.bits)
    masked = encoded.astype(expander.dtype, copy=True)
    expander.add_into(masked, self_mask_key(seed, params, user))
    for v in sorted(pair_keys):
        expander.combine(masked, pair_keys[v], pairwise_sign(user, v))
    reduce(masked, params.codec.bits)
    return masked


def unmask_sum(
    params: SecAggParameters,
    inputs: Mapping[int, np.ndarray],
    seeds: Mapping[int, bytes],
    left_out: Mapping[tuple[int, int], bytes],
    excess: Mapping[int, np.ndarray],
) -> np.ndarray:
    """The encoded sum of the aggregated ``inputs`` without their masks, modulo ``2^bits``.

    Parameters
    ----------
    inputs : mapping of int to numpy.ndarray
        The aggregated users' masked inputs.
    seeds : mapping of int to bytes
        Each aggregated user's self-mask seed ``b_u``, reconstructed from shares.
    left_out : mapping of (int, int) to bytes
        ``(u, v) -> key`` of the pairwise mask that aggregated ``u`` applied towards ``v``, a
        neighbour left out of the sum.
    excess : mapping of int to numpy.ndarray
        The excess noise each aggregated user removes (exact noise mode; else empty).
    """
    expander = MaskExpander(params.vector_length, params.codec.bits)
    acc = np.zeros(params.vector_length, dtype=expander.dtype)
    for u in sorted(inputs):
        np.add(acc, inputs[u], out=acc)
        expander.subtract_from(acc, self_mask_key(seeds[u], params, u))
    for (u, v), key in sorted(left_out.items()):
        expander.combine(acc, key, -pairwise_sign(u, v))  # undo u's application
    for u in sorted(excess):
        np.subtract(acc, excess[u], out=acc)
    reduce(acc, params.codec.bits)
    return acc
