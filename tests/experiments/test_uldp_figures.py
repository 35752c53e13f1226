"""The ULDP-FL figure runners (``fedprivacy reproduce uldp-fig4`` ... ``uldp-fig9``), tiny."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.errors import ParameterError
from fedprivacy.experiments import uldp_figures
from fedprivacy.experiments.catalogue import program_experiments
from fedprivacy.experiments.uldp_figure_specs import FIGURES, Curve, FigureSpec
from fedprivacy.uldp.hyper_defaults import DEFAULT_HYPER

DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


def _tiny(name: str, users: int, curves: tuple[Curve, ...], panels: int = 2) -> FigureSpec:
    spec = FIGURES[name]
    return replace(
        spec,
        panels=tuple(replace(p, users=users, curves=curves) for p in spec.panels[:panels]),
    )


def test_every_figure_is_registered() -> None:
    programs = program_experiments()
    for name in ("uldp-fig2", *FIGURES):
        assert name in programs
    assert set(FIGURES) == {f"uldp-fig{i}" for i in range(4, 10)}
    # the privacy-utility figures compare the paper's methods
    assert {c.method for c in FIGURES["uldp-fig6"].panels[0].curves} >= {
        "ULDP-AVG",
        "ULDP-AVG-w",
        "ULDP-GROUP-2",
        "ULDP-NAIVE",
    }
    assert [p.silos for p in FIGURES["uldp-fig8"].panels] == [5, 5, 20, 20, 50, 50]


def test_heart_disease_figure_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    curves = (
        Curve("DEFAULT"),
        Curve("ULDP-GROUP-2"),
        Curve("ULDP-AVG-w"),
        Curve("ULDP-SGD-s", 0.5),
    )
    monkeypatch.setitem(uldp_figures.FIGURES, "uldp-fig6", _tiny("uldp-fig6", 12, curves, panels=1))
    out = tmp_path / "uldp-fig6"
    markdown = program_experiments()["uldp-fig6"].run(
        out, {"seeds": [0, 1], "rounds": 1, "data_dir": str(DATA), "quiet": True}
    )
    files = {p.name for p in out.iterdir()}
    assert {"uldp-fig6.png", "uldp-fig6.md", "summary.json"} <= files
    assert {f"{k}-{c.slug}.csv" for k in "a" for c in curves} <= files
    with (out / "a-ULDP-AVG-w.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["round"]) for r in rows] == [0, 1]
    assert rows[0]["epsilon"] == "0" and float(rows[-1]["epsilon"]) > 0
    assert rows[-1]["seeds"] == "0 1" and 0.0 <= float(rows[-1]["accuracy_mean"]) <= 1.0
    summary = json.loads((out / "summary.json").read_text())
    by = {(r["panel"], r["method"]): r for r in summary["results"]}
    assert by[("a", "DEFAULT")]["epsilon"] is None
    # ULDP-GROUP-2 pays group privacy: far more epsilon than ULDP-AVG-w's one Gaussian a round
    assert by[("a", "ULDP-GROUP-2")]["epsilon"] > by[("a", "ULDP-AVG-w")]["epsilon"]
    # sub-sampling at q = 0.5 costs less privacy than q = 1
    assert by[("a", "ULDP-SGD-s")]["epsilon"] < by[("a", "ULDP-AVG-w")]["epsilon"]
    assert "| ULDP-AVG-w |" in markdown and "(a) heart_disease, |U|=12, uniform" in markdown
    assert "1 rounds (override)" in markdown
    assert (out / "uldp-fig6.png").read_bytes()[:4] == b"\x89PNG"
    # 1 round trained for the paper's 50: the epsilon after 50 rounds, from the accountant
    after_50 = PrivacyAccountant().compose_gaussian(5.0, 50).epsilon(1e-5)
    assert by[("a", "ULDP-AVG-w")]["epsilon_at"] == {
        "rounds": 50,
        "epsilon": pytest.approx(after_50, rel=1e-9),
    }
    assert "epsilon after 50 rounds |" in markdown and f"| {after_50:.4g} |" in markdown
    assert by[("a", "DEFAULT")]["epsilon_at"]["epsilon"] is None
    # every row names the hyper-parameters it ran with (the resolved DEFAULT_HYPER values)
    avg = DEFAULT_HYPER["heart_disease"]["avg"]
    assert by[("a", "ULDP-AVG-w")]["hyper"] == {
        "global_lr": avg.global_lr,
        "local_lr": avg.local_lr,
        "clip": avg.clip,
        "local_epochs": avg.local_epochs,
        "batch_size": avg.batch_size,
    }
    assert by[("a", "DEFAULT")]["hyper"]["clip"] is None  # DEFAULT clips nothing
    text = f"eta_g {avg.global_lr:g}, eta_l {avg.local_lr:g}, C {avg.clip:g}, Q {avg.local_epochs}"
    row = next(line for line in markdown.splitlines() if line.startswith("| ULDP-AVG-w |"))
    assert row.endswith(f" {text}, B {avg.batch_size} |")


def test_only_panels_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    curves = (Curve("ULDP-AVG-w"),)
    monkeypatch.setitem(uldp_figures.FIGURES, "uldp-fig6", _tiny("uldp-fig6", 12, curves, panels=2))
    program = program_experiments()["uldp-fig6"]
    seen: list[tuple[int, str]] = []
    real = uldp_figures.run_uldp

    def spy(config, **kwargs):  # type: ignore[no-untyped-def]
        seen.append((config.eval_every, config.distribution))
        return real(config, **kwargs)

    monkeypatch.setattr(uldp_figures, "run_uldp", spy)
    out = tmp_path / "uldp-fig6"
    options = {"rounds": 2, "data_dir": str(DATA), "quiet": True, "only": ["b"]}
    markdown = program.run(out, {**options, "settings": {"eval-every": 2}})
    assert seen == [(2, "zipf")]  # panel b only (zipf), with the setting applied
    assert "(b) heart_disease" in markdown and "(a) heart_disease" not in markdown
    assert {p.name for p in out.glob("*.csv")} == {"b-ULDP-AVG-w.csv"}
    with pytest.raises(ParameterError, match="panels are a, b"):
        program.run(out, {**options, "only": ["z"]})
    with pytest.raises(ParameterError, match="cannot be changed in a figure"):
        program.run(out, {**options, "settings": {"sigma": 1.0}})
    with pytest.raises(ParameterError, match="max_rows"):
        program.run(out, {**options, "settings": {"max_rows": "many"}})
    if not torch.cuda.is_available():
        with pytest.raises(ParameterError, match="sees no CUDA GPU"):
            program.run(out, {**options, "settings": {"device": "cuda"}})


def test_options_a_program_ignores_are_refused() -> None:
    programs = program_experiments()
    fig2 = programs["uldp-fig2"]
    with pytest.raises(ParameterError, match="seeds.*not used by uldp-fig2"):
        fig2.check_options({"seeds": [0, 1], "quiet": True})
    fig2.check_options({"seeds": None, "quiet": True})
    programs["uldp-fig6"].check_options({"seeds": [0], "only": ["a"], "settings": {"x": 1}})
    with pytest.raises(ParameterError, match="t0"):
        programs["uldp-fig6"].check_options({"t0": 3})


def _spy_runs(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[tuple[str, int]]:
    """Record ``(method, seed)`` of every ``run_uldp`` call (or fail on one when ``fail``)."""
    calls: list[tuple[str, int]] = []
    real = uldp_figures.run_uldp

    def spy(config, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((config.method, config.seed))
        if fail:
            raise AssertionError(f"trained {config.method} seed {config.seed} again")
        return real(config, **kwargs)

    monkeypatch.setattr(uldp_figures, "run_uldp", spy)
    return calls


def _tables(markdown: str) -> list[str]:
    """The rows of a report's tables (its numbers, not the seconds it took)."""
    return [r for r in markdown.splitlines() if r.startswith("| ") and not r.startswith("| method")]


def test_only_selects_single_curves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    curves = (Curve("DEFAULT"), Curve("ULDP-AVG-w"), Curve("ULDP-SGD-s", 0.5))
    spec = _tiny("uldp-fig6", 12, curves, panels=2)
    picked = uldp_figures._selected(
        spec, ["b:uldp-avg-w", " a ", "b: ULDP-SGD-s_q_0.5", "a:DEFAULT"]
    )
    assert [(p.key, cs) for p, cs in picked] == [("a", curves), ("b", curves[1:])]
    by_label = uldp_figures._selected(spec, ["a:ULDP-SGD-s (q=0.5)"])
    assert [(p.key, cs) for p, cs in by_label] == [("a", curves[2:])]
    with pytest.raises(ParameterError, match=r"curves are DEFAULT, ULDP-AVG-w, ULDP-SGD-s "):
        uldp_figures._selected(spec, ["a:ULDP-AVG"])
    with pytest.raises(ParameterError, match=r"\(q=0.5\) \[ULDP-SGD-s_q_0.5\]"):
        uldp_figures._selected(spec, ["a:"])
    with pytest.raises(ParameterError, match="unknown panel 'z'.*panels are a, b"):
        uldp_figures._selected(spec, ["a:DEFAULT", "z:DEFAULT"])
    with pytest.raises(ParameterError, match="names no panel"):
        uldp_figures._selected(spec, [" "])
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    monkeypatch.setitem(uldp_figures.FIGURES, "uldp-fig6", spec)
    calls = _spy_runs(monkeypatch)
    out = tmp_path / "uldp-fig6"
    options = {"rounds": 1, "data_dir": str(DATA), "quiet": True, "only": ["b:ULDP-AVG-w"]}
    markdown = program_experiments()["uldp-fig6"].run(out, options)
    assert calls == [("ULDP-AVG-w", 0)]
    assert len(_tables(markdown)) == 1 and _tables(markdown)[0].startswith("| ULDP-AVG-w |")
    assert {p.name for p in out.glob("b-*")} == {"b-ULDP-AVG-w.csv", "b-ULDP-AVG-w.json"}


def test_cli_names_unknown_curves_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedprivacy.cli.main import main

    argv = ["reproduce", "uldp-fig9", "--only", "b:ULDP-AVG-ws_q_0.7", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fedprivacy reproduce: error: ") and "Traceback" not in err
    assert "panel b of uldp-fig9 has no curve 'ULDP-AVG-ws_q_0.7'" in err
    assert "ULDP-AVG-ws (q=0.5) [ULDP-AVG-ws_q_0.5]" in err
    assert not any(tmp_path.rglob("*.json"))


def test_curves_run_apart_are_assembled_without_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    curves = (Curve("ULDP-AVG-w"), Curve("ULDP-SGD-s", 0.5))
    monkeypatch.setitem(uldp_figures.FIGURES, "uldp-fig6", _tiny("uldp-fig6", 12, curves, 1))
    program = program_experiments()["uldp-fig6"]
    out = tmp_path / "uldp-fig6"
    options = {"seeds": [0, 1], "rounds": 1, "data_dir": str(DATA), "quiet": True}
    calls = _spy_runs(monkeypatch)
    parts, rows = [], []
    for curve in curves:  # as separate processes would, one curve each
        parts.append(program.run(out, {**options, "only": [f"a:{curve.slug}"]}))
        rows += json.loads((out / "summary.json").read_text())["results"]
    assert calls == [("ULDP-AVG-w", 0), ("ULDP-AVG-w", 1), ("ULDP-SGD-s", 0), ("ULDP-SGD-s", 1)]
    csvs = {p.name: p.read_text() for p in out.glob("*.csv")}
    calls = _spy_runs(monkeypatch, fail=True)  # a second training would raise
    # on another device and max_rows (where, not what): still reused
    settings = {"device": "cpu", "max_rows": 7}
    markdown = program.run(out, {**options, "quiet": False, "settings": settings})
    assert calls == []
    assert "reused (a-ULDP-SGD-s_q_0.5.json)" in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reused"] == ["a-ULDP-AVG-w", "a-ULDP-SGD-s_q_0.5"]
    assert summary["results"] == rows  # the same numbers, to the last digit
    assert len(_tables(markdown)) == 2
    for part, row in zip(parts, _tables(markdown), strict=True):
        # the same cells (the panel with a sampled curve adds epsilon against the server)
        cells, mine = _tables(part)[0].split(" | "), row.split(" | ")
        assert mine[:7] == cells[:7] and mine[-1] == cells[-1]
    assert "2 of 2 curves reused" in markdown
    assert {p.name: p.read_text() for p in out.glob("*.csv")} == csvs


def test_a_curve_computed_differently_is_trained_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    curves = (Curve("ULDP-AVG-w"),)
    monkeypatch.setitem(uldp_figures.FIGURES, "uldp-fig6", _tiny("uldp-fig6", 12, curves, 1))
    program = program_experiments()["uldp-fig6"]
    out = tmp_path / "uldp-fig6"
    record = out / "a-ULDP-AVG-w.json"
    calls = _spy_runs(monkeypatch)
    base = {"seeds": [0], "rounds": 1, "data_dir": str(DATA)}
    program.run(out, {**base, "quiet": True})
    assert len(calls) == 1 and json.loads(record.read_text())["rounds"] == 1
    changes: list[tuple[dict[str, Any], str]] = [
        ({"rounds": 2}, "rounds"),
        ({"rounds": 2, "seeds": [1]}, "seed"),
        ({"rounds": 2, "seeds": [0, 1]}, "seeds"),
        ({"rounds": 2, "seeds": [0, 1], "settings": {"eval_every": 2}}, "eval_every"),
    ]
    for change, why in changes:
        before = len(calls)
        program.run(out, {**base, **change})
        assert len(calls) - before == len(change.get("seeds", [0]))  # trained again
        assert f"computed with a different {why}" in capsys.readouterr().err
        stored = json.loads(record.read_text())  # and overwritten
        assert stored["rounds"] == 2 and stored["seeds"] == change.get("seeds", [0])
    assert stored["computed"]["configs"][0]["eval_every"] == 2
    record.write_text("{not json")
    program.run(out, {**base, "quiet": True})
    assert json.loads(record.read_text())["rounds"] == 1  # an unreadable record: trained again
