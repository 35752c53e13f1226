"""Fig. 2 of the ULDP-FL paper: group-privacy epsilon against group size.

Setting (Section 2.2 of the paper): the Poisson-sub-sampled Gaussian mechanism with noise
multiplier 5.0 and sampling rate 0.01 composed over 10^5 steps, record-level RDP from
dp-accounting, group delta 1e-5, group sizes k = 1, 2, 4, ..., 64.

For every k the data hold each route of :func:`fedprivacy.dp.group_privacy.group_privacy_bounds`
(``rdp``: Lemma 6 on the orders it allows; ``approx-dp``: Lemma 5 with the per-record delta solved
exactly; ``rdp-all-orders``: Lemma 6 ignoring its condition ``alpha >= 2^(c+1)``) plus
``rdp-paper-grid``: the RDP route on the order grid of the authors' published code
(``get_group_privacy_spent`` in their ``noise_utils.py``: orders ``2k + i/10`` for i = 0..99 and
20 evenly spaced orders from ``k + 10`` to ``64 k``, no order condition). The last one reproduces
the paper's printed values for k = 32 and 64 (2100 and 11400) and shows that they come from
orders 42 and 74, below ``2^(c+1)`` = 64 and 128, where Lemma 6 does not apply.

The paper's (epsilon, delta) route (Lemma 5) uses record-level orders up to 63 only, and its
code replaces k = 64 by 62; with that grid the exact optimum of its bisection is 854 at k = 32
(as ours) but about 51,000 at "k = 64" (only order 63 > 62 is usable), against 3,508 here with
orders above 64. That is the "numerical instability" the paper mentions; the value is not
printed in the paper, so it is not in the table.

The paper's printed values are only those in its text (k = 1: 2.85, k = 32: 2100, k = 64: 11400);
the rest of its Fig. 2 is a plot with no printed numbers.
"""

from __future__ import annotations

import csv
import io
import math
import time
from pathlib import Path
from typing import Any, Final

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from numpy.typing import NDArray  # noqa: E402

from fedprivacy.dp.accounting import PrivacyAccountant, quiet_accounting  # noqa: E402
from fedprivacy.dp.group_privacy import (  # noqa: E402
    ROUTE_APPROX_DP,
    ROUTE_RDP,
    ROUTE_RDP_ALL_ORDERS,
    group_exponent,
    group_privacy_bounds,
    rdp_group_bound,
)
from fedprivacy.dp.rdp import gaussian_rdp  # noqa: E402
from fedprivacy.files import atomic_write_json, atomic_write_text, save_figure  # noqa: E402

__all__ = [
    "FIGURE_SETTING",
    "PAPER_VALUES",
    "ROUTE_PAPER_GRID",
    "group_privacy_figure_data",
    "group_privacy_markdown",
    "paper_order_grid",
    "run_group_privacy_figure",
]

FIGURE_SETTING: Final[dict[str, Any]] = {
    "noise_multiplier": 5.0,
    "sampling_rate": 0.01,
    "steps": 100_000,
    "delta": 1e-5,
    "group_sizes": [1, 2, 4, 8, 16, 32, 64],
}
"""The paper's setting of Fig. 2 (Section 2.2)."""

PAPER_VALUES: Final[dict[int, float]] = {1: 2.85, 32: 2100.0, 64: 11400.0}
"""Group epsilon printed in the paper's text about Fig. 2 (record level at k = 1)."""

ROUTE_PAPER_GRID: Final = "rdp-paper-grid"

_ROUTES: Final = (ROUTE_RDP, ROUTE_APPROX_DP, ROUTE_RDP_ALL_ORDERS, ROUTE_PAPER_GRID)


def paper_order_grid(group_size: int) -> NDArray[np.float64]:
    """Record-level orders of the authors' RDP group-privacy code for group size ``k``.

    ``2k + i/10`` for ``i = 0 .. 99`` and 20 evenly spaced orders from ``k + 10`` to ``64 k``.
    """
    k = float(group_size)
    grid = np.concatenate([2 * k + np.arange(100) / 10.0, np.linspace(k + 10.0, 64 * k, 20)])
    return np.unique(grid)


def _paper_grid_bound(group_size: int, setting: dict[str, Any]) -> dict[str, Any] | None:
    if group_size == 1:
        return None  # the authors' code takes k = 1 from the record-level accountant
    grid = paper_order_grid(group_size)
    # dp-accounting's series for fractional orders above ~2000 does not converge here; those
    # orders get an infinite RDP and drop out (they are far from the optimum).
    with quiet_accounting():
        rdp = setting["steps"] * gaussian_rdp(
            setting["noise_multiplier"], setting["sampling_rate"], grid
        )
    bound = rdp_group_bound(grid, rdp, group_size, setting["delta"], enforce_order_condition=False)
    row = bound.to_dict()
    row["route"] = ROUTE_PAPER_GRID
    return row


def group_privacy_figure_data(setting: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every route's group epsilon for every group size of the setting (no files).

    Parameters
    ----------
    setting : dict, optional
        Keys as :data:`FIGURE_SETTING` (the default).

    Returns
    -------
    dict
        ``setting``, ``record_epsilon`` (RDP) and ``record_epsilon_pld``, ``rows`` (one per group
        size: ``group_size``, ``c``, ``routes`` (list of route dicts), ``chosen``,
        ``paper_epsilon``), and ``seconds``.
    """
    cfg = dict(FIGURE_SETTING if setting is None else setting)
    started = time.perf_counter()
    acc = PrivacyAccountant("rdp").compose_gaussian(
        cfg["noise_multiplier"], cfg["steps"], cfg["sampling_rate"]
    )
    orders, rdp = acc.rdp()
    record_eps, record_order = acc.epsilon_and_order(cfg["delta"])
    pld = PrivacyAccountant("pld").compose_gaussian(
        cfg["noise_multiplier"], cfg["steps"], cfg["sampling_rate"]
    )
    rows = []
    for k in cfg["group_sizes"]:
        result = group_privacy_bounds(orders, rdp, k, cfg["delta"])
        routes = [b.to_dict() for b in result.bounds]
        paper_grid = _paper_grid_bound(k, cfg)
        if paper_grid is not None:
            routes.append(paper_grid)
        rows.append(
            {
                "group_size": k,
                "c": group_exponent(k),
                "routes": routes,
                "chosen": result.chosen.route,
                "epsilon": result.to_dict()["epsilon"],
                "paper_epsilon": PAPER_VALUES.get(k) if setting is None else None,
            }
        )
    return {
        "setting": cfg,
        "record_epsilon": record_eps,
        "record_order": record_order,
        "record_epsilon_pld": pld.epsilon(cfg["delta"]),
        "rows": rows,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _route(row: dict[str, Any], name: str) -> dict[str, Any] | None:
    for r in row["routes"]:
        if r["route"] == name:
            return dict(r)
    return None


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "inf"
    return f"{value:.4g}" if value < 100 else f"{value:.0f}"


def group_privacy_markdown(data: dict[str, Any]) -> str:
    """Markdown table of :func:`group_privacy_figure_data`: ours per route next to the paper's.

    An ``*`` marks a bound from an order that violates Lemma 6's condition (not a proven bound).
    """
    cfg = data["setting"]
    lines = [
        f"Group privacy, sub-sampled Gaussian: noise multiplier {cfg['noise_multiplier']}, "
        f"sampling rate {cfg['sampling_rate']}, {cfg['steps']} steps, delta {cfg['delta']:g} "
        f"(record level: RDP {data['record_epsilon']:.4f}, PLD {data['record_epsilon_pld']:.4f}).",
        "",
        "| k | RDP, Lemma 6 (valid orders) | (eps, delta), Lemma 5 | RDP, all orders | "
        "RDP, authors' order grid | chosen (tightest valid) | paper |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in data["rows"]:
        cells = []
        for name in _ROUTES:
            r = _route(row, name)
            if r is None:
                cells.append("-")
                continue
            order = "" if r["order"] is None else f" (alpha {r['order']:.4g})"
            mark = "" if r["valid"] else "*"
            cells.append(f"{_fmt(r['epsilon'])}{mark}{order}")
        paper = row["paper_epsilon"]
        lines.append(
            f"| {row['group_size']} | {' | '.join(cells)} | {_fmt(row['epsilon'])} "
            f"({row['chosen']}) | {_fmt(paper) if paper is not None else '-'} |"
        )
    lines.append("")
    lines.append(
        "`*`: not a proven bound: the best order violates alpha >= 2^(c+1) of Lemma 6 "
        "(c = ceil(log2 k)). alpha is the record-level RDP order."
    )
    return "\n".join(lines) + "\n"


def _csv(data: dict[str, Any]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(
        ["group_size", "route", "epsilon", "delta", "valid", "order", "group_order", "chosen"]
        + ["paper_epsilon"]
    )
    for row in data["rows"]:
        for r in row["routes"]:
            writer.writerow(
                [
                    row["group_size"],
                    r["route"],
                    "" if r["epsilon"] is None else repr(r["epsilon"]),
                    repr(r["delta"]),
                    int(r["valid"]),
                    "" if r["order"] is None else repr(r["order"]),
                    "" if r["group_order"] is None else repr(r["group_order"]),
                    int(r["route"] == row["chosen"]),
                    "" if row["paper_epsilon"] is None else repr(row["paper_epsilon"]),
                ]
            )
    return buf.getvalue()


def _plot(data: dict[str, Any], path: Path) -> None:
    styles = {
        ROUTE_RDP: ("RDP, Lemma 6 (valid orders)", "-", "o"),
        ROUTE_APPROX_DP: (r"$(\epsilon,\delta)$, Lemma 5", "-", "s"),
        ROUTE_RDP_ALL_ORDERS: ("RDP, all orders (invalid)", "--", "^"),
        ROUTE_PAPER_GRID: ("RDP, authors' order grid", ":", "v"),
    }
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    for name, (label, line, marker) in styles.items():
        ks, eps = [], []
        for row in data["rows"]:
            r = _route(row, name)
            if r is not None and r["epsilon"] is not None:
                ks.append(row["group_size"])
                eps.append(r["epsilon"])
        ax.plot(ks, eps, linestyle=line, marker=marker, label=label)
    paper = [(row["group_size"], row["paper_epsilon"]) for row in data["rows"]]
    paper = [(k, e) for k, e in paper if e is not None]
    if paper:
        ax.scatter(
            [k for k, _ in paper],
            [e for _, e in paper],
            marker="x",
            s=70,
            color="black",
            zorder=5,
            label="paper (printed values)",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("group size k")
    ax.set_ylabel(rf"group $\epsilon$ at $\delta$ = {data['setting']['delta']:g}")
    ax.set_title("Group privacy of DP-SGD-like composition (paper Fig. 2)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    save_figure(fig, path, dpi=130, tight=True)


def run_group_privacy_figure(out_dir: Path) -> dict[str, Any]:
    """Compute Fig. 2's data and write CSV, JSON, Markdown and PNG into ``out_dir``.

    Files: ``group_privacy.csv`` (one row per group size and route), ``group_privacy.json``
    (:func:`group_privacy_figure_data`), ``group_privacy.md`` (:func:`group_privacy_markdown`),
    ``group_privacy.png``.

    Returns
    -------
    dict
        The data, with ``files`` (the paths written, as strings).
    """
    out = Path(out_dir)
    data = group_privacy_figure_data()
    paths = {
        "csv": out / "group_privacy.csv",
        "json": out / "group_privacy.json",
        "markdown": out / "group_privacy.md",
        "png": out / "group_privacy.png",
    }
    atomic_write_text(paths["csv"], _csv(data))
    atomic_write_text(paths["markdown"], group_privacy_markdown(data))
    _plot(data, paths["png"])
    data["files"] = [str(p) for p in paths.values()]
    atomic_write_json(paths["json"], data)
    return data
