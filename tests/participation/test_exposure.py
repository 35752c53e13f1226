"""The one-elimination exposure analysis against the per-user exact-rank reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.exposure import (
    CertificationError,
    analyse_exposure,
    exposure_witness,
)
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.metrics import exposed_users, t_strong


@st.composite
def sparse_logs(draw: st.DrawFn) -> np.ndarray:
    rounds = draw(st.integers(1, 14))
    users = draw(st.integers(1, 14))
    density = draw(st.sampled_from([0.1, 0.25, 0.5]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    p = (rng.random((rounds, users)) < density).astype(np.uint8)
    if draw(st.booleans()):  # batch structure: every column repeated
        p = np.repeat(p, draw(st.integers(1, 3)), axis=1)
    if draw(st.booleans()):  # rounds that differ by one user expose that user
        extra = p[rng.integers(0, rounds)].copy()
        extra[rng.integers(0, extra.size)] ^= 1
        p = np.vstack([p, extra])
    return p


@settings(max_examples=150, deadline=None)
@given(sparse_logs())
def test_matches_per_user_rank(p: np.ndarray) -> None:
    report = analyse_exposure(p)
    assert report.exposed.tolist() == exposed_users(p).tolist()
    assert report.t_strong == t_strong(p)


def test_nontrivial_answers_occur() -> None:
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(60):
        p = (rng.random((8, 10)) < 0.3).astype(np.uint8)
        ref = exposed_users(p)
        assert analyse_exposure(p).exposed.tolist() == ref.tolist()
        seen.add(0 < ref.size < int(p.any(axis=0).sum()))
    assert seen == {True, False}


def test_larger_sparse_log_against_reference() -> None:
    rng = np.random.default_rng(7)
    p = (rng.random((90, 160)) < 0.03).astype(np.uint8)
    ref = exposed_users(p)
    assert ref.size > 0
    assert analyse_exposure(sparse.csr_array(p)).exposed.tolist() == ref.tolist()


def test_duplicates_and_empty() -> None:
    assert analyse_exposure([[0, 0]]).t_strong is None
    assert analyse_exposure([[1, 1], [1, 1]]).exposed.tolist() == []
    report = analyse_exposure([[1, 1, 0], [1, 1, 1]])
    assert report.exposed.tolist() == [2] and report.t_strong == 1 and report.classes == 2


def test_witness_is_exact() -> None:
    p = np.array([[1, 1, 0, 1], [0, 1, 0, 1], [1, 0, 1, 0]])
    z = exposure_witness(p, 0)
    assert z is not None
    combo = np.asarray(z) @ p
    assert np.count_nonzero(combo) == 1 and combo[0] != 0
    assert exposure_witness(np.array([[1, 1]]), 0) is None


def test_audit_fast_path_is_certified() -> None:
    rng = np.random.default_rng(11)
    p = (rng.random((300, 800)) < 0.01).astype(np.uint8)
    p[0, :] = 0
    p[0, 5] = 1  # user 5 alone in round 0: exposed
    res = audit_ledger(ParticipationLedger.from_matrix(p), time_limit=20)
    assert res.fast_t_weak
    assert 5 in res.exposure.exposed.tolist()
    assert (res.t_weak.lower, res.t_weak.upper) == (1, 1)
    combo = np.asarray(res.t_weak.witness) @ p.astype(np.int64)
    assert np.flatnonzero(combo).tolist() == list(res.t_weak.support)


def test_audit_rejects_bad_budget() -> None:
    with pytest.raises(ValueError, match="time_limit"):
        audit_ledger(ParticipationLedger.from_matrix([[1]]), time_limit=0)


def test_too_large_for_the_budget_is_said_not_hung() -> None:
    rng = np.random.default_rng(5)
    p = (rng.random((200, 400)) < 0.02).astype(np.uint8)
    with pytest.raises(CertificationError, match="beyond the time limit"):
        analyse_exposure(p, time_limit=1e-9)


def test_preconditioned_null_vectors() -> None:
    from fedprivacy.participation.modular import full_column_rank, random_null_vectors

    gen = np.random.default_rng(0)
    p = 1048573
    a = sparse.csr_array((gen.random((30, 60)) < 0.2).astype(np.int64))
    x = random_null_vectors(a, p, 2, gen)
    assert x is not None and not np.any((a @ x) % p) and x.any()
    deficient = sparse.csr_array(np.array([[1, 1, 0], [1, 1, 0]]))
    assert random_null_vectors(deficient, p, 1, gen) is None
    assert not full_column_rank(sparse.csr_array(np.array([[1, 1], [1, 1], [0, 0]])), p, gen)
