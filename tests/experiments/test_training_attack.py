import numpy as np

from fedprivacy.data.images import load_dataset
from fedprivacy.experiments.training_attack import run_training_attack, write_attack_outputs
from fedprivacy.experiments.training_config import TrainConfig

DIGITS = load_dataset("digits")


def test_attack_reconstructs_under_random_selection_but_not_under_batches(tmp_path):
    # full-batch local steps with a small learning rate: updates barely change across rounds,
    # the worst case of eq. (33)
    base = TrainConfig(
        users=8,
        per_round=4,
        dropout=0.0,
        batch_size=10_000,
        lr=0.01,
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
