import csv
import json

import numpy as np
import pytest
import torch

from fedprivacy.data.images import load_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.reproduce import experiment_names, load_experiment, run_experiment
from fedprivacy.experiments.training_run import CHECKPOINT, resume_config, run_training
from fedprivacy.fl.training_config import TrainConfig

DIGITS = load_dataset("digits")


def _config(**kw):
    base = dict(users=10, per_round=4, rounds=6, batch_size=16, checkpoint_every=2)
    base.update(kw)
    return TrainConfig(**base)


def _rows(path):
    with open(path) as fh:
        return [
            {k: v for k, v in r.items() if not k.endswith("seconds")} for r in csv.DictReader(fh)
        ]


def test_run_directory_contents(tmp_path):
    result = run_training(_config(scheme="multiround", target_privacy=2), tmp_path, dataset=DIGITS)
    for name in (
        "config.toml",
        CHECKPOINT,
        "metrics.csv",
        "participation.csv",
        "summary.json",
        "summary.md",
        "accuracy.png",
        "participation.png",
    ):
        assert (tmp_path / name).is_file(), name
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["parameters"] > 0
    assert 0 <= summary["test_accuracy"] <= 1
    assert summary["t_weak"] is not None and summary["t_weak"] >= 2  # batches of T = 2
    rows = _rows(tmp_path / "metrics.csv")
    assert len(rows) == 6 and rows[-1]["t_weak_upper"]
    assert result.summary()["rounds"] == 6


def test_resume_continues_bit_for_bit(tmp_path):
    whole = run_training(_config(), tmp_path / "whole", dataset=DIGITS)
    part = tmp_path / "part"
    first = run_training(_config(), part, dataset=DIGITS, stop_after_rounds=3)
    assert first.training.round == 3
    state = torch.load(part / CHECKPOINT, weights_only=True)
    assert state["round"] == 2  # checkpoint_every = 2: the last checkpoint before stopping
    resumed = run_training(_config(), part, resume=True, dataset=DIGITS)
    assert torch.equal(whole.training.global_flat, resumed.training.global_flat)
    assert _rows(tmp_path / "whole" / "metrics.csv") == _rows(part / "metrics.csv")
    assert (tmp_path / "whole" / "participation.csv").read_text() == (
        part / "participation.csv"
    ).read_text()
    finished_rows = _rows(tmp_path / "whole" / "metrics.csv")
    run_training(_config(), tmp_path / "whole", resume=True, dataset=DIGITS)  # no round left
    assert _rows(tmp_path / "whole" / "metrics.csv") == finished_rows


def test_resume_can_extend_rounds_but_not_change_the_run(tmp_path):
    run_training(_config(rounds=4), tmp_path, dataset=DIGITS)
    cfg = resume_config(tmp_path, rounds=6)
    assert cfg.rounds == 6
    run_training(cfg, tmp_path, resume=True, dataset=DIGITS)
    with pytest.raises(ParameterError, match="local_lr"):
        run_training(cfg.with_overrides(local_lr=0.5), tmp_path, resume=True, dataset=DIGITS)
    with pytest.raises(ParameterError, match="resume"):
        run_training(_config(), tmp_path / "empty", resume=True, dataset=DIGITS)


def test_config_toml_round_trip_and_errors(tmp_path):
    cfg = _config(scheme="multiround", target_privacy=2, local_lr_milestones=(3, 5), dropout=0.2)
    path = tmp_path / "c.toml"
    path.write_text(cfg.to_toml())
    assert TrainConfig.from_toml(path).to_dict() == cfg.to_dict()
    path.write_text('dataset = "digits"\nlearning_rate = 0.1\n')
    with pytest.raises(ParameterError, match="unknown key 'learning_rate'"):
        TrainConfig.from_toml(path)
    path.write_text("users = [\n")
    with pytest.raises(ParameterError, match="not valid TOML"):
        TrainConfig.from_toml(path)
    bad = [
        dict(scheme="multiround"),
        dict(per_round=50),
        dict(dataset="imagenet"),
        dict(model="resnet"),
        dict(local_lr=-1.0),
        dict(momentum=1.0),
        dict(dropout=1.5),
        dict(protocol_dropout=0.1),
        dict(partition="shards", users=1),
    ]
    for kw in bad:
        with pytest.raises(ParameterError):
            _config(**kw).validate()


def test_every_bundled_experiment_parses():
    names = experiment_names()
    assert {"table4-mnist-iid", "table4-mnist-noniid", "table3-cifar10-iid"} <= set(names)
    for name in names:
        exp = load_experiment(name)
        assert len(exp.runs) == (2 if exp.kind == "attack" else 6)
        for run in exp.runs:
            run.config.validate()
    t4 = load_experiment("table4-mnist-noniid")
    assert [r.paper_value for r in t4.runs] == [85.79, 94.04, 75.26, 89.88, 92.51, 94.16]
    assert t4.runs[0].config.rounds == 500 and t4.runs[0].config.partition == "shards"


def test_run_experiment_reuses_finished_runs(tmp_path):
    exp_file = tmp_path / "tiny.toml"
    exp_file.write_text(
        'title = "tiny"\n[base]\ndataset = "digits"\nusers = 8\nper_round = 4\nrounds = 3\n'
        'metrics = "bounds"\n[[runs]]\nname = "random"\nscheme = "random"\npaper_value = 50.0\n'
        '[[runs]]\nname = "mr"\nscheme = "multiround"\ntarget_privacy = 2\n'
    )
    exp = load_experiment(str(exp_file))
    rows = run_experiment(exp, tmp_path / "out", seeds=(0, 1))
    assert [r.run for r in rows] == ["random", "mr"]
    assert len(rows[0].accuracies) == 2
    md = (tmp_path / "out" / "tiny" / "comparison.md").read_text()
    assert "50.00 %" in md and "Multi-RoundSecAgg, T=2" in md
    stamp = (tmp_path / "out" / "tiny" / "random-seed0" / "summary.json").stat().st_mtime_ns
    again = run_experiment(exp, tmp_path / "out", seeds=(0, 1))
    assert again[0].accuracies == rows[0].accuracies
    assert (tmp_path / "out" / "tiny" / "random-seed0" / "summary.json").stat().st_mtime_ns == stamp
    assert np.isfinite(rows[1].mean)


def test_run_experiment_overrides_and_refuses_a_finished_run_of_other_settings(tmp_path):
    exp_file = tmp_path / "tiny.toml"
    exp_file.write_text(
        'title = "tiny"\n[base]\ndataset = "digits"\nusers = 8\nper_round = 4\nrounds = 2\n'
        'metrics = "none"\n[[runs]]\nname = "random"\nscheme = "random"\n'
    )
    exp = load_experiment(str(exp_file))
    overrides = {"local_lr": 0.05, "encoding": "float"}
    rows = run_experiment(exp, tmp_path / "out", overrides=overrides)
    stored = TrainConfig.from_toml(tmp_path / "out" / "tiny" / "random-seed0" / "config.toml")
    assert stored.local_lr == 0.05 and stored.encoding == "float"
    assert len(rows[0].accuracies) == 1
    with pytest.raises(ParameterError, match="different configuration.*local_lr"):
        run_experiment(exp, tmp_path / "out", overrides={"local_lr": 0.2, "encoding": "float"})
    with pytest.raises(ParameterError, match="^lr: is now spelled local_lr$"):
        run_experiment(exp, tmp_path / "out", overrides={"lr": 0.2})
    with pytest.raises(ParameterError, match="unknown key"):
        run_experiment(exp, tmp_path / "out", overrides={"learning_rate": 0.2})
