"""One record of a round for every algorithm, and one CSV writer for a run's records.

FedAvg (in process, deployed, the drop-in ``PrivateFedAvg``), every ULDP-FL method and the
secure selection simulation record a round as a :class:`RoundRecord`: what the loop saw (the
users selected and those aggregated, why the round aborted, how long it took, the noise of its
release) and the algorithm's own numbers in :attr:`RoundRecord.metrics` (test accuracy,
epsilons, ...). :func:`records_csv` writes any run's records, each output naming its columns.

Examples
--------
>>> r = RoundRecord(0, (1, 2, 4, 7), (1, 2, 7), 0.5, metrics={"test_accuracy": 0.75})
>>> r.get("test_accuracy"), math.isnan(r.get("test_loss"))
(0.75, True)
>>> print(records_csv([r], [("round", lambda t, r: t + 1), metric_column("test_loss", ".3f")]))
round,test_loss
1,
<BLANKLINE>
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fedprivacy.errors import ParameterError

__all__ = ["Column", "RoundRecord", "metric_column", "records_csv"]


@dataclass(frozen=True)
class RoundRecord:
    """What happened in one round of any algorithm.

    Attributes
    ----------
    round_index : int
        The round loop's index (0 for a run's first round).
    selected, aggregated : tuple of int
        The users the selector chose, and those the server really aggregated (sorted).
    seconds : float
        The round's wall time (training and aggregation; evaluation excluded).
    aborted : str
        Why the round released nothing ('' if it did not abort).
    noise_multiplier : float
        Of the released aggregate's noise (NaN: no DP, or nothing released).
    wrap_log_probability : float
        Distributed DP: natural log of the bound on the noisy sum wrapping around (NaN: none).
    metrics : mapping of str to float
        The algorithm's own numbers (``test_accuracy``, ``epsilon``, ``max_abs_error``, ...).
    """

    round_index: int
    selected: tuple[int, ...]
    aggregated: tuple[int, ...]
    seconds: float
    aborted: str = ""
    noise_multiplier: float = math.nan
    wrap_log_probability: float = math.nan
    metrics: Mapping[str, float] = field(default_factory=dict)

    def get(self, name: str, default: float = math.nan) -> float:
        """The metric ``name`` (``default`` where the round did not record it)."""
        return self.metrics.get(name, default)

    def fields(self) -> dict[str, Any]:
        """Its values as one flat JSON-ready dict (an event, a summary's row).

        ``round`` is the index, the users are lists, the metrics stand beside the rest.
        """
        values = asdict(self)
        values.update(values.pop("metrics"))
        values["selected"], values["aggregated"] = list(self.selected), list(self.aggregated)
        return {"round": values.pop("round_index"), **values}

    @classmethod
    def restore(cls, stored: Mapping[str, Any]) -> RoundRecord:
        """A record from :func:`dataclasses.asdict` of one (a checkpoint's).

        Raises
        ------
        ParameterError
            If ``stored`` is not such a dict (a checkpoint of another version).
        """
        try:
            record = cls(**stored)
        except TypeError:
            raise ParameterError(
                "checkpoint", "its round records are of another version of fedprivacy"
            ) from None
        users = tuple(int(u) for u in record.selected), tuple(int(u) for u in record.aggregated)
        return replace(record, selected=users[0], aggregated=users[1])


#: A CSV column: its name and ``cell(round position, record)``.
Column = tuple[str, Callable[[int, RoundRecord], object]]


def records_csv(records: Sequence[RoundRecord], columns: Sequence[Column]) -> str:
    """A header and one line per record; a cell that is None or a NaN float is left empty."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([name for name, _ in columns])
    for t, record in enumerate(records):
        writer.writerow([_cell(cell(t, record)) for _, cell in columns])
    return buf.getvalue()


def metric_column(name: str, spec: str = "", *, header: str | None = None) -> Column:
    """The column of metric ``name`` formatted by ``spec`` (empty where absent or NaN)."""

    def cell(t: int, record: RoundRecord) -> str:
        value = record.get(name)
        return "" if math.isnan(value) else format(value, spec)

    return (header or name, cell)


def _cell(value: object) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value
