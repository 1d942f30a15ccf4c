"""topicaudit.targets.learners.poisson_factorization: the geometric mechanism, the samplers, the learners.

* the two-sided geometric noise has the pmf (1−α)/(1+α)·α^|τ| (chi-square),
  and so does its Skellam form with Exp(mean α/(1−α)) rates (Schein Thm 2),
  which is the parametrisation the sampler's λ± use;
* the per-cell augmentation (Bessel, thinning, λ± updates) leaves the exact
  posterior P(y | ỹ, μ, α) ∝ Pois(y; μ)·2Geo(ỹ − y; α) invariant (chi-square
  over thousands of independent single-cell chains);
* PF recovers planted topics; LPPF recovers them from privatised counts;
* guarantees, parameters, the learner contract, the registry.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from planted import assert_recovers, matched_topic_errors
from scipy import stats

from topicaudit.errors import UserError
from topicaudit.targets import build_target
from topicaudit.targets.learners.poisson_factorization import (
    LocallyPrivatePoissonFactorization,
    NaiveLocallyPrivatePoissonFactorization,
    PoissonFactorization,
    _lppf_augment_allocate,
    lppf_samples,
    privatize_counts,
    two_sided_geometric,
)


def _geometric_pmf(tau, alpha):
    return (1 - alpha) / (1 + alpha) * alpha ** np.abs(tau)


def _gof_integer(draws, pmf_on, lo, hi):
    """Chi-square over the cells lo..hi, the tails pooled into the end cells."""
    inner = np.arange(lo + 1, hi)
    obs = np.concatenate([[np.sum(draws <= lo)], [np.sum(draws == t) for t in inner], [np.sum(draws >= hi)]])
    expected = np.concatenate([[pmf_on(np.arange(lo - 4000, lo + 1)).sum()], pmf_on(inner),
                               [pmf_on(np.arange(hi, hi + 4000)).sum()]])
    return stats.chisquare(obs, expected / expected.sum() * draws.size).pvalue


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9])
def test_geometric_noise_has_the_two_sided_geometric_pmf(alpha):
    rng = np.random.default_rng(1)
    n = 200_000
    tau = two_sided_geometric(alpha, n, rng)
    width = int(np.ceil(np.log(5 / n) / np.log(alpha)))  # expected count at ±width about 5
    pvalue = _gof_integer(tau, lambda t: _geometric_pmf(t, alpha), -width, width)
    assert pvalue > 1e-3, pvalue
    # power: the same test rejects α off by 3%
    wrong = two_sided_geometric(alpha * 1.03 if alpha < 0.9 else 0.927, n, rng)
    assert _gof_integer(wrong, lambda t: _geometric_pmf(t, alpha), -width, width) < 1e-6


@pytest.mark.parametrize("alpha", [0.3, 0.8])
def test_skellam_with_exponential_rates_is_the_geometric_noise(alpha):
    """Schein Thm 2 with rates of mean α/(1−α): the prior the sampler gives λ±."""
    rng = np.random.default_rng(2)
    n = 200_000
    lam = rng.exponential(alpha / (1 - alpha), (2, n))
    tau = rng.poisson(lam[0]) - rng.poisson(lam[1])
    width = int(np.ceil(np.log(5 / n) / np.log(alpha)))
    assert _gof_integer(tau, lambda t: _geometric_pmf(t, alpha), -width, width) > 1e-3


def test_privatize_counts_adds_noise_per_document_alpha():
    rng = np.random.default_rng(3)
    Y = sp.csr_matrix(rng.poisson(2.0, (4, 50_000)))
    alphas = np.array([0.05, 0.3, 0.6, 0.9])
    noisy = privatize_counts(Y, alphas, rng)
    tau = noisy - Y.toarray()
    for d, alpha in enumerate(alphas):
        # the variance of 2Geo(α) is 2α/(1−α)²; compare with a 5-sigma band
        var = 2 * alpha / (1 - alpha) ** 2
        assert abs(tau[d].mean()) < 5 * math.sqrt(var / tau.shape[1])
        assert abs(tau[d].var() / var - 1) < 0.05
    with pytest.raises(ValueError):
        privatize_counts(Y, 1.0, rng)


def _exact_posterior(y_tilde, mu, alpha, top):
    y = np.arange(top + 1)
    logp = stats.poisson.logpmf(y, mu) + np.log(_geometric_pmf(y_tilde - y, alpha))
    p = np.exp(logp - logp.max())
    return p / p.sum()


@pytest.mark.parametrize("y_tilde, mu, alpha", [(3, 2.0, 0.5), (-2, 1.5, 0.7), (0, 0.3, 0.9), (12, 8.0, 0.8)])
def test_augmentation_leaves_the_exact_posterior_of_y_invariant(y_tilde, mu, alpha):
    """K = 1, θ = 1, φ_v = μ: ykv[0, v] is the sampled y of cell v, one independent chain per cell."""
    cells = 20_000
    rng = np.random.default_rng(4)
    y_noisy = np.full((1, cells), y_tilde, dtype=np.int64)
    theta = np.ones((1, 1))
    phi = np.full((1, cells), mu)
    scale = alpha / (1 - alpha)
    lam_p = rng.exponential(scale, (1, cells))
    lam_m = rng.exponential(scale, (1, cells))
    rate = np.array([(1 - alpha) / alpha + 1])
    ydk = np.zeros((1, 1), dtype=np.int64)
    ykv = np.zeros((1, cells), dtype=np.int64)
    for _ in range(60):  # burn-in from the λ prior
        _lppf_augment_allocate(rng, y_noisy, rate, theta, phi, lam_p, lam_m, ydk, ykv)
    y = ykv[0].copy()
    top = int(y.max()) + 30
    p = _exact_posterior(y_tilde, mu, alpha, top)
    expected = p * cells
    keep = expected >= 5
    obs = np.append(np.bincount(y, minlength=top + 1)[keep], np.bincount(y, minlength=top + 1)[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] < 5:
        obs, exp = obs[:-1], exp[:-1]
        exp *= obs.sum() / exp.sum()
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    assert ydk[0, 0] == y.sum()


def _planted(seed=0, k=3, V=30, D=300, length=40.0):
    rng = np.random.default_rng(seed)
    block = V // k
    phi = np.full((k, V), 0.1 / (V - block))
    for t in range(k):
        phi[t, t * block:(t + 1) * block] = 0.9 / block
    theta = rng.dirichlet(np.full(k, 0.3), D) * length
    return sp.csr_matrix(rng.poisson(theta @ phi)), phi


def test_pf_recovers_planted_topics():
    X, truth = _planted()
    phi = PoissonFactorization(3, n_iter=300).fit(X, seed=0)
    assert_recovers(phi, truth)


def test_lppf_recovers_planted_topics_from_privatised_counts():
    X, truth = _planted()
    phi = LocallyPrivatePoissonFactorization(3, epsilon=1.0, n_iter=300, n_avg=50).fit(X, seed=0)
    assert np.all(matched_topic_errors(phi, truth) < 0.15), matched_topic_errors(phi, truth)


def test_lppf_beats_naive_at_high_noise():
    X, truth = _planted()
    kwargs = {"epsilon": 0.3, "n_iter": 600, "n_avg": 100}
    ours = LocallyPrivatePoissonFactorization(3, **kwargs).fit(X, seed=1)
    naive = NaiveLocallyPrivatePoissonFactorization(3, **kwargs).fit(X, seed=1)
    assert matched_topic_errors(ours, truth).mean() < matched_topic_errors(naive, truth).mean() - 0.03


def test_sampler_yields_state_and_handles_per_document_alpha():
    rng = np.random.default_rng(0)
    y_noisy = rng.integers(-3, 6, (5, 7))
    seen = 0
    for theta, phi in lppf_samples(y_noisy, np.linspace(0.2, 0.8, 5), 2, rng, 4):
        assert theta.shape == (5, 2) and phi.shape == (2, 7) and np.all(phi >= 0)
        seen += 1
    assert seen == 4
    with pytest.raises(ValueError):
        next(lppf_samples(y_noisy, 1.2, 2, rng, 4))


def test_fits_are_reproducible_by_seed_and_naive_sees_the_same_noise():
    X, _ = _planted(D=40)
    learner = LocallyPrivatePoissonFactorization(3, alpha=0.5, n_iter=20)
    assert np.array_equal(learner.fit(X, 5), learner.fit(X, 5))
    assert not np.array_equal(learner.fit(X, 5), learner.fit(X, 6))
    naive = NaiveLocallyPrivatePoissonFactorization(3, alpha=0.5, n_iter=20)
    from topicaudit.targets.learners.poisson_factorization import _streams
    a = learner._privatize(X, _streams(9)[0])
    b = naive._privatize(X, _streams(9)[0])
    assert np.array_equal(a, b)
    assert np.array_equal(PoissonFactorization(3, n_iter=20).fit(X, 1), PoissonFactorization(3, n_iter=20).fit(X, 1))


def test_guarantee_values():
    g = LocallyPrivatePoissonFactorization(5, alpha=0.5).guarantee()
    assert g.epsilon == pytest.approx(math.log(2)) and g.delta == 0
    assert g.adjacency == "local-word" and g.basis == "theorem"
    assert g.parameters["limited_precision"] == {"N": 1, "epsilon": pytest.approx(math.log(2))}
    # Schein et al.'s parametrisation: ε for L1 distance N, α = exp(−ε/N)
    g = LocallyPrivatePoissonFactorization(5, epsilon=3.0, precision=4).guarantee()
    assert g.parameters["alpha"] == pytest.approx(math.exp(-0.75))
    assert g.epsilon == pytest.approx(0.75)
    assert g.parameters["limited_precision"]["epsilon"] == pytest.approx(3.0)
    assert NaiveLocallyPrivatePoissonFactorization(5, epsilon=1.0).guarantee() == \
        LocallyPrivatePoissonFactorization(5, epsilon=1.0).guarantee()
    assert math.isinf(PoissonFactorization(5).guarantee().epsilon)


@pytest.mark.parametrize("kwargs", [
    {}, {"epsilon": 1.0, "alpha": 0.5}, {"alpha": 1.0}, {"alpha": 0.0}, {"epsilon": -1.0},
    {"epsilon": 1.0, "precision": 0}, {"epsilon": 1.0, "n_iter": 0}, {"epsilon": 1.0, "n_avg": 0},
    {"epsilon": 1.0, "n_iter": 5, "n_avg": 6}, {"epsilon": 1.0, "a0": 0.0},
])
def test_bad_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError):
        LocallyPrivatePoissonFactorization(3, **kwargs)


def test_registry_builds_the_three_learners():
    for name, params in [("pf", {"n_iter": 5}), ("lppf", {"epsilon": 2.0}), ("lppf-naive", {"alpha": 0.3})]:
        target = build_target(name, 4, "all", params)
        assert target.learner.k == 4
    with pytest.raises(UserError, match="exactly one"):
        build_target("lppf", 4, "all", {})
    X, _ = _planted(D=30)
    release = build_target("lppf", 3, "all", {"epsilon": 1.0, "n_iter": 5}).fit(X, 0)
    assert release.phi.shape == (3, 30) and np.array_equal(release.vocabulary, np.arange(30))


def test_negative_or_fractional_counts_are_rejected():
    with pytest.raises(ValueError):
        PoissonFactorization(2, n_iter=2).fit(sp.csr_matrix(np.array([[1.5, 0.0]])), 0)
    with pytest.raises(ValueError):
        LocallyPrivatePoissonFactorization(2, alpha=0.5, n_iter=2).fit(sp.csr_matrix(np.array([[-1.0, 0.0]])), 0)
