"""Records of finished ULDP-FL figure curves, so that a figure is assembled without training again.

:func:`fedprivacy.experiments.uldp_figures.run_figure` writes ``PANEL-SLUG.json`` next to each
curve's CSV (:func:`write_curve`): everything its
:class:`~fedprivacy.experiments.uldp_figure_report.CurveResult` holds (per-seed arrays, seeds,
panel and curve, hyper-parameters, epsilons, caveats, ``extra``), the settings it ran with, its
wall-clock seconds, and ``computed``, what defines its numbers (:func:`computed_key`): each seed's
resolved :class:`~fedprivacy.uldp.config.UldpConfig` (hyper-parameters filled in from
``DEFAULT_HYPER``) without :data:`WHERE_FIELDS`, and the rounds of the projected epsilon. A later
run with the same ``computed`` loads the curve (:func:`reusable_curve`) instead of training it.

Arrays are stored as nested lists of numbers, ``nan`` as ``null`` and infinities as the strings
``"inf"`` / ``"-inf"``, so the file is standard JSON and every value round-trips exactly.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import numpy as np
from numpy.typing import NDArray

from fedprivacy.experiments.uldp_figure_report import CurveResult
from fedprivacy.experiments.uldp_figure_specs import Curve, Panel
from fedprivacy.files import atomic_write_json
from fedprivacy.uldp.config import UldpConfig

__all__ = [
    "WHERE_FIELDS",
    "StoredCurve",
    "computed_key",
    "key_differences",
    "read_curve",
    "reusable_curve",
    "write_curve",
]

FORMAT: Final = "fedprivacy/uldp-figure-curve"
VERSION: Final = 1

#: :class:`UldpConfig` fields that change where (and how fast) a run computes, never what: they
#: are left out of :func:`computed_key`, so a curve trained on a GPU is reused on a CPU.
#: ``eval_every`` is not among them: it decides which rounds have a test metric.
WHERE_FIELDS: Final = ("device", "max_rows", "gradient", "data_dir", "creditcard_path")


class StoredCurve(NamedTuple):
    """A curve read back from its record (:func:`read_curve`).

    Attributes
    ----------
    result : CurveResult
        The curve as it was computed.
    computed : dict
        What defined its numbers (:func:`computed_key`).
    wall_seconds : float
        Wall-clock seconds its runs took.
    """

    result: CurveResult
    computed: dict[str, Any]
    wall_seconds: float


def computed_key(configs: Sequence[UldpConfig], epsilon_at: int | None) -> dict[str, Any]:
    """What defines a curve's numbers: each seed's resolved configuration and ``epsilon_at``.

    Parameters
    ----------
    configs : sequence of UldpConfig
        The runs of the curve, one per seed, in order (unresolved is fine).
    epsilon_at : int or None
        The rounds after which the projected epsilon is reported (``None``: none).

    Returns
    -------
    dict
        JSON-ready: ``configs`` (:meth:`UldpConfig.to_dict` of each resolved config, without
        :data:`WHERE_FIELDS`) and ``epsilon_at``.
    """
    rows = [
        {k: v for k, v in c.resolved().to_dict().items() if k not in WHERE_FIELDS} for c in configs
    ]
    key: dict[str, Any] = json.loads(json.dumps({"configs": rows, "epsilon_at": epsilon_at}))
    return key


def key_differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The names of what differs between two :func:`computed_key` values, sorted ([] if same).

    ``seeds`` when the numbers of seeds differ, else the differing config fields (``seed``,
    ``rounds``, ``global_lr`` ...), and ``epsilon_at`` (the paper's rounds of the projection).
    """
    ours, theirs = list(stored.get("configs", [])), list(current.get("configs", []))
    if len(ours) != len(theirs):
        return ["seeds"]
    names: set[str] = set()
    for a, b in zip(ours, theirs, strict=True):
        names |= {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
    if stored.get("epsilon_at") != current.get("epsilon_at"):
        names.add("epsilon_at")
    return sorted(names)


def _enc(x: float) -> float | str | None:
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def _dec(x: float | str | None) -> float:
    if x is None:
        return math.nan
    if isinstance(x, str):
        if x not in ("inf", "-inf"):
            raise ValueError(f"not a number: {x!r}")
        return math.inf if x == "inf" else -math.inf
    return float(x)


def _array(values: NDArray[np.float64]) -> list[Any]:
    """Nested lists of :func:`_enc` values."""
    if values.ndim == 1:
        return [_enc(float(x)) for x in values]
    return [_array(row) for row in values]


def _from_array(values: Sequence[Any]) -> NDArray[np.float64]:
    def dec(v: Any) -> Any:
        return [dec(x) for x in v] if isinstance(v, list) else _dec(v)

    return np.asarray(dec(list(values)), dtype=np.float64)


def curve_record(
    stored: StoredCurve, settings: Mapping[str, Any] | None = None, figure: str = ""
) -> dict[str, Any]:
    """The JSON-ready record of a curve (what :func:`write_curve` writes)."""
    r = stored.result
    return {
        "format": FORMAT,
        "version": VERSION,
        "figure": figure,
        "panel": dataclasses.asdict(r.panel),
        "curve": dataclasses.asdict(r.curve),
        "label": r.curve.label,
        "seeds": list(r.seeds),
        "rounds": r.panel.rounds,
        "computed": stored.computed,
        "settings": dict(settings or {}),
        "wall_seconds": stored.wall_seconds,
        "metric_name": r.metric_name,
        "data_source": r.data_source,
        "group_size": r.group_size,
        "caveats": list(r.caveats),
        "hyper": dict(r.hyper),
        "extra": dict(r.extra),
        "metric": _array(r.metric),
        "loss": _array(r.loss),
        "epsilon": _array(r.epsilon),
        "seconds": _array(r.seconds),
        "epsilon_at": (
            None
            if r.epsilon_at is None
            else {"rounds": r.epsilon_at[0], "epsilon": _array(r.epsilon_at[1])}
        ),
        "epsilon_server": None if r.epsilon_server is None else _array(r.epsilon_server),
    }


def curve_from_record(data: Mapping[str, Any]) -> StoredCurve:
    """The curve of a :func:`curve_record`.

    Raises
    ------
    ValueError
        If ``data`` is not a record of this format and version.
    KeyError, TypeError
        If a field is missing or of the wrong kind.
    """
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} record of version {VERSION}")
    panel = dict(data["panel"])
    panel["curves"] = tuple(Curve(**c) for c in panel["curves"])
    at = data["epsilon_at"]
    server = data["epsilon_server"]
    result = CurveResult(
        panel=Panel(**panel),
        curve=Curve(**data["curve"]),
        seeds=[int(s) for s in data["seeds"]],
        metric=_from_array(data["metric"]),
        loss=_from_array(data["loss"]),
        epsilon=_from_array(data["epsilon"]),
        seconds=_from_array(data["seconds"]),
        metric_name=str(data["metric_name"]),
        data_source=str(data["data_source"]),
        group_size=data["group_size"],
        caveats=tuple(str(c) for c in data["caveats"]),
        epsilon_at=None if at is None else (int(at["rounds"]), _from_array(at["epsilon"])),
        hyper=dict(data["hyper"]),
        extra=dict(data["extra"]),
        epsilon_server=None if server is None else _from_array(server),
    )
    return StoredCurve(result, dict(data["computed"]), float(data["wall_seconds"]))


def write_curve(
    path: str | Path,
    stored: StoredCurve,
    settings: Mapping[str, Any] | None = None,
    figure: str = "",
) -> None:
    """Write the record of a curve to ``path`` (atomically; ``extra`` must be JSON-ready)."""
    atomic_write_json(path, curve_record(stored, settings, figure))


def read_curve(path: str | Path) -> StoredCurve:
    """Read the record written by :func:`write_curve`.

    Raises
    ------
    OSError
        If the file cannot be read.
    ValueError, KeyError, TypeError
        If it is not such a record (:func:`curve_from_record`).
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return curve_from_record(data)


def reusable_curve(path: str | Path, computed: Mapping[str, Any]) -> tuple[StoredCurve | None, str]:
    """The curve recorded in ``path`` if it was computed as ``computed`` says.

    Returns
    -------
    tuple of (StoredCurve or None, str)
        The stored curve and ``""`` when it can be reused; else ``None`` and why not (``""``
        when there is no file, e.g. ``"computed with a different rounds, seed"``).
    """
    if not Path(path).is_file():
        return None, ""
    try:
        stored = read_curve(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"unreadable ({type(exc).__name__}: {exc})"
    diff = key_differences(stored.computed, computed)
    if diff:
        return None, f"computed with a different {', '.join(diff)}"
    return stored, ""
