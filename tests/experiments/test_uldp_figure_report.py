"""The reports of the ULDP-FL figures (``figure_markdown``), from hand-made results."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedprivacy.experiments.uldp_figure_report import CurveResult, figure_markdown
from fedprivacy.experiments.uldp_figure_specs import FIGURES, FigureSpec


def _one_round(
    spec: FigureSpec, curve: int, metric_name: str, source: str, caveats: tuple[str, ...] = ()
) -> CurveResult:
    """A one-seed, one-round result of curve ``curve`` of ``spec``'s first panel."""
    panel = spec.panels[0]
    row = np.array([[0.5, 0.6]])
    return CurveResult(
        panel=panel,
        curve=panel.curves[curve],
        seeds=[0],
        metric=row,
        loss=row,
        epsilon=np.array([[0.0, 1.5]]),
        seconds=np.array([[0.0, 0.1]]),
        metric_name=metric_name,
        data_source=source,
        caveats=caveats,
    )


def test_synthetic_data_and_reductions_are_stated() -> None:
    spec = FIGURES["uldp-fig8"]
    res = _one_round(spec, 0, "accuracy", "synthetic stand-in (generated)")
    markdown = figure_markdown(spec, [res], [0], Path("x.png"), 1.0)
    assert "SYNTHETIC" in markdown and "Reduced setting" in markdown
    assert "(paper: 100 rounds)" in markdown and "| ULDP-AVG | 0.6 | 0.6 | 1.5 |" in markdown
    overridden = figure_markdown(spec, [res], [0], Path("x.png"), 1.0, rounds_override=1)
    assert "Reduced setting" not in overridden and "1 rounds (override)" in overridden
    assert "Caveat" not in markdown


def test_caveats_are_stated_once_with_their_methods() -> None:
    spec = FIGURES["uldp-fig7"]
    panel = spec.panels[0]

    def result(curve: int, caveats: tuple[str, ...]) -> CurveResult:
        return _one_round(spec, curve, "c_index", "TCGA", caveats)

    labels = [c.label for c in panel.curves]
    group = [i for i, label in enumerate(labels) if label.startswith("ULDP-GROUP")][:2]
    avg = labels.index("ULDP-AVG")
    results = [result(group[0], ("cox",)), result(group[1], ("cox",)), result(avg, ())]
    markdown = figure_markdown(spec, results, [0], Path("x.png"), 1.0)
    assert markdown.count("**Caveat") == 1
    assert f"**Caveat ({labels[group[0]]}, {labels[group[1]]}):** cox." in markdown


def test_sub_sampled_rows_give_the_epsilon_against_the_server() -> None:
    spec = FIGURES["uldp-fig9"]
    panel = next(p for p in spec.panels if any(c.sampling_rate is not None for c in p.curves))
    idx = next(i for i, c in enumerate(panel.curves) if c.sampling_rate is not None)
    res = CurveResult(
        panel=panel,
        curve=panel.curves[idx],
        seeds=[0],
        metric=np.array([[0.5, 0.6]]),
        loss=np.array([[0.5, 0.6]]),
        epsilon=np.array([[0.0, 0.25]]),
        seconds=np.array([[0.0, 0.1]]),
        metric_name="accuracy",
        data_source="MNIST",
        epsilon_server=np.array([3.75]),
    )
    markdown = figure_markdown(spec, [res], [0], Path("x.png"), 1.0)
    assert "epsilon against the server |" in markdown and "| 0.25 |  | 0.1 | 3.75 |" in markdown
    assert "chooses and knows the user sample" in markdown
    header = next(line for line in markdown.splitlines() if line.startswith("| method |"))
    rule = markdown.splitlines()[markdown.splitlines().index(header) + 1]
    assert header.count("|") == rule.count("|")
