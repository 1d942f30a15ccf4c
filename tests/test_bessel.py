"""topicaudit.targets.learners.bessel: the Bessel sampler against the exact pmf.

Each of the two exact methods (inversion from the mode, mode-centred
rejection) and the automatic choice between them is tested by a chi-square
goodness-of-fit test against the exact pmf over a grid of ν and a, including
the regions where the other method is the one normally used; a test with the
same sample size rejects a 3% error in a, so the grid tests have power.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from topicaudit.targets.learners.bessel import bessel_logpmf, bessel_mode, sample_bessel

NUS = (0.0, 1.0, 3.5, 20.0, 200.0)
AS = (0.01, 0.3, 2.0, 10.0, 60.0, 500.0, 5000.0)
N_DRAWS = 50_000


def _chisquare_pvalue(draws: np.ndarray, nu: float, a: float) -> float:
    """Chi-square GOF p-value; cells with expected count < 5 pooled into the two tails."""
    n = draws.size
    top = int(max(draws.max(), bessel_mode(nu, a))) + 1
    support = np.arange(top + 1)
    expected = np.exp(bessel_logpmf(support, nu, a)) * n
    observed = np.bincount(draws, minlength=top + 1)[:top + 1].astype(float)
    # last cell = everything ≥ top (observed there is 0 by construction of `top`)
    expected[-1] = n - expected[:-1].sum()
    big = np.flatnonzero(expected >= 5)
    if big.size < 2:  # (nearly) degenerate: test P(X = mode) instead
        mode = bessel_mode(nu, a)
        p_mode = float(np.exp(bessel_logpmf(mode, nu, a)))
        return stats.binomtest(int((draws == mode).sum()), n, p_mode).pvalue
    lo, hi = big[0], big[-1]
    obs = np.concatenate([[observed[:lo + 1].sum()], observed[lo + 1:hi], [observed[hi:].sum()]])
    exp = np.concatenate([[expected[:lo + 1].sum()], expected[lo + 1:hi], [expected[hi:].sum()]])
    exp *= n / exp.sum()
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("method", ["auto", "inversion", "rejection"])
def test_sampler_matches_the_exact_pmf_over_a_grid(method):
    rng = np.random.default_rng(12345)
    pvalues = {}
    for nu, a in itertools.product(NUS, AS):
        draws = sample_bessel(nu, a, N_DRAWS, rng, method=method)
        pvalues[(nu, a)] = _chisquare_pvalue(draws, nu, a)
    worst = min(pvalues, key=pvalues.get)
    # 35 tests per method: a per-test level of 1e-4 keeps the family-wise false alarm rate < 0.4%.
    assert pvalues[worst] > 1e-4, (worst, pvalues[worst])
    # Fisher's combination catches a small deviation spread over the whole grid.
    fisher = stats.combine_pvalues(list(pvalues.values()), method="fisher").pvalue
    assert fisher > 1e-3, fisher


@pytest.mark.parametrize("nu, a", [(0.0, 2.0), (1.0, 10.0), (3.5, 60.0), (20.0, 500.0), (0.0, 5000.0)])
def test_the_goodness_of_fit_test_has_power(nu, a):
    """Draws with a 3% error in a are rejected at the sample size the grid uses."""
    rng = np.random.default_rng(7)
    draws = sample_bessel(nu, 1.03 * a, N_DRAWS, rng)
    assert _chisquare_pvalue(draws, nu, a) < 1e-6


def test_mode_is_the_argmax_of_the_pmf():
    for nu, a in itertools.product((0.0, 0.5, 2.0, 7.0, 40.0), (0.1, 1.0, 3.0, 9.5, 33.0, 250.0)):
        support = np.arange(int(a) + 50)
        logp = bessel_logpmf(support, nu, a)
        assert logp[bessel_mode(nu, a)] >= logp.max() - 1e-12, (nu, a)


def test_pmf_sums_to_one_including_extreme_arguments():
    for nu, a in [(0.0, 1e-3), (200.0, 0.01), (3.0, 5.0), (0.0, 1e4), (50.0, 2e3)]:
        support = np.arange(int(a) + 2000)
        assert abs(np.exp(bessel_logpmf(support, nu, a)).sum() - 1) < 1e-9, (nu, a)


def test_degenerate_and_invalid_arguments():
    rng = np.random.default_rng(0)
    assert np.all(sample_bessel(3.0, 0.0, 10, rng) == 0)
    with pytest.raises(ValueError):
        sample_bessel(-0.5, 1.0, 10, rng)
    with pytest.raises(ValueError):
        sample_bessel(1.0, float("nan"), 10, rng)
    with pytest.raises(ValueError):
        sample_bessel(1.0, 1.0, 10, rng, method="magic")


def test_same_generator_state_gives_same_draws():
    a = sample_bessel(2.0, 30.0, 100, np.random.default_rng(3))
    b = sample_bessel(2.0, 30.0, 100, np.random.default_rng(3))
    assert np.array_equal(a, b)
