"""What the plots say: titles, epsilon and delta on DP plots, integer ticks, visible markers.

Every figure is captured as it is saved (``Figure.savefig`` wrapped), so the tests read the
titles, tick positions and marker styles that end up in the PNG files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

from fedprivacy.cli.main import main
from fedprivacy.experiments import plots


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Figure]]:
    """Every figure saved while the test runs, in order."""
    saved: list[Figure] = []
    original = Figure.savefig

    def record(self: Figure, *args: object, **kwargs: object) -> None:
        saved.append(self)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Figure, "savefig", record)
    yield saved


def _titles(fig: Figure) -> str:
    sup = fig.get_suptitle()
    return " | ".join([sup, *(ax.get_title() for ax in fig.axes)])


def _axis(fig: Figure, ylabel: str) -> Axes:
    (ax,) = [ax for ax in fig.axes if ax.get_ylabel() == ylabel]
    return ax


def _ticks_are_integers(ticks: np.ndarray) -> bool:
    return bool(np.all(np.isclose(ticks, np.round(ticks))))


def _train(tmp_path: Path, *extra: str) -> list[str]:
    args = ["train", "-N", "10", "-K", "4", "-R", "3", "-q", "--out", str(tmp_path / "run")]
    assert main([*args, *extra]) == 0
    return sorted(p.name for p in (tmp_path / "run").glob("*.png"))


def test_a_dp_training_run_states_epsilon_delta_and_noise_on_every_plot(  # type: ignore[no-untyped-def]
    tmp_path, figures
):
    pngs = _train(tmp_path, "--dp", "central", "--noise-multiplier", "1.2", "--clip", "0.5")
    assert pngs == ["accuracy.png", "participation.png", "privacy.png"]
    accuracy, participation, privacy = figures
    for fig in (accuracy, privacy):
        title = _titles(fig)
        assert "epsilon" in title and "delta 1e-05" in title and "noise multiplier 1.2" in title
    assert "who took part (C, F) and what the server can compute" in participation.get_suptitle()


def test_training_plots_without_dp_are_titled_and_state_no_epsilon(  # type: ignore[no-untyped-def]
    tmp_path, figures
):
    assert _train(tmp_path) == ["accuracy.png", "participation.png"]  # no privacy.png
    accuracy, participation = figures
    assert accuracy.get_suptitle() and participation.get_suptitle()
    assert "epsilon" not in _titles(accuracy)


def test_rounds_and_t_weak_get_integer_ticks(tmp_path, figures):  # type: ignore[no-untyped-def]
    _train(tmp_path, "--scheme", "multiround", "-T", "2")
    _, participation = figures
    t_weak = _axis(participation, "T_weak")
    assert _ticks_are_integers(t_weak.get_yticks())
    assert t_weak.get_ylim()[0] == 0  # from 0, so a constant T_weak still has integer ticks
    for ax in participation.axes:
        assert _ticks_are_integers(ax.get_xticks())  # rounds


def test_fig4_keeps_coinciding_points_distinguishable(tmp_path, figures):  # type: ignore[no-untyped-def]
    same = [(name, 1.0, 2.0, 3.0) for name in ("Random", "Weighted random", "Batch")]
    plots.plot_fig4(same, [(1, 4.0), (2, 3.0)], tmp_path)
    (fig,) = figures
    (ax,) = fig.axes
    marks = [bars.lines[0] for bars in ax.containers if isinstance(bars, ErrorbarContainer)]
    assert len(marks) == 3
    assert len({line.get_marker() for line in marks}) == 3  # a different marker each
    assert all(line.get_markerfacecolor() == "none" for line in marks)  # hollow: nothing hidden
    sizes = [line.get_markersize() for line in marks]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 3  # nested, later on top
    assert ax.get_title()
    assert _ticks_are_integers(ax.get_xticks())


def test_uldp_plot_states_epsilon_and_delta(tmp_path, figures):  # type: ignore[no-untyped-def]
    args = ["uldp", "--dataset", "creditcard-synthetic", "--method", "ULDP-AVG", "-N", "20"]
    args += ["-S", "2", "-R", "2", "-q"]
    args += ["--noise-multiplier", "1.0", "--out", str(tmp_path / "u")]
    assert main(args) == 0
    (fig,) = figures
    title = _titles(fig)
    assert "epsilon" in title and "delta" in title and "noise multiplier 1" in title
    eps_axis = [ax for ax in fig.axes if "epsilon" in ax.get_ylabel()]
    assert eps_axis and _ticks_are_integers(eps_axis[0].get_xticks())
