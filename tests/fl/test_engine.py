import numpy as np
import pytest
import torch

from fedprivacy.data.images import load_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_spec import LearningRateSchedule
from fedprivacy.fl.training_config import TrainConfig, build_training

DIGITS = load_dataset("digits")


def _config(**kw):
    base = dict(dataset="digits", users=10, per_round=4, rounds=4, metrics="none", batch_size=16)
    base.update(kw)
    return TrainConfig(**base)


def test_plaintext_and_secure_aggregation_give_the_same_model_and_ledger():
    plain = build_training(_config(), DIGITS)
    secure = build_training(_config(secagg=True), DIGITS)
    plain.run(4)
    secure.run(4)
    assert torch.equal(plain.global_flat, secure.global_flat)
    assert np.array_equal(plain.ledger.matrix(), secure.ledger.matrix())
    assert plain.ledger.cardinalities.sum() > 0


def test_secure_path_with_multiround_batches_gives_the_same_model():
    cfg = _config(users=12, per_round=6, scheme="multiround", target_privacy=3, rounds=3)
    plain = build_training(cfg, DIGITS)
    secure = build_training(cfg.with_overrides(secagg=True, secagg_degree=3), DIGITS)
    plain.run(3)
    secure.run(3)
    assert torch.equal(plain.global_flat, secure.global_flat)
    assert np.array_equal(plain.ledger.matrix(), secure.ledger.matrix())


def test_vectorised_engine_matches_the_per_client_loop():
    vec = build_training(_config(rounds=3, trainer="vectorised"), DIGITS)
    loop = build_training(_config(rounds=3, trainer="loop"), DIGITS)
    vec.run(3)
    loop.run(3)
    assert np.array_equal(vec.ledger.matrix(), loop.ledger.matrix())
    torch.testing.assert_close(vec.global_flat, loop.global_flat, rtol=1e-4, atol=1e-5)


def test_same_seed_same_run_and_different_seed_differs():
    a = build_training(_config(), DIGITS)
    b = build_training(_config(), DIGITS)
    c = build_training(_config(seed=1), DIGITS)
    for t in (a, b, c):
        t.run(3)
    assert torch.equal(a.global_flat, b.global_flat)
    assert not torch.equal(a.global_flat, c.global_flat)


def test_training_learns_digits():
    t = build_training(
        _config(users=20, per_round=5, rounds=25, dropout=0.0, eval_every=25), DIGITS
    )
    before = t.evaluate()[0]
    t.run(25)
    after = t.records[-1].get("test_accuracy")
    assert before < 0.3
    assert after > 0.85


def test_skipped_rounds_count_and_leave_the_model_unchanged():
    # partition needs a whole group available: with dropout 0.9 most rounds are skipped
    t = build_training(_config(users=8, scheme="partition", dropout=0.5, rounds=6), DIGITS)
    skipped = 0
    for _ in range(6):
        before = t.global_flat.clone()
        record = t.step()
        if not record.aggregated:
            skipped += 1
            assert not record.selected
            assert torch.equal(before, t.global_flat)
        else:
            assert not torch.equal(before, t.global_flat)
    assert t.ledger.rounds == 6 and skipped > 0


def test_weights_are_proportional_to_data_size():
    t = build_training(_config(partition="dirichlet", beta=0.3), DIGITS)
    sizes = t.partition.sizes()
    np.testing.assert_allclose(t.weights, sizes / sizes.max())
    assert t.weights.max() == 1.0


def test_learning_rate_schedule():
    s = LearningRateSchedule(0.1, 0.4, (400, 800))
    assert s(0) == 0.1 and s(399) == 0.1
    assert s(400) == pytest.approx(0.04) and s(800) == pytest.approx(0.016)


def test_state_dict_round_trip_continues_identically():
    a = build_training(_config(rounds=4), DIGITS)
    a.run(2)
    state = a.state_dict()
    a.run(4)
    b = build_training(_config(rounds=4), DIGITS)
    b.load_state_dict(state)
    b.run(4)
    assert torch.equal(a.global_flat, b.global_flat)
    assert np.array_equal(a.ledger.matrix(), b.ledger.matrix())


def test_local_updates_are_what_the_users_would_send_and_change_nothing():
    training = build_training(_config(), DIGITS)
    training.run(2)
    before = training.global_flat.clone()
    users = np.array([0, 3, 7])
    a = training.local_updates(users, 2, seed=9)
    b = training.local_updates(users, 2, seed=9)
    assert a.shape == (3, before.numel()) and a.dtype == np.float32
    assert np.array_equal(a, b) and np.abs(a).max() > 0
    assert torch.equal(training.global_flat, before) and training.round == 2
    assert not np.array_equal(a, training.local_updates(users, 2, seed=10))


def test_device_must_exist():
    with pytest.raises(ParameterError, match="device"):
        build_training(_config(device="cuda:7" if torch.cuda.is_available() else "cuda"), DIGITS)
    with pytest.raises(ParameterError, match="device"):
        _config(device="tpu").validate()


def test_float_encoding_trains_like_the_fixed_point_path():
    fixed = build_training(_config(), DIGITS)
    exact = build_training(_config(encoding="float"), DIGITS)
    fixed.run(4)
    exact.run(4)
    assert [fixed.ledger.selected(t).tolist() for t in range(4)] == [
        exact.ledger.selected(t).tolist() for t in range(4)
    ]
    gap = (fixed.global_flat - exact.global_flat).abs().max().item()
    assert 0 < gap < 1e-5  # only the encoding's rounding differs


def test_the_progress_line_gives_the_largest_per_user_epsilon_so_far():
    from fedprivacy.dp.per_user import per_user_epsilons_by_round

    config = TrainConfig(
        users=12, per_round=4, rounds=3, dp="central", noise_multiplier=1.5, dropout=0.0
    )
    tr = build_training(config, dataset=DIGITS)
    assert tr.progress_note() == "max per-user epsilon 0"
    shown = []

    def progress(n: int) -> None:
        pass

    progress.status = shown.append  # type: ignore[attr-defined]
    tr.run(3, progress=progress)
    noise = np.array([r.noise_multiplier for r in tr.records])
    eps = per_user_epsilons_by_round(tr.ledger.matrix().astype(bool), noise, 1e-5, "pld")
    assert shown[-1].endswith(f"; max per-user epsilon {eps.max():.3g}")
    assert shown[-1].startswith("T_weak")
    plain = build_training(TrainConfig(users=12, per_round=4, rounds=1), dataset=DIGITS)
    assert plain.progress_note() == ""  # no DP, no epsilon
