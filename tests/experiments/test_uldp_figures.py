"""The ULDP-FL figure runners (``fedprivacy reproduce uldp-fig4`` ... ``uldp-fig9``), tiny."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.errors import ParameterError
from fedprivacy.experiments import uldp_figures
from fedprivacy.experiments.catalogue import program_experiments
from fedprivacy.experiments.uldp_figure_specs import FIGURES, Curve, FigureSpec
from fedprivacy.uldp.config import DEFAULT_HYPER

DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
