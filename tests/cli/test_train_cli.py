import json

from fedprivacy.cli.main import main


def test_train_json_reports_accuracy_parameters_and_t_weak(capsys, tmp_path):
    code = main(
        [
            "train",
            "-N",
            "10",
            "-K",
            "4",
            "-R",
            "3",
            "--scheme",
            "multiround",
            "-T",
            "2",
            "--json",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataset"] == "digits" and out["model"] == "mlp"
    assert out["parameters"] == 64 * 128 + 128 + 128 * 10 + 10
    assert 0 <= out["test_accuracy"] <= 1
    assert out["t_weak"] >= 2
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "| fairness gap F |" in summary and "F: the fairness gap" in summary  # defined
    assert "C: the average cardinality" in summary


def test_train_from_config_file_with_override_and_resume(capsys, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('users = 8\nper_round = 4\nrounds = 4\nmetrics = "none"\n')
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--rounds", "2", "--out", str(run), "-q"]) == 0
    assert "rounds = 2" in (run / "config.toml").read_text()
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--rounds", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rounds"] == 3
    assert main(["train", "--resume", str(run), "--local-lr", "0.5"]) == 2
    assert "only --rounds may change on resume, not --local-lr" in capsys.readouterr().err


def test_train_invalid_config_is_a_clear_error(capsys, tmp_path):
    assert main(["train", "--scheme", "multiround", "-q"]) == 2
    assert "--target-privacy:" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("userz = 3\n")
    assert main(["train", "--config", str(bad)]) == 2
    assert "unknown key 'userz'" in capsys.readouterr().err
    bad.write_text("lr = 0.1\n")  # an old spelling
    assert main(["train", "--config", str(bad)]) == 2
    assert f"error: {bad}: lr: is now spelled local_lr" in capsys.readouterr().err
    for flag, value in (("--local-lr", "-1"), ("--epochs", "0"), ("--local-lr-decay", "0")):
        assert main(["train", flag, value, "-q"]) == 2
        assert f"error: {flag}: must be" in capsys.readouterr().err  # the flag typed
    assert main(["train", "--dataset", "mnist", "--data-dir", str(tmp_path), "-q"]) == 2
    assert "train-images-idx3-ubyte.gz" in capsys.readouterr().err


def test_reproduce_list_and_print_config(capsys):
    assert main(["reproduce", "list"]) == 0
    assert "table4-mnist-iid" in capsys.readouterr().out
    assert main(["reproduce", "table4-mnist-iid", "--print-config"]) == 0
    assert 'dataset = "mnist"' in capsys.readouterr().out
    assert main(["reproduce", "no-such-table"]) == 2


def test_reproduce_set_overrides_every_run(capsys, tmp_path):
    exp_file = tmp_path / "tiny.toml"
    exp_file.write_text(
        'title = "tiny"\n[base]\ndataset = "digits"\nusers = 8\nper_round = 4\nrounds = 2\n'
        '[[runs]]\nname = "random"\nscheme = "random"\n'
    )
    args = ["reproduce", str(exp_file), "--out", str(tmp_path / "o"), "-q", "--json"]
    settings = ["--set", "metrics=none", "--set", "local_lr=0.05", "--set", "encoding=float"]
    assert main([*args, *settings]) == 0
    capsys.readouterr()
    stored = (tmp_path / "o" / "tiny" / "random-seed0" / "config.toml").read_text()
    assert "\nlocal_lr = 0.05" in stored and 'encoding = "float"' in stored
    assert 'metrics = "none"' in stored
    assert main([*args, "--set", "lr=0.05"]) == 2
    assert "error: lr: is now spelled local_lr" in capsys.readouterr().err
    assert main([*args, "--set", "lr"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main([*args, "--set", "device=tpu"]) == 2
    assert "device" in capsys.readouterr().err


def test_reproduce_runs_program_experiments(capsys, tmp_path):
    assert main(["reproduce", "list"]) == 0
    assert "uldp-fig2" in capsys.readouterr().out
    assert main(["reproduce", "uldp-fig2", "--out", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["experiment"] == "uldp-fig2"
    assert (tmp_path / "uldp-fig2" / "group_privacy.csv").is_file()


def test_reproduce_refuses_options_a_program_ignores(capsys, tmp_path):
    out = str(tmp_path)
    assert main(["reproduce", "uldp-fig2", "--seeds", "0,1", "--out", out]) == 2
    assert "not used by uldp-fig2" in capsys.readouterr().err
    assert main(["reproduce", "uldp-fig6", "--only", "z", "--out", out]) == 2
    assert "panels are a, b, c, d" in capsys.readouterr().err
    assert main(["reproduce", "uldp-fig6", "--set", "sigma=1", "--out", out]) == 2
    assert "cannot be changed in a figure" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before anything ran


def test_reproduce_regression_data_dir(capsys, tmp_path):
    out = str(tmp_path / "out")
    assert main(["reproduce", "regression-theory", "--data-dir", "x", "--out", out]) == 2
    assert "not used by regression-theory" in capsys.readouterr().err
    # regression-real honours it: an empty folder is a data error, not a silent fallback
    code = main(["reproduce", "regression-real", "--data-dir", str(tmp_path), "--out", out])
    assert code == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_options_without_the_option_they_need_name_both(capsys):
    cases = {
        ("--scheme", "random", "-T", "2"): "--target-privacy:",
        ("--fairness",): "--fairness:",
        ("--batch-policy", "round"): "--batch-policy:",
        ("--secagg-degree", "4"): "--secagg-degree:",
        ("--clip", "1"): "--clip:",
        ("--dp", "distributed", "--noise-multiplier", "1"): "--dp:",
    }
    for args, flag in cases.items():
        assert main(["train", *args, "-q"]) == 2, args
        err = capsys.readouterr().err
        assert flag in err and "Traceback" not in err, (args, err)
