import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logit

from topicaudit.bounds.epsilon import (
    EpsilonBound,
    clopper_pearson_upper,
    count_grid,
    eps_lb_bonferroni,
    eps_lb_gdp,
    eps_lb_split,
    epsilon_from_rates,
    gdp_delta,
    gdp_epsilon,
    gdp_mu_for,
    gdp_mu_from_rates,
)
from topicaudit.bounds.guesses import default_guess_counts
from topicaudit.bounds.one_run import eps_lb_one_run, one_run_epsilon, one_run_p_value

ALPHA = 0.05


# ---------------------------------------------------------------- building blocks


@pytest.mark.parametrize("k,n", [(0, 1), (0, 100), (3, 100), (50, 100), (99, 100), (7, 13)])
@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.3])
def test_clopper_pearson_upper_matches_scipy(k, n, alpha):
    # A two-sided exact interval at level 1 - 2α has the one-sided α upper bound as its top.
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - 2 * alpha, method="exact")
    assert clopper_pearson_upper(k, n, alpha) == pytest.approx(ci.high, rel=1e-10)
    assert clopper_pearson_upper(k, n, alpha) == pytest.approx(stats.beta.ppf(1 - alpha, k + 1, n - k), rel=1e-10)


def test_clopper_pearson_upper_edges_and_vectorised():
    assert clopper_pearson_upper(5, 5, 0.05) == 1.0
    assert clopper_pearson_upper(0, 0, 0.05) == 1.0
    assert clopper_pearson_upper(0, 10, 0.05) == pytest.approx(1 - 0.05 ** (1 / 10))  # (1 - p)^n = α
    assert 0 < clopper_pearson_upper(0, 10**6, 1e-6) < 1e-4
    expected = [1 - 0.1 ** 0.25, stats.beta.ppf(0.9, 3, 2), 1]
    np.testing.assert_allclose(clopper_pearson_upper([0, 2, 4], 4, 0.1), expected)
    with pytest.raises(ValueError):
        clopper_pearson_upper(3, 2, 0.05)


def test_epsilon_from_rates_by_hand():
    assert epsilon_from_rates(0.1, 0.2, 0.0) == pytest.approx(math.log(8))  # max(ln .8/.1, ln .9/.2)
    assert epsilon_from_rates(0.2, 0.1, 0.0) == pytest.approx(math.log(8))  # symmetric
    assert epsilon_from_rates(0.1, 0.2, 0.05) == pytest.approx(math.log(7.5))  # max(ln .75/.1, ln .85/.2)
    assert epsilon_from_rates(0.5, 0.5, 0.0) == 0.0
    assert epsilon_from_rates(0.7, 0.6, 0.0) == 0.0  # worse than guessing proves nothing
    assert epsilon_from_rates(0.3, 0.8, 0.25) == 0.0  # numerators 1-δ-FNR < 0 and ln(.45/.8) < 0
    assert epsilon_from_rates(0.0, 0.5, 0.0) == math.inf
    np.testing.assert_allclose(epsilon_from_rates(np.array([0.1, 0.5]), np.array([0.2, 0.5]), 0.0), [math.log(8), 0])


def test_dp_roc_bound_and_epsilon_from_rates_agree():
    from topicaudit.bounds.dp_region import dp_tpr_bound

    fpr = np.linspace(0, 1, 11)
    np.testing.assert_allclose(dp_tpr_bound(fpr, 0.0, 0.0), fpr)  # ε = 0: the diagonal
    np.testing.assert_allclose(dp_tpr_bound(fpr, 0.0, 0.1), np.minimum(fpr + 0.1, 1))  # δ shifts it up
    eps = math.log(2)
    np.testing.assert_allclose(dp_tpr_bound([0.0, 0.1, 0.6, 1.0], eps, 0.0), [0.0, 0.2, 0.8, 1.0])
    assert float(dp_tpr_bound(0.0, eps, 1e-3)) == pytest.approx(1e-3)
    # A test exactly on the curve proves exactly ε (both branches).
    for f in (0.05, 0.2, 0.5, 0.7):
        t = float(dp_tpr_bound(f, 1.3, 1e-3))
        assert epsilon_from_rates(f, 1 - t, 1e-3) == pytest.approx(1.3)


def test_gdp_conversion():
    # δ(ε = 1) of 1-GDP: Φ(-1/2) - e Φ(-3/2).
    assert gdp_delta(1.0, 1.0) == pytest.approx(stats.norm.cdf(-0.5) - math.e * stats.norm.cdf(-1.5), rel=1e-12)
    for mu in (0.3, 1.0, 3.0):
        for delta in (1e-2, 1e-5, 1e-9):
            e = gdp_epsilon(mu, delta)
            assert gdp_delta(e, mu) == pytest.approx(delta, rel=1e-6)
    assert gdp_epsilon(0.0, 1e-5) == 0.0
    assert gdp_epsilon(0.01, 0.5) == 0.0  # δ(0) = 2Φ(μ/2) - 1 < δ
    assert gdp_mu_for(1.0, 1e-5) == pytest.approx(0.268, abs=1e-3)
    assert gdp_epsilon(gdp_mu_for(2.0, 1e-6), 1e-6) == pytest.approx(2.0, rel=1e-8)
    a = stats.norm.cdf(-1.0)
    assert gdp_mu_from_rates(a, a) == pytest.approx(2.0)  # Φ⁻¹(1 - a) - Φ⁻¹(a)
    assert gdp_mu_from_rates(0.6, 0.6) == 0.0


def _p_value_loop(m, r, v, eps, delta):
    """Theorem 3's bound written out term by term."""
    q = math.exp(eps) / (1 + math.exp(eps))
    f = lambda u: sum(math.comb(r, j) * q**j * (1 - q) ** (r - j) for j in range(max(u, 0), r + 1))
    term = max([(f(v - i) - f(v)) / i for i in range(1, v + 1)], default=0.0)
    return min(f(v) + 2 * m * delta * term, 1.0)


@pytest.mark.parametrize("m,r,v,eps,delta", [
    (100, 40, 30, 0.5, 0.0), (100, 40, 30, 0.5, 1e-3), (500, 60, 59, 2.0, 1e-4), (50, 10, 3, 1.0, 0.01),
    (1000, 100, 80, 1.2, 1e-5),
])
def test_one_run_p_value_against_the_theorem_term_by_term(m, r, v, eps, delta):
    expected = _p_value_loop(m, r, v, eps, delta)
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(expected, rel=1e-9, abs=1e-15)



@pytest.mark.parametrize("m,r,v,eps", [(100_000, 50_000, 30_000, 0.3), (100_000, 50_000, 26_000, 0.05),
                                       (100_000, 3_000, 2_990, 4.0)])
def test_one_run_p_value_of_a_large_audit_equals_the_sum_over_every_outcome(m, r, v, eps):
    """The δ term skips outcomes whose probability underflows; the value is the full sum's, to the bit."""
    q = 1.0 / (1.0 + math.exp(-eps))
    i = np.arange(1, v + 1)
    full = stats.binom.sf(v - 1, r, q) + 2 * m * 1e-5 * (np.cumsum(stats.binom.pmf(v - i, r, q)) / i).max()
    assert one_run_p_value(m, r, v, eps, 1e-5) == min(full, 1.0)

@pytest.mark.parametrize("m,r,v,delta", [
    (200, 100, 80, 0.0), (200, 100, 80, 1e-4), (1000, 60, 58, 1e-5), (100, 50, 20, 0.0),
])
def test_one_run_epsilon_against_brute_force_search(m, r, v, delta):
    # Theorem 3's p-value on a fine ε grid from the full binomial pmf; the bound is the last ε with p < α.
    grid = np.arange(0, 8, 1e-3)
    q = 1 / (1 + np.exp(-grid))
    pmf = stats.binom.pmf(np.arange(r + 1)[None, :], r, q[:, None])
    tail = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]  # tail[:, u] = P[Bin >= u]
    term = np.max([(tail[:, v - i] - tail[:, v]) / i for i in range(1, v + 1)], axis=0)
    p = np.minimum(tail[:, v] + 2 * m * delta * term, 1)
    expected = grid[p < ALPHA].max(initial=0.0)
    got = one_run_epsilon(m, r, v, delta, ALPHA)
    assert expected - 1e-9 <= got < expected + 1e-3 + 1e-9
    assert got == 0.0 or one_run_p_value(m, r, v, got, delta) <= ALPHA * (1 + 1e-9)


# ---------------------------------------------------------------- perfect and random attacks


def _balanced(n, rng):
    labels = np.zeros(n, bool)
    labels[rng.permutation(n)[: n // 2]] = True
    return labels


def test_perfect_attack_gives_the_largest_provable_epsilon():
    rng = np.random.default_rng(1)
    n, delta = 200, 0.0
    labels = _balanced(n, rng)
    scores = labels + rng.random(n) * 0.5  # perfectly separated

    # One run, one pre-registered test guessing everything: P[Bin(n, q) = n] = q^n < α  ⇔  q < α^{1/n}.
    b = eps_lb_one_run(scores, labels, delta, ALPHA, k_plus=n // 2, k_minus=n // 2)
    assert b.epsilon == pytest.approx(logit(ALPHA ** (1 / n)), rel=1e-9)  # = 4.193 for n = 200
    assert b.details["correct"] == n
    # The default family pays α/J.
    b = eps_lb_one_run(scores, labels, delta, ALPHA)
    J = len(default_guess_counts(n))
    assert b.details["family_size"] == J
    assert b.epsilon == pytest.approx(logit((ALPHA / J) ** (1 / n)), rel=1e-9)

    # Split: 50 members and 50 non-members evaluate; 0 errors ⇒ each rate ≤ 1 - (α/2)^{1/50}.
    b = eps_lb_split(scores, labels, delta, ALPHA)
    u = 1 - (ALPHA / 2) ** (1 / 50)
    assert (b.details["n_members"], b.details["n_nonmembers"]) == (50, 50)
    assert b.epsilon == pytest.approx(math.log((1 - u) / u), rel=1e-9)

    # Band: 0 errors out of 100 each, Bonferroni over the grid counts below 100.
    b = eps_lb_bonferroni(scores, labels, delta, ALPHA)
    t = int((count_grid(100) < 100).sum())
    assert b.details["grid_tests_fpr"] == b.details["grid_tests_fnr"] == t
    u = 1 - (ALPHA / 2 / t) ** (1 / 100)
    assert b.epsilon == pytest.approx(math.log((1 - u) / u), rel=1e-9)

    # One fixed threshold: plain Clopper–Pearson at α/2.
    b = eps_lb_bonferroni(scores, labels, 1e-3, ALPHA, thresholds=[1.0])
    u = 1 - (ALPHA / 2) ** (1 / 100)
    assert b.epsilon == pytest.approx(math.log((1 - 1e-3 - u) / u), rel=1e-9)


def test_random_attack_proves_about_nothing():
    rng = np.random.default_rng(2)
    n = 4000
    labels = rng.random(n) < 0.5
    scores = rng.normal(size=n)
    for f in (eps_lb_split, eps_lb_bonferroni, eps_lb_one_run):
        assert f(scores, labels, 1e-5, ALPHA).epsilon < 0.1
    assert eps_lb_gdp(scores, labels, 1e-5, ALPHA).details["mu_lb"] < 0.1


def test_edge_cases():
    labels = np.r_[np.ones(50, bool), np.zeros(50, bool)]  # members first: input order must not leak
    tied = np.zeros(100)
    for f in (eps_lb_split, eps_lb_bonferroni, eps_lb_gdp, eps_lb_one_run):
        assert f(tied, labels, 1e-5).epsilon == 0.0
        assert f(np.arange(100.0), np.zeros(100, bool), 1e-5).epsilon == 0.0  # no members
        assert f(np.arange(100.0), np.ones(100, bool), 1e-5).epsilon == 0.0  # no non-members
    # Ties are broken at random, not by position: guessing the "top 50" of tied scores is a coin flip.
    assert eps_lb_one_run(tied, labels, 0.0, k_plus=50, k_minus=50).details["correct"] < 70
    # NaN scores count as the lowest; 0/1 labels are accepted.
    scores = np.r_[np.full(50, 1.0), np.full(50, np.nan)]
    assert eps_lb_one_run(scores, labels.astype(int), 0.0, k_plus=50, k_minus=50).details["correct"] == 100
    with pytest.raises(ValueError):
        eps_lb_one_run(np.arange(10.0), np.arange(10) < 5, 0.0, k_plus=6, k_minus=5)
    with pytest.raises(ValueError):
        eps_lb_split(np.arange(10.0), np.arange(10) < 5, 0.0, alpha=1.5)


def test_to_json_is_plain():
    import json

    b = eps_lb_bonferroni(np.r_[np.ones(20), np.zeros(20)], np.arange(40) < 20, 1e-5)
    assert isinstance(b, EpsilonBound) and b.epsilon > 0.0
    text = json.dumps(b.to_json(), allow_nan=False)
    assert json.loads(text)["method"] == "clopper-pearson-bonferroni"


# ---------------------------------------------------------------- validity and power

REPS = 200


def _mechanism(kind, eps, reps, m, rng, noise_scale=1.0, delta=0.0):
    """Canaries in with probability ½ each; scores from an ε-DP (or (ε, δ)-DP) release per canary."""
    labels = rng.random((reps, m)) < 0.5
    if kind == "rr":  # keep the bit with probability e^ε/(1+e^ε)
        flip = rng.random((reps, m)) < noise_scale / (1 + math.exp(eps))
        return (labels ^ flip).astype(float), labels
    if kind == "laplace":  # y = b + Lap(1/ε), sensitivity 1
        return labels + rng.laplace(scale=noise_scale / eps, size=(reps, m)), labels
    sigma = noise_scale / gdp_mu_for(eps, delta)  # analytic Gaussian mechanism, sensitivity 1
    return labels + rng.normal(scale=sigma, size=(reps, m)), labels


def _flagged(method, scores, labels, claim, delta, **kw):
    return np.array([method(s, l, delta, ALPHA, **kw).epsilon > claim for s, l in zip(scores, labels)])


# Largest count of violations among 200 audits that a method with true level ≤ 5% reaches with prob. ≥ 99.9%.
MAX_FALSE = stats.binom.ppf(0.999, REPS, ALPHA)


@pytest.mark.parametrize("kind,delta,methods", [
    ("rr", 0.0, (eps_lb_split, eps_lb_bonferroni, eps_lb_one_run)),  # tight at its one threshold
    ("laplace", 0.0, (eps_lb_split, eps_lb_bonferroni, eps_lb_one_run)),  # tight along its whole upper tail
    ("gaussian", 1e-5, (eps_lb_split, eps_lb_bonferroni, eps_lb_gdp, eps_lb_one_run)),  # GDP exactly tight
])
def test_correct_mechanism_is_rarely_flagged(kind, delta, methods):
    eps = 1.0
    scores, labels = _mechanism(kind, eps, REPS, 400, np.random.default_rng(10), delta=delta)
    for method in methods:
        assert _flagged(method, scores, labels, eps, delta).sum() <= MAX_FALSE, method.__name__


@pytest.mark.parametrize("kind,delta,methods", [
    ("rr", 0.0, (eps_lb_split, eps_lb_bonferroni, eps_lb_one_run)),
    ("laplace", 0.0, (eps_lb_split, eps_lb_bonferroni, eps_lb_one_run)),
    ("gaussian", 1e-5, (eps_lb_split, eps_lb_bonferroni, eps_lb_gdp, eps_lb_one_run)),
])
def test_tenfold_less_noise_is_detected(kind, delta, methods):
    eps, reps = 1.0, 60
    scores, labels = _mechanism(kind, eps, reps, 400, np.random.default_rng(11), noise_scale=0.1, delta=delta)
    for method in methods:
        assert _flagged(method, scores, labels, eps, delta).mean() >= 0.9, method.__name__


def test_gdp_route_is_invalid_for_pure_dp_mechanisms():
    # Documented limitation: randomised response is ε-DP but not Gaussian-shaped, so the GDP route
    # "proves" more than ε. Only use it when the release is μ-GDP.
    scores, labels = _mechanism("rr", 1.0, 20, 400, np.random.default_rng(12))
    assert _flagged(eps_lb_gdp, scores, labels, 1.0, 1e-5).mean() > 0.5


@pytest.mark.parametrize("rule", ["bonferroni", "split"])
def test_gdp_mu_lower_bound_is_valid_for_a_gaussian_release(rule):
    # Sharper than the ε check at δ = 1e-5: μ_LB itself must rarely exceed the true μ = 1/σ.
    mu, reps = 1.0, 100
    rng = np.random.default_rng(13)
    labels = rng.random((reps, 400)) < 0.5
    scores = labels + rng.normal(scale=1 / mu, size=labels.shape)
    mu_lb = np.array([eps_lb_gdp(s, l, 1e-5, threshold=rule).details["mu_lb"] for s, l in zip(scores, labels)])
    assert (mu_lb > mu).sum() <= stats.binom.ppf(0.999, reps, ALPHA)
    assert np.median(mu_lb) > 0.3  # and it is not vacuous
