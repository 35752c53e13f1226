from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import (
    PAPER_DROPOUT_LEVELS,
    AvailabilityModel,
    BernoulliDropout,
    TraceAvailability,
    make_availability,
)


def test_bernoulli_sample_shape_and_dtype() -> None:
    model = BernoulliDropout(50, 0.2)
    out = model.sample(0, np.random.default_rng(0))
    assert isinstance(model, AvailabilityModel)
    assert out.shape == (50,)
    assert out.dtype == np.bool_
    assert model.dropout.shape == (50,)
    assert np.all(model.dropout == 0.2)


def test_bernoulli_seeded_reproducibility() -> None:
    model = BernoulliDropout(1000, 0.3)
    a = [model.sample(r, np.random.default_rng(7)) for r in range(3)]
    b = [model.sample(r, np.random.default_rng(7)) for r in range(3)]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    rng = np.random.default_rng(7)
    assert not np.array_equal(model.sample(0, rng), model.sample(1, rng))


def test_bernoulli_zero_dropout_means_always_available() -> None:
    model = BernoulliDropout(100, 0.0)
    rng = np.random.default_rng(1)
    assert all(model.sample(r, rng).all() for r in range(20))


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_bernoulli_empirical_dropout_rate(p: float) -> None:
    model = BernoulliDropout(2000, p)
    rng = np.random.default_rng(11)
    draws = np.stack([model.sample(r, rng) for r in range(100)])
    rate = 1.0 - draws.mean()
    # 200,000 Bernoulli draws: standard error below 0.0012.
    assert abs(rate - p) < 0.006


def test_bernoulli_per_user_rates() -> None:
    p = np.repeat([0.0, 0.25, 0.5, 0.75], 250)
    model = BernoulliDropout(1000, p)
    rng = np.random.default_rng(3)
    draws = np.stack([model.sample(r, rng) for r in range(400)])
    per_group = 1.0 - draws.reshape(400, 4, 250).mean(axis=(0, 2))
    np.testing.assert_allclose(per_group, [0.0, 0.25, 0.5, 0.75], atol=0.01)


def test_heterogeneous_draws_from_levels() -> None:
    a = BernoulliDropout.heterogeneous(1000, np.random.default_rng(5))
    b = BernoulliDropout.heterogeneous(1000, np.random.default_rng(5))
    np.testing.assert_array_equal(a.dropout, b.dropout)
    assert set(np.unique(a.dropout).tolist()) == set(PAPER_DROPOUT_LEVELS)
    counts = np.array([np.sum(a.dropout == lv) for lv in PAPER_DROPOUT_LEVELS])
    assert counts.min() > 150  # about 200 each

    c = BernoulliDropout.heterogeneous(10, np.random.default_rng(0), levels=(0.25,))
    assert np.all(c.dropout == 0.25)


@pytest.mark.parametrize("levels", [(), (0.1, 1.0), (-0.1,), ((0.1, 0.2), (0.3, 0.4))])
def test_heterogeneous_rejects_bad_levels(levels: object) -> None:
    with pytest.raises(ParameterError) as info:
        BernoulliDropout.heterogeneous(10, np.random.default_rng(0), levels=levels)  # type: ignore[arg-type]
    assert info.value.name == "levels"


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5, float("nan"), [0.1, 0.2], "x"])
def test_bernoulli_rejects_bad_dropout(dropout: object) -> None:
    with pytest.raises(ParameterError) as info:
        BernoulliDropout(3, dropout)  # type: ignore[arg-type]
    assert info.value.name == "dropout"


def test_bernoulli_rejects_bad_sizes_and_rounds() -> None:
    with pytest.raises(ParameterError) as info:
        BernoulliDropout(0, 0.1)
    assert info.value.name == "num_users"
    with pytest.raises(ParameterError) as info:
        BernoulliDropout(3, 0.1).sample(-1, np.random.default_rng(0))
    assert info.value.name == "round_index"


def test_trace_replays_rows() -> None:
    trace = [[1, 0, 1], [0, 0, 0], [1, 1, 1]]
    model = TraceAvailability(trace)
    assert model.num_users == 3
    assert model.rounds == 3
    rng = np.random.default_rng(0)
    for r, row in enumerate(trace):
        out = model.sample(r, rng)
        assert out.dtype == np.bool_
        assert out.tolist() == [bool(v) for v in row]
    # the returned row is a copy: mutating it does not change the trace
    out = model.sample(0, rng)
    out[:] = False
    assert model.sample(0, rng).tolist() == [True, False, True]


def test_trace_past_end_raises() -> None:
    model = TraceAvailability([[1, 1]])
    with pytest.raises(ParameterError) as info:
        model.sample(1, np.random.default_rng(0))
    assert info.value.name == "round_index"


@pytest.mark.parametrize("trace", [[[0, 2]], [1, 0], [[]]])
def test_trace_rejects_bad_matrix(trace: object) -> None:
    with pytest.raises(ParameterError) as info:
        TraceAvailability(trace)  # type: ignore[arg-type]
    assert info.value.name == "trace"


def test_trace_from_csv_with_and_without_header(tmp_path: Path) -> None:
    with_header = tmp_path / "a.csv"
    with_header.write_text("alice,bob,carol\n1,0,1\n1,1,0\n")
    model = TraceAvailability.from_csv(with_header)
    assert model.user_ids == ["alice", "bob", "carol"]
    assert model.trace.tolist() == [[True, False, True], [True, True, False]]

    bare = tmp_path / "b.csv"
    bare.write_text("0,1\n1,1\n0,0\n")
    model = TraceAvailability.from_csv(bare)
    assert model.user_ids == ["0", "1"]
    assert model.rounds == 3
    assert model.sample(2, np.random.default_rng(0)).tolist() == [False, False]

    bad = tmp_path / "c.csv"
    bad.write_text("1,0,1\n1,2,0\n")  # (two columns with a 2 would be a long-form log)
    with pytest.raises(ParameterError):
        TraceAvailability.from_csv(bad)


def test_make_availability() -> None:
    rng = np.random.default_rng(0)
    het = make_availability(40, "heterogeneous", rng)
    assert isinstance(het, BernoulliDropout)
    assert set(het.dropout.tolist()) <= set(PAPER_DROPOUT_LEVELS)

    for spec in (0.2, "0.2", " 0.2 "):
        model = make_availability(40, spec, rng)
        assert isinstance(model, BernoulliDropout)
        assert model.num_users == 40
        assert np.all(model.dropout == 0.2)


@pytest.mark.parametrize("spec", ["uniform", "", 1.0, "1", -0.5, "nan", True, None])
def test_make_availability_rejects(spec: object) -> None:
    with pytest.raises(ParameterError) as info:
        make_availability(10, spec, np.random.default_rng(0))  # type: ignore[arg-type]
    assert info.value.name == "dropout"
