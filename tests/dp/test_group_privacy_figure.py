from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fedprivacy.experiments.group_privacy_figure import (
    FIGURE_SETTING,
    PAPER_VALUES,
    ROUTE_PAPER_GRID,
    group_privacy_markdown,
    paper_order_grid,
    run_group_privacy_figure,
)


def _route(row: dict[str, object], name: str) -> dict[str, object]:
    routes = row["routes"]
    assert isinstance(routes, list)
    return next(r for r in routes if r["route"] == name)


@pytest.fixture(scope="module")
def figure(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], Path]:
    out = tmp_path_factory.mktemp("fig2")
    return run_group_privacy_figure(out), out


def test_files_are_written(figure: tuple[dict[str, object], Path]) -> None:
    data, out = figure
    for name in (
        "group_privacy.csv",
        "group_privacy.json",
        "group_privacy.md",
        "group_privacy.png",
    ):
        assert (out / name).stat().st_size > 0
    assert (out / "group_privacy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((out / "group_privacy.csv").open()))
    # three routes for each of the 7 group sizes, plus the authors' grid for k >= 2
    assert len(rows) == 7 * 3 + 6
    assert {r["route"] for r in rows} == {"rdp", "approx-dp", "rdp-all-orders", ROUTE_PAPER_GRID}
    assert sum(int(r["chosen"]) for r in rows) == 7
    on_disk = json.loads((out / "group_privacy.json").read_text())
    assert on_disk["rows"] == data["rows"]
    assert data["seconds"] < 20  # type: ignore[operator]


def test_setting_and_record_level_value(figure: tuple[dict[str, object], Path]) -> None:
    data, _ = figure
    assert data["setting"]["group_sizes"] == [1, 2, 4, 8, 16, 32, 64]  # type: ignore[index]
    assert FIGURE_SETTING["noise_multiplier"] == 5.0 and FIGURE_SETTING["steps"] == 100_000
    assert data["record_epsilon"] == pytest.approx(PAPER_VALUES[1], abs=0.01)
    assert data["record_epsilon_pld"] < data["record_epsilon"]  # type: ignore[operator]


def test_paper_values_come_from_invalid_orders(figure: tuple[dict[str, object], Path]) -> None:
    data, _ = figure
    rows = {row["group_size"]: row for row in data["rows"]}  # type: ignore[attr-defined]
    assert set(PAPER_VALUES) == {1, 32, 64}  # only the numbers printed in the paper
    for k, order, paper_rel in ((32, 42.0, 0.03), (64, 74.0, 0.005)):
        row = rows[k]
        assert row["paper_epsilon"] == PAPER_VALUES[k]
        grid = _route(row, ROUTE_PAPER_GRID)
        # the authors' order grid reproduces the printed value from an order below 2k
        assert grid["epsilon"] == pytest.approx(PAPER_VALUES[k], rel=paper_rel)
        assert grid["order"] == pytest.approx(order) and grid["valid"] is False
        assert grid["order"] < 2 * k
        valid_rdp = _route(row, "rdp")
        assert valid_rdp["valid"] is True and valid_rdp["epsilon"] > 1.5 * PAPER_VALUES[k]
        assert row["chosen"] in ("rdp", "approx-dp")
        assert _route(row, row["chosen"])["valid"] is True


def test_paper_order_grid() -> None:
    grid = paper_order_grid(32)
    assert grid.min() == 42.0 and grid.max() == 2048.0 and 64.0 in grid and 73.9 in grid


def test_markdown_table(figure: tuple[dict[str, object], Path]) -> None:
    data, out = figure
    md = group_privacy_markdown(data)
    assert md == (out / "group_privacy.md").read_text()
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(lines) == 1 + 7
    assert "2100" in md and "11400" in md and "2.85" in md
    assert "*" in md  # invalid-order bounds are marked
