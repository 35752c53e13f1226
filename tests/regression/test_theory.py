import numpy as np
import pytest

from fedprivacy.regression.theory import conditional_covariance, theory_check


def test_closed_forms_against_brute_force_sums():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 4))
    sigma = a.T @ a / 6 + 0.2 * np.eye(4)
    lam, vec = np.linalg.eigh(sigma)
    alpha, steps, s2 = 0.3, 25, 0.7
    cc = conditional_covariance(lam, vec, alpha, steps, s2)
    delta = np.eye(4) - alpha * sigma
    na = sum(alpha**2 * s2 * np.linalg.matrix_power(delta, 2 * s) for s in range(steps))
    assert np.allclose(cc.matrix("na_exact"), na)
    # ANA: T^-2 cov(sum_t theta_t), theta_t = -alpha sum_{s<=t} Delta^{t-s} xi_s
    coef = [
        sum(np.linalg.matrix_power(delta, t - s) for t in range(s, steps + 1))
        for s in range(1, steps + 1)
    ]
    ana = alpha**2 * s2 * sum(c @ c.T for c in coef) / steps**2
    assert np.allclose(cc.matrix("ana_exact"), ana)
    paper_na = alpha * s2 * np.linalg.inv(sigma) @ np.linalg.inv(2 * np.eye(4) - alpha * sigma)
    assert np.allclose(cc.matrix("na_paper"), paper_na)
    assert np.allclose(cc.matrix("ana_paper"), 2 * paper_na / steps)


def test_empirical_conditional_covariance_matches_closed_form():
    check = theory_check(clients=4, n=150, p=6, replications=3000, seed=2, lr=0.25)
    s = check.summary()
    for name in ("na_fgd", "ana_fgd"):
        assert abs(s[name]["z_exact"]) < 4, s[name]
        assert s[name]["frobenius_rel_error_exact"] < 0.15
    # Theorem 2's expression is the stationary covariance: matches at large alpha T
    assert s["na_fgd"]["ratio_empirical_to_paper"] == pytest.approx(1.0, abs=0.1)
    # the paper's Theorem 3 expression is too small (not an upper bound)
    assert s["ana_fgd"]["ratio_empirical_to_paper"] > 2.0
    assert check.clip_fraction < 0.02
