"""Where each user sits in Multi-RoundSecAgg's batch partition (and the partition scheme's groups).

The users are laid out in an order; batch ``b`` of size ``T`` holds the users at positions
``b*T .. b*T+T-1`` of it. In one process the order is the users' ids (:meth:`BatchLayout.
consecutive`: batch ``u // T``, the paper's layout). Deployed, whoever assigns the ids would
choose every user's batch mates, and a server that puts a victim beside its colluders reads the
victim's input from a "batch sum" (issue #50). So a deployment lays the users out by a seed the
nodes drew together (:meth:`BatchLayout.drawn`, :mod:`fedprivacy.flower.messaging.joint_draw`): the
users sorted by a hash of the seed and their id, a uniformly random order whatever the server chose,
as long as one party that drew is honest.

Examples
--------
>>> layout = BatchLayout.consecutive(6)
>>> layout.batches(range(6), 2)
{0: frozenset({0, 1}), 1: frozenset({2, 3}), 2: frozenset({4, 5})}
>>> drawn = BatchLayout.drawn(bytes(32), range(6))
>>> sorted(drawn.order) == list(range(6)), drawn == BatchLayout.drawn(bytes(32), range(6))
(True, True)
>>> drawn.unit_index(2).tolist() == [drawn.position[u] // 2 for u in range(6)]
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError

__all__ = ["LAYOUT_LABEL", "BatchLayout", "batches_of"]

LAYOUT_LABEL = b"fedprivacy/batch-layout"
"""Domain separation of the hash that orders the users of a drawn layout."""


def batches_of(
    users: Iterable[int], batch_size: int, position: Mapping[int, int] | None = None
) -> dict[int, frozenset[int]]:
    """The users grouped by batch ``position[u] // batch_size`` (by default ``u // batch_size``).

    >>> batches_of([0, 1, 3, 4], 2)
    {0: frozenset({0, 1}), 1: frozenset({3}), 2: frozenset({4})}
    >>> batches_of([0, 1, 3, 4], 2, {0: 3, 1: 0, 3: 1, 4: 2})
    {0: frozenset({1, 3}), 1: frozenset({0, 4})}
    """
    size = require_int("batch_size", batch_size, minimum=1)
    out: dict[int, set[int]] = {}
    for u in sorted(int(u) for u in users):
        key = u if position is None else position[u]
        out.setdefault(key // size, set()).add(u)
    return {b: frozenset(m) for b, m in sorted(out.items())}


@dataclass(frozen=True)
class BatchLayout:
    """The users in batch order (see the module docstring).

    Parameters
    ----------
    order : tuple of int
        Distinct user ids, by position.
    """

    order: tuple[int, ...]

    def __post_init__(self) -> None:
        order = tuple(int(u) for u in self.order)
        if len(set(order)) != len(order):
            raise ParameterError("batch_layout", "lists a user twice")
        object.__setattr__(self, "order", order)

    @classmethod
    def consecutive(cls, num_users: int) -> BatchLayout:
        """Users ``0 .. N-1`` in id order: batch ``u // T``."""
        return cls(tuple(range(require_int("num_users", num_users, minimum=1))))

    @classmethod
    def drawn(cls, seed: bytes, users: Iterable[int]) -> BatchLayout:
        """``users`` sorted by SHA-256 of the label, ``seed`` and the id (a uniform order)."""

        def rank(u: int) -> bytes:
            return hashlib.sha256(LAYOUT_LABEL + seed + int(u).to_bytes(8, "big")).digest()

        return cls(tuple(sorted((int(u) for u in users), key=rank)))

    @cached_property
    def position(self) -> dict[int, int]:
        """User -> position."""
        return {u: p for p, u in enumerate(self.order)}

    def batches(self, users: Iterable[int], batch_size: int) -> dict[int, frozenset[int]]:
        """``users`` grouped by their batch of ``batch_size`` in this layout."""
        return batches_of(users, batch_size, self.position)

    def unit_index(self, batch_size: int) -> NDArray[np.intp]:
        """The batch of each user ``0 .. N-1`` (the layout must hold exactly those users)."""
        n = len(self.order)
        if sorted(self.order) != list(range(n)):
            raise ParameterError("batch_layout", f"does not hold exactly the users 0 .. {n - 1}")
        index = np.empty(n, dtype=np.intp)
        index[np.asarray(self.order, dtype=np.intp)] = np.arange(n, dtype=np.intp) // batch_size
        return index

    def permutation(self) -> NDArray[np.intp]:
        """The order as an array (position -> user)."""
        return np.asarray(self.order, dtype=np.intp)
