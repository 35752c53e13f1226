"""Any model's arrays (Flower's ``ArrayRecord``) as one flat vector, and back.

Secure aggregation and DP work on one vector per user; a Flower app exchanges its model as an
``ArrayRecord`` of named arrays of any shape (a PyTorch ``state_dict``, a list of NumPy arrays).
:class:`ArrayLayout` is the correspondence: the floating-point arrays in their order, flattened
and concatenated. Arrays of other kinds (a BatchNorm layer's ``num_batches_tracked``) are not
aggregated: they keep the server's value.

Examples
--------
>>> import numpy as np
>>> from flwr.app import ArrayRecord
>>> record = ArrayRecord([np.ones((2, 2), np.float32), np.arange(3, dtype=np.int64)])
>>> layout = ArrayLayout.of(record)
>>> layout.size, layout.flatten(record).tolist()
(4, [1.0, 1.0, 1.0, 1.0])
>>> back = layout.unflatten(np.full(4, 0.5), base=record)
>>> [a.tolist() for a in back.to_numpy_ndarrays()]
[[[0.5, 0.5], [0.5, 0.5]], [0, 1, 2]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flwr.app import Array, ArrayRecord
from numpy.typing import NDArray

from fedprivacy.secagg.errors import MalformedMessageError

__all__ = ["ArrayLayout"]


@dataclass(frozen=True)
class ArrayLayout:
    """The names, shapes and dtypes of a model's arrays; which of them are aggregated.

    Attributes
    ----------
    names : tuple of str
        The arrays' names, in the record's order.
    shapes : tuple of tuple of int
        Their shapes.
    dtypes : tuple of str
        Their dtypes (NumPy names).
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]

    @classmethod
    def of(cls, record: ArrayRecord) -> ArrayLayout:
        """The layout of ``record``."""
        arrays = {name: array.numpy() for name, array in record.items()}
        return cls(
            tuple(arrays),
            tuple(tuple(int(d) for d in a.shape) for a in arrays.values()),
            tuple(a.dtype.name for a in arrays.values()),
        )

    def _aggregated(self) -> list[int]:
        return [i for i, d in enumerate(self.dtypes) if np.issubdtype(np.dtype(d), np.floating)]

    @property
    def size(self) -> int:
        """Entries of the flat vector (the floating-point arrays' entries)."""
        return sum(int(np.prod(self.shapes[i], dtype=np.int64)) for i in self._aggregated())

    def flatten(self, record: ArrayRecord) -> NDArray[np.float64]:
        """The floating-point arrays of ``record``, flattened and concatenated (float64).

        Raises
        ------
        MalformedMessageError
            If ``record`` does not have this layout (another model, a missing array).
        """
        if ArrayLayout.of(record) != self:
            raise MalformedMessageError(
                "the arrays do not match the model's layout (names, shapes or dtypes differ)"
            )
        arrays = [array.numpy() for array in record.values()]
        parts = [arrays[i].astype(np.float64).ravel() for i in self._aggregated()]
        return np.concatenate(parts) if parts else np.zeros(0)

    def unflatten(self, flat: NDArray[np.floating], base: ArrayRecord) -> ArrayRecord:
        """An ``ArrayRecord`` of this layout: aggregated arrays from ``flat``, others from ``base``.

        Each array gets its own dtype back (a float32 model stays float32).
        """
        if flat.shape != (self.size,):
            raise MalformedMessageError(f"{flat.size} values for a model of {self.size}")
        arrays = [array.numpy() for array in base.values()]
        start = 0
        for i in self._aggregated():
            n = int(np.prod(self.shapes[i], dtype=np.int64))
            piece = flat[start : start + n].reshape(self.shapes[i])
            arrays[i] = piece.astype(np.dtype(self.dtypes[i]))
            start += n
        return ArrayRecord(
            array_dict={
                name: Array.from_numpy_ndarray(np.array(a, order="C", copy=True))
                for name, a in zip(self.names, arrays, strict=True)
            }
        )
