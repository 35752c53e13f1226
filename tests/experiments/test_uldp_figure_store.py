"""The records of ULDP-FL figure curves (``PANEL-SLUG.json``): round trip and reuse keys."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from fedprivacy.experiments.uldp_figure_report import CurveResult
from fedprivacy.experiments.uldp_figure_specs import FIGURES
from fedprivacy.experiments.uldp_figure_store import (
    StoredCurve,
    computed_key,
    key_differences,
    read_curve,
    reusable_curve,
    write_curve,
)
from fedprivacy.uldp.hyper_defaults import DEFAULT_HYPER


def _result() -> CurveResult:
    """A two-seed, two-round curve with every optional field set and nan / inf values."""
    panel = FIGURES["uldp-fig9"].panels[0]
    inf, nan = math.inf, math.nan
    return CurveResult(
        panel=panel,
        curve=panel.curves[1],
        seeds=[3, 4],
        metric=np.array([[0.5, nan, 0.625], [0.5, nan, 0.1 + 0.2]]),
        loss=np.array([[0.7, nan, -inf], [0.7, nan, 1e-300]]),
        epsilon=np.array([[0.0, 1.5, inf], [0.0, 1.5, 2.0]]),
        seconds=np.array([[0.0, 0.125, 0.25], [0.0, 0.5, 1 / 3]]),
        metric_name="accuracy",
        data_source="synthetic stand-in",
        group_size=7,
        caveats=("one", "two"),
        epsilon_at=(100, np.array([4.5, inf])),
        hyper={"global_lr": 10.0, "local_lr": 0.05, "clip": None, "local_epochs": 5},
        extra={"note": "kept", "n": 2},
        epsilon_server=np.array([nan, 0.25]),
    )


def test_a_record_round_trips_exactly_as_standard_json(tmp_path: Path) -> None:
    res = _result()
    computed = computed_key([res.panel.config(res.curve, s, 2, None) for s in res.seeds], 100)
    path = tmp_path / "a-curve.json"
    write_curve(path, StoredCurve(res, computed, 12.5), {"device": "cuda"}, "uldp-fig9")

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not standard JSON")

    data = json.loads(path.read_text(), parse_constant=no_constants)
    assert data["settings"] == {"device": "cuda"} and data["figure"] == "uldp-fig9"
    assert data["label"] == "ULDP-AVG-ws (q=0.1)" and data["rounds"] == res.panel.rounds
    back = read_curve(path)
    assert back.computed == computed and back.wall_seconds == 12.5
    for f in fields(CurveResult):
        mine, theirs = getattr(res, f.name), getattr(back.result, f.name)
        if f.name == "epsilon_at":
            assert mine[0] == theirs[0]
            np.testing.assert_array_equal(mine[1], theirs[1])
        elif isinstance(mine, np.ndarray):
            assert theirs.dtype == np.float64 and theirs.shape == mine.shape
            np.testing.assert_array_equal(mine, theirs)  # nan where nan, bit-equal elsewhere
        else:
            assert mine == theirs, f.name
    assert back.result.to_csv() == res.to_csv()


def test_what_is_computed_decides_reuse(tmp_path: Path) -> None:
    res = _result()
    panel, curve = res.panel, res.curve

    def key(
        rounds: int = 2, seeds: tuple[int, ...] = (3, 4), at: int | None = 100, **kw: Any
    ) -> dict[str, Any]:
        configs = [panel.config(curve, s, rounds, None).with_overrides(**kw) for s in seeds]
        return computed_key(configs, at)

    base = key()
    # the hyper-parameters are resolved: DEFAULT_HYPER's values are part of the key
    avg = DEFAULT_HYPER["creditcard-synthetic"]["avg"]
    assert base["configs"][0]["global_lr"] == avg.global_lr and "device" not in base["configs"][0]
    assert key(device="cuda", max_rows=3, data_dir="/elsewhere") == base  # where, not what
    assert key_differences(base, key(global_lr=avg.global_lr)) == []
    assert key_differences(base, key(global_lr=avg.global_lr / 2)) == ["global_lr"]
    assert key_differences(base, key(eval_every=5)) == ["eval_every"]
    assert key_differences(base, key(rounds=3, at=None)) == ["epsilon_at", "rounds"]
    assert key_differences(base, key(seeds=(3, 5))) == ["seed"]
    assert key_differences(base, key(seeds=(3,))) == ["seeds"]
    path = tmp_path / "a.json"
    assert reusable_curve(path, base) == (None, "")  # no record yet
    write_curve(path, StoredCurve(res, base, 1.0))
    stored, why = reusable_curve(path, key(device="cuda"))
    assert stored is not None and why == "" and stored.result.seeds == [3, 4]
    assert reusable_curve(path, key(rounds=4)) == (None, "computed with a different rounds")
    path.write_text(json.dumps({"format": "something else"}))
    stored, why = reusable_curve(path, base)
    assert stored is None and why.startswith("unreadable (ValueError: not a ")
    path.write_text("[1, 2")
    assert reusable_curve(path, base)[1].startswith("unreadable (JSONDecodeError")
