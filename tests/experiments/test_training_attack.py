import numpy as np

from fedprivacy.data.images import load_dataset
from fedprivacy.experiments.training_attack import run_training_attack, write_attack_outputs
from fedprivacy.fl.training_config import TrainConfig

DIGITS = load_dataset("digits")


def test_attack_reconstructs_under_random_selection_but_not_under_batches(tmp_path):
    # full-batch local steps with a small learning rate: updates barely change across rounds,
    # the worst case of eq. (33)
    base = TrainConfig(
        users=8,
        per_round=4,
        dropout=0.0,
        batch_size=10_000,
        local_lr=0.01,
        partition="shards",
        metrics="none",
    )
    random = run_training_attack(base, t0=2, window=16, dataset=DIGITS)
    batches = run_training_attack(
        base.with_overrides(scheme="multiround", target_privacy=2), t0=2, window=16, dataset=DIGITS
    )
    assert random.identifiable == 8 and random.mean_error < 0.01
    assert batches.identifiable == 0 and batches.rank <= 4
    assert batches.mean_error > 0.1
    write_attack_outputs([random, batches], tmp_path, {"setting": "test", "paper": {}})
    assert (tmp_path / "fig8_histogram.png").is_file()
    assert "mean error" in (tmp_path / "attack.md").read_text()
    assert np.isfinite(random.errors).all()


def test_attack_resumes_from_its_checkpoint_and_reuses_its_outcome(tmp_path):
    from fedprivacy.experiments.training_run import run_training

    base = TrainConfig(
        users=6, per_round=3, dropout=0.0, local_lr=0.05, metrics="none", checkpoint_every=2
    )
    whole = run_training_attack(base, t0=6, window=8, dataset=DIGITS)
    # an interrupted first call: the training to t0 stopped after 4 of its 6 rounds
    run_dir = tmp_path / "random-seed0"
    run_training(
        base.with_overrides(rounds=6), run_dir / "train", dataset=DIGITS, stop_after_rounds=4
    )
    resumed = run_training_attack(base, t0=6, window=8, dataset=DIGITS, run_dir=run_dir)
    np.testing.assert_allclose(resumed.errors, whole.errors, rtol=1e-9, equal_nan=True)
    assert resumed.rank == whole.rank and resumed.test_accuracy == whole.test_accuracy
    assert (run_dir / "outcome.json").is_file()
    # a finished outcome is reused (no training), a different window is computed afresh
    (run_dir / "train" / "checkpoint.pt").unlink()
    again = run_training_attack(base, t0=6, window=8, dataset=DIGITS, run_dir=run_dir)
    np.testing.assert_array_equal(again.errors, resumed.errors)
    other = run_training_attack(base, t0=6, window=4, dataset=DIGITS, run_dir=run_dir)
    assert other.rounds_observed <= 4
