"""The units a selection moves in: Multi-RoundSecAgg's batches, the partition scheme's groups.

A :class:`~fedprivacy.participation.selectors.UnitSelector` selects whole units of
:attr:`~fedprivacy.participation.selectors.UnitSelector.unit` users, placed by a
:class:`~fedprivacy.participation.layout.BatchLayout`; the privacy guard and the budget filter
shrink and retire whole units. These helpers see through such wrappers to the selector inside.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.participation.selectors import Selector, UnitSelector

__all__ = ["innermost", "unit_index", "unit_size", "use_layout"]


def innermost(selector: Selector) -> Selector:
    """The scheme's own selector inside its wrappers (the guard, the privacy filter)."""
    inner = getattr(selector, "selector", None)
    return innermost(inner) if isinstance(inner, Selector) else selector


def unit_size(selector: Selector) -> int:
    """Users that leave (or retire from) a round together: a batch, a partition group, or one.

    Examples
    --------
    >>> from fedprivacy.participation.selectors import BatchPartitionSelector, RandomSelector
    >>> unit_size(BatchPartitionSelector(6, 4, 2)), unit_size(RandomSelector(6, 4))
    (2, 1)
    """
    inner = innermost(selector)
    return inner.unit if isinstance(inner, UnitSelector) else 1


def unit_index(selector: Selector) -> NDArray[np.intp]:
    """The unit of each user (each user its own without units).

    >>> from fedprivacy.participation.selectors import BatchPartitionSelector
    >>> unit_index(BatchPartitionSelector(6, 4, 2)).tolist()
    [0, 0, 1, 1, 2, 2]
    """
    inner = innermost(selector)
    if not isinstance(inner, UnitSelector):
        return np.arange(selector.num_users, dtype=np.intp)
    if inner.layout is None:
        return np.arange(inner.num_users, dtype=np.intp) // inner.unit
    return inner.layout.unit_index(inner.unit)


def use_layout(selector: Selector, layout: BatchLayout) -> None:
    """Select whole units of ``selector`` (wrapped or not) as ``layout`` places the users.

    Raises
    ------
    ParameterError
        Naming ``batch_layout``, if the layout does not hold exactly the users ``0 .. N-1``.

    Examples
    --------
    >>> from fedprivacy.participation.selectors import BatchPartitionSelector
    >>> selector = BatchPartitionSelector(4, 2, 2)
    >>> use_layout(selector, BatchLayout((3, 0, 2, 1)))
    >>> selector.units.tolist()
    [[3, 0], [2, 1]]
    """
    inner = innermost(selector)
    if isinstance(inner, UnitSelector):
        if len(layout.order) != inner.num_users:
            raise ParameterError(
                "batch_layout", f"holds {len(layout.order)} users, the selector {inner.num_users}"
            )
        layout.unit_index(inner.unit)  # refuses a layout of other users
        inner.layout = layout
