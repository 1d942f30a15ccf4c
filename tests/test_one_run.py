"""f-DP one-run bounds (Mahloujifar, Melis & Chaudhuri 2024; audit/bounds/fdp.py), the audit ceiling and the
auditor that offers every one-run bound (audit/bounds/one_run.py)."""
import json
import math

import numpy as np
import pytest
from scipy import optimize, special, stats
from scipy.special import logit

from topicaudit.bounds import fdp, one_run
from topicaudit.bounds.epsilon import EpsilonBound, Method, gdp_epsilon
from topicaudit.bounds.fdp import _excess_mass, _ndtri, eps_lb_fdp_one_run, fdp_one_run_bound
from topicaudit.bounds.guesses import default_guess_counts, margin_guess_counts
from topicaudit.bounds.fdp import eps_lb_profile_one_run
from topicaudit.bounds.one_run import OneRunAuditor, eps_lb_one_run, one_run_ceiling, one_run_epsilon
from topicaudit.bounds.verdict import VALID_BOUNDS

ALPHA = 0.05


# ---------------------------------------------------------------- the recursion by hand


def test_inverse_normal_cdf_matches_scipy_in_both_tails():
    ys = np.r_[np.geomspace(1e-300, 0.5, 400), 1 - np.geomspace(1e-12, 0.5, 200)]
    got = np.array([_ndtri(y, math.nan) for y in ys])
    np.testing.assert_allclose(got, special.ndtri(ys), rtol=1e-10, atol=1e-12)
    # A warm start far on either side still converges.
    assert _ndtri(0.3, -30.0) == pytest.approx(special.ndtri(0.3), abs=1e-12)
    assert _ndtri(0.3, 6.0) == pytest.approx(special.ndtri(0.3), abs=1e-12)


@pytest.mark.parametrize("r", [1, 2, 5, 30, 200])
@pytest.mark.parametrize("m_over_r", [1, 3])
def test_pure_bound_with_every_guess_correct_is_logit_alpha_to_the_one_over_r(r, m_over_r):
    # f_{ε,0}: the recursion's mass is τ(1 + e^{-ε})^r, so r correct of r is refuted iff α > q^r,
    # q = e^ε/(1 + e^ε): exactly randomised response's P[all correct], the tightest possible.
    expected = max(logit(ALPHA ** (1 / r)), 0.0)
    got = fdp_one_run_bound(m_over_r * r, r, r, ALPHA, family="pure")
    assert got == pytest.approx(expected, abs=2e-6)
    assert got == pytest.approx(one_run_epsilon(m_over_r * r, r, r, 0.0, ALPHA), abs=2e-6)


def test_gdp_bound_two_canaries_by_hand():
    # m = r = v = 2, τ = α at v = 2; g(x) = Φ(Φ⁻¹(x) − μ) is the inverse blow-up of G_μ.
    # h1 = g(α), r1 = α + h1, h0 = g(r1): μ is refuted iff α + h1 + h0 > 1 (total mass > 1).
    # Two guesses are right together with probability ≥ 1/4 at μ = 0, so only α > 1/4 can refute anything.
    g = lambda x, mu: special.ndtr(special.ndtri(x) - mu)
    alpha = 0.3
    excess = lambda mu: alpha + g(alpha, mu) + g(alpha + g(alpha, mu), mu) - 1
    expected = optimize.brentq(excess, 0.0, 10.0, xtol=1e-12)
    assert fdp_one_run_bound(2, 2, 2, alpha, family="gdp") == pytest.approx(expected, abs=2e-7)
    assert _excess_mass(2, 2, 2, alpha, 1, 1.0, 0.0) == pytest.approx(excess(1.0), abs=1e-12)


def test_one_guess_refutes_nothing():
    for family in ("pure", "gdp"):
        assert fdp_one_run_bound(1, 1, 1, ALPHA, family=family) == 0.0
        assert fdp_one_run_bound(100, 1, 1, ALPHA, family=family) == 0.0
        assert fdp_one_run_bound(100, 50, 0, ALPHA, family=family) == 0.0


def _min_mass_lp(m, k, c, tau, eps, delta):
    """The least total mass of p_0..p_k with P[V ≥ c] ≥ τ under every f_{ε,δ} constraint, as a linear program.

    r_i = Σ_{j≥i} j·p_j/m ≤ f̄(h_{i−1}), h_{i−1} = Σ_{j≥i−1} (k − j)·p_j/m, i = 1..k, and
    f̄(x) = min(1, δ + e^ε·x, 1 − e^{−ε}(1 − δ − x)) is a minimum of lines, so each constraint is linear.
    """
    A, b = [], []
    for i in range(1, k + 1):
        rrow = np.array([j / m if j >= i else 0.0 for j in range(k + 1)])
        hrow = np.array([(k - j) / m if j >= i - 1 else 0.0 for j in range(k + 1)])
        A += [rrow, rrow - math.exp(eps) * hrow, rrow - math.exp(-eps) * hrow]
        b += [1.0, delta, 1 - math.exp(-eps) * (1 - delta)]
    A.append(-np.array([1.0 if j >= c else 0.0 for j in range(k + 1)]))
    b.append(-tau)
    res = optimize.linprog(np.ones(k + 1), A_ub=np.array(A), b_ub=np.array(b), bounds=(0, None), method="highs")
    assert res.status in (0, 2)  # 2: infeasible at any mass
    return res.fun if res.status == 0 else math.inf


@pytest.mark.parametrize("m,k,c", [(6, 6, 5), (10, 8, 7), (12, 12, 9), (20, 10, 10), (30, 20, 16)])
@pytest.mark.parametrize("eps,delta", [(0.3, 0.0), (1.0, 0.0), (1.0, 0.01), (2.0, 0.05)])
def test_pure_recursion_is_the_linear_programs_optimum(m, k, c, eps, delta):
    # The greedy walk down from j = c must find the least mass; compare with an LP solver.
    tau = 0.05
    lp = _min_mass_lp(m, k, c, tau, eps, delta)
    excess = _excess_mass(m, k, c, tau, 0, eps, delta)
    if excess <= 0:  # the recursion ran to the end: its mass is the optimum
        assert excess + 1 == pytest.approx(lp, rel=1e-7, abs=1e-10)
    else:  # stopped early once over 1: the optimum is over 1 as well
        assert lp > 1


# ---------------------------------------------------------------- monotonicity and the ceiling


@pytest.mark.parametrize("family,delta", [("pure", 0.0), ("pure", 1e-5), ("gdp", 0.0)])
def test_more_correct_guesses_prove_more(family, delta):
    m, r = 1000, 400
    bounds = [fdp_one_run_bound(m, r, v, ALPHA, family=family, delta=delta) for v in range(200, r + 1, 10)]
    assert np.all(np.diff(bounds) >= 0)
    assert bounds[0] == 0.0 and bounds[-1] > bounds[-2] > 0


@pytest.mark.parametrize("method", ["one-run", "fdp-one-run-pure", "fdp-one-run-gdp"])
def test_more_canaries_raise_the_ceiling(method):
    ceilings = [one_run_ceiling(m, ALPHA, 1e-6, method) for m in (64, 256, 1000, 4000)]
    assert np.all(np.diff(ceilings) > 0)


def _perfect_outcome(n, rng):
    """Exactly n/2 members, scored above every non-member: every guess of every pair is correct."""
    labels = np.zeros(n, bool)
    labels[rng.permutation(n)[: n // 2]] = True
    return labels + rng.random(n) * 0.5, labels


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_ceiling_is_the_bound_at_the_all_correct_outcome(delta):
    rng = np.random.default_rng(3)
    n = 400
    scores, labels = _perfect_outcome(n, rng)
    bounds = {
        "one-run": eps_lb_one_run(scores, labels, delta, ALPHA),
        "fdp-one-run-pure": eps_lb_fdp_one_run(scores, labels, delta, ALPHA, family="pure"),
        "fdp-one-run-gdp": eps_lb_fdp_one_run(scores, labels, delta, ALPHA, family="gdp"),
    }
    for method, b in bounds.items():
        assert b.details["correct"] == b.details["guesses"] == n  # the (n/2, n/2) pair wins
        assert one_run_ceiling(n, ALPHA, delta, method) == pytest.approx(b.epsilon, rel=1e-9, abs=1e-12)
    # One pre-registered pair: no Bonferroni, so a higher ceiling; still equal to the bound.
    b = eps_lb_fdp_one_run(scores, labels, delta, ALPHA, k_plus=100, k_minus=100)
    assert b.details["family_size"] == 1
    c = one_run_ceiling(n, ALPHA, delta, "fdp-one-run-pure", k_plus=100, k_minus=100)
    assert c == pytest.approx(b.epsilon, rel=1e-9)
    # Hand value at δ = 0: J pairs, r = n all correct ⇒ logit((α/J)^{1/n}).
    J = len(default_guess_counts(n))
    if delta == 0:
        assert one_run_ceiling(n, ALPHA, 0.0, "fdp-one-run-pure") == pytest.approx(
            logit((ALPHA / J) ** (1 / n)), abs=2e-6)
        assert one_run_ceiling(n, ALPHA, 0.0, "fdp-one-run-gdp") == 0.0  # no μ-GDP mechanism is (ε, 0)-DP


def test_margin_family_lets_a_perfect_attack_reach_its_ceiling():
    # Independent coins: #members ~ Bin(n, ½), so the default family's (n/2, n/2) pair makes
    # |#members − n/2| errors even for a perfect attack; the margin pairs sit inside both classes.
    rng = np.random.default_rng(5)
    n = 1000
    pairs = margin_guess_counts(n)
    assert pairs == [(476, 476), (460, 460), (444, 444)]
    kp, km = map(list, zip(*pairs))
    ceiling = one_run_ceiling(n, ALPHA, 0.0, "fdp-one-run-pure", k_plus=kp, k_minus=km)
    assert ceiling == pytest.approx(logit((ALPHA / 3) ** (1 / 952)), abs=2e-6)  # = 5.447
    margin, default = [], []
    for _ in range(5):
        labels = rng.random(n) < 0.5
        scores = labels + 0.5 * rng.random(n)
        margin.append(eps_lb_fdp_one_run(scores, labels, 0.0, ALPHA, family="pure", k_plus=kp, k_minus=km).epsilon)
        default.append(eps_lb_fdp_one_run(scores, labels, 0.0, ALPHA, family="pure").epsilon)
    assert min(margin) > 5.4 and min(margin) > max(default)


def test_ceiling_arguments_are_checked():
    with pytest.raises(ValueError, match="method"):
        one_run_ceiling(100, ALPHA, 0.0, "lira")
    with pytest.raises(ValueError):
        one_run_ceiling(100, 1.5, 0.0, "one-run")
    with pytest.raises(ValueError):
        one_run_ceiling(100, ALPHA, 0.0, "one-run", n=200)


# ---------------------------------------------------------------- against Steinke et al.


@pytest.mark.parametrize("m,r,v", [(1000, 1000, 900), (1000, 100, 95), (1000, 500, 480), (10000, 2000, 1990)])
def test_pure_fdp_bound_is_tighter_than_steinke_when_m_delta_matters(m, r, v):
    # Steinke et al.'s δ term grows as 2mδ; the f-DP analysis uses δ only through f_{ε,δ}.
    delta = 1e-3
    fdp = fdp_one_run_bound(m, r, v, ALPHA, family="pure", delta=delta)
    assert fdp > one_run_epsilon(m, r, v, delta, ALPHA) + 0.05
    # At δ = 0 Steinke et al.'s bound is exact (randomised response attains it), so the f-DP one cannot beat it.
    assert fdp_one_run_bound(m, r, v, ALPHA, family="pure") <= one_run_epsilon(m, r, v, 0.0, ALPHA) + 1e-6


# ---------------------------------------------------------------- validity on real mechanisms


def _rr_outcomes(eps, trials, m, rng):
    """Randomised response per canary: score = the coin, flipped with probability 1/(1 + e^ε)."""
    labels = rng.random((trials, m)) < 0.5
    keep = rng.random((trials, m)) < 1 / (1 + math.exp(-eps))
    # A tie is counted as the worst it allows (hostile pass XIX-x, R1): the released bit, jittered by noise of its own
    # (post-processing, still ε-DP), orders the guesses within each bit as a seeded tie-break did.
    jitter = rng.random((trials, m)) * 1e-3
    return np.where(keep, labels, ~labels).astype(float) + jitter, labels


def test_pure_bound_is_valid_for_randomised_response():
    # ε-DP randomised response makes each guess correct with probability exactly e^ε/(1+e^ε):
    # the worst case of the pure bound. One pre-registered test, so the level is exactly α.
    rng = np.random.default_rng(7)
    eps, m, trials = 1.0, 1000, 400
    scores, labels = _rr_outcomes(eps, trials, m, rng)
    lb = np.array([eps_lb_fdp_one_run(s, l, 0.0, ALPHA, family="pure", k_plus=300, k_minus=300, seed=i).epsilon
                   for i, (s, l) in enumerate(zip(scores, labels))])
    flagged = int((lb > eps).sum())
    assert flagged <= stats.binom.ppf(0.999, trials, ALPHA)
    assert np.median(lb) > 0.5 * eps  # and it is not vacuous
    # 10× the ε of the claim is refuted nearly always.
    scores, labels = _rr_outcomes(3.0, 20, m, rng)
    assert all(eps_lb_fdp_one_run(s, l, 0.0, ALPHA, family="pure").epsilon > 2.0 for s, l in zip(scores, labels))


def test_gdp_bound_is_valid_for_a_gaussian_release():
    # Each canary's score ~ N(μ·[in], 1): exactly μ-GDP per canary.
    rng = np.random.default_rng(8)
    mu, m, trials = 1.0, 1000, 300
    labels = rng.random((trials, m)) < 0.5
    scores = rng.normal(size=(trials, m)) + mu * labels
    mu_lb = np.array([eps_lb_fdp_one_run(s, l, 1e-5, ALPHA, family="gdp", k_plus=100, k_minus=100, seed=i)
                      .details["mu_lb"] for i, (s, l) in enumerate(zip(scores, labels))])
    assert (mu_lb > mu).sum() <= stats.binom.ppf(0.999, trials, ALPHA)
    assert np.median(mu_lb) > 0.3 * mu


# ---------------------------------------------------------------- from scores


def test_scores_api_details_and_edge_cases():
    rng = np.random.default_rng(4)
    n = 1000
    labels = rng.random(n) < 0.5
    scores = rng.normal(size=n) + 2.0 * labels
    b = eps_lb_fdp_one_run(scores, labels, 1e-5, ALPHA, family="gdp")
    assert b.method == "fdp-one-run-gdp" and b.confidence == 1 - ALPHA
    assert b.details["family_size"] == len(default_guess_counts(n))
    assert b.details["alpha_per_test"] == pytest.approx(ALPHA / b.details["family_size"])
    assert b.epsilon == pytest.approx(gdp_epsilon(b.details["mu_lb"], 1e-5))
    kp, km, r, v = b.details["k_plus"], b.details["k_minus"], b.details["guesses"], b.details["correct"]
    assert [kp, km, r, v] in b.details["family"]
    assert b.details["mu_lb"] == pytest.approx(
        fdp_one_run_bound(n, r, v, b.details["alpha_per_test"], family="gdp"), abs=1e-6)
    b0 = eps_lb_fdp_one_run(scores, labels, 0.0, ALPHA, family="gdp")
    assert b0.epsilon == 0.0 and b0.details["mu_lb"] > 0 and "note" in b0.details
    p = eps_lb_fdp_one_run(scores, labels, 1e-5, ALPHA, family="pure")
    assert p.method == "fdp-one-run-pure" and 0 < p.epsilon < b.epsilon  # GDP's assumption buys more
    assert fdp._rejects(n, p.details["guesses"], p.details["correct"], p.details["alpha_per_test"],
                        "pure", 0.99 * p.epsilon, 1e-5)
    # m > n: unscored canaries count as abstentions and the bound can only drop.
    assert eps_lb_fdp_one_run(scores, labels, 1e-5, ALPHA, family="pure", m=5 * n).epsilon <= p.epsilon
    tied = np.zeros(100)
    halves = np.arange(100) < 50
    for family in ("pure", "gdp"):
        assert eps_lb_fdp_one_run(tied, halves, 1e-5, family=family).epsilon == 0.0
        assert eps_lb_fdp_one_run(np.arange(100.0), np.ones(100, bool), 1e-5, family=family).epsilon == 0.0
    with pytest.raises(ValueError, match="family"):
        eps_lb_fdp_one_run(scores, labels, 1e-5, family="laplace")
    with pytest.raises(ValueError):
        eps_lb_fdp_one_run(scores, labels, 1e-5, m=10)
    with pytest.raises(ValueError):
        fdp_one_run_bound(10, 5, 6, ALPHA, family="pure")


# ---------------------------------------------------------------- one auditor, the method names


def _experiment(seed=5, n=400):
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.5
    scores = rng.normal(size=n) + 1.5 * labels
    scores[:3] = np.nan  # NaN counts as the lowest score, for the auditor as for the functions
    return scores, labels


@pytest.mark.parametrize("k_plus,k_minus", [(None, None), ([100, 50], [100, 0])])
def test_the_auditor_gives_every_one_run_bound_exactly(k_plus, k_minus):
    scores, labels = _experiment()
    auditor = OneRunAuditor(scores, labels, m=500, seed=3)
    kw = dict(k_plus=k_plus, k_minus=k_minus, m=500, seed=3)
    for delta in (0.0, 1e-5):
        assert auditor.bound(Method.ONE_RUN, delta, ALPHA, k_plus=k_plus, k_minus=k_minus) == \
            eps_lb_one_run(scores, labels, delta, ALPHA, **kw)
        for family in ("pure", "gdp"):
            assert auditor.bound(f"fdp-one-run-{family}", delta, ALPHA, k_plus=k_plus, k_minus=k_minus) == \
                eps_lb_fdp_one_run(scores, labels, delta, ALPHA, family=family, **kw)
    profile = ([0.5, 1.0, 2.0], [1e-2, 1e-3, 1e-5])
    assert auditor.curve(profile, 1.0, ALPHA, k_plus=k_plus, k_minus=k_minus) == \
        eps_lb_profile_one_run(scores, labels, profile, 1.0, ALPHA, **kw)
    for method in (Method.ONE_RUN, Method.FDP_PURE):
        assert auditor.ceiling(method, 1e-5, ALPHA, k_plus=k_plus, k_minus=k_minus) == \
            one_run_ceiling(500, ALPHA, 1e-5, method, k_plus=k_plus, k_minus=k_minus, n=scores.size)


def test_the_auditor_refuses_a_method_it_has_no_bound_for():
    auditor = OneRunAuditor(*_experiment())
    with pytest.raises(ValueError, match="curve"):
        auditor.bound(Method.FDP_CURVE, 1e-5)
    with pytest.raises(ValueError, match="not an .* bound"):
        auditor.bound(Method.SPLIT, 1e-5)
    with pytest.raises(ValueError):
        auditor.bound("one-run-typo", 1e-5)
    with pytest.raises(ValueError, match="method must be one of"):
        auditor.ceiling(Method.DELTA_TAIL, 1e-5)


def test_method_names_are_the_strings_results_record():
    """results.json and check's keys hold these exact strings: renaming a member must not change them."""
    assert {str(m) for m in Method} == {
        "clopper-pearson-split", "clopper-pearson-bonferroni", "gdp", "one-run", "fdp-one-run-pure",
        "fdp-one-run-gdp", "fdp-one-run-curve", "delta-tail"}
    assert VALID_BOUNDS == ("one-run", "fdp-one-run-pure")
    b = OneRunAuditor(*_experiment()).bound(Method.ONE_RUN, 1e-5)
    recorded = b.to_json()
    assert type(recorded["method"]) is str and recorded["method"] == "one-run"
    as_string = EpsilonBound(b.epsilon, "one-run", b.confidence, b.delta, b.details).to_json()
    assert json.dumps(recorded, indent=2) == json.dumps(as_string, indent=2)
    assert f"natural/lira:{b.method}" == "natural/lira:one-run"


# ---------------------------------------------------------------- cross-check with jax-privacy


def _jax_auditing():
    return pytest.importorskip("jax_privacy.auditing", reason="jax-privacy (test extra) is not installed")


# Shared (m, guesses, correct) triples: small, all-correct, large m. (jax-privacy's own recursion is
# plain Python, about a second per bound for v ~ 1,000, so the list is short.)
TRIPLES = [(1000, 100, 95), (200, 60, 50), (10000, 5000, 4990), (300, 300, 300), (100000, 100000, 95000)]


@pytest.mark.parametrize("m,r,v,delta", [(*t, 1e-6) for t in TRIPLES] + [(*t, 1e-3) for t in TRIPLES[:2]])
def test_gdp_bound_agrees_with_jax_privacy(m, r, v, delta):
    # jax-privacy parametrises the Gaussian curve by (ε, δ) (σ of the Gaussian mechanism), we by μ = 1/σ.
    auditing = _jax_auditing()
    theirs = auditing._epsilon_one_run_fdp(0.0, m, r, v, ALPHA, delta)
    ours = gdp_epsilon(fdp_one_run_bound(m, r, v, ALPHA, family="gdp"), delta)
    assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("m,r,v", TRIPLES[:-1] + [(1000, 1000, 900)])
@pytest.mark.parametrize("delta", [1e-6, 1e-3])
def test_steinke_bound_agrees_with_jax_privacy(m, r, v, delta):
    auditing = _jax_auditing()
    theirs = auditing._epsilon_one_run(0.0, m, r, v, ALPHA, delta)
    assert one_run_epsilon(m, r, v, delta, ALPHA) == pytest.approx(theirs, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("shift,quantile", [(1.0, 0.5), (4.0, 0.99)])
def test_score_arrays_agree_with_jax_privacy(shift, quantile):
    # Same scores, one threshold: jax-privacy guesses "in" above it (k− = 0); so do we with k+ = #above.
    auditing = _jax_auditing()
    rng = np.random.default_rng(int(shift * 100 + quantile * 10))
    out_scores, in_scores = rng.normal(size=1500), rng.normal(size=1000) + shift
    threshold = float(np.quantile(np.r_[in_scores, out_scores], quantile))
    auditor = auditing.CanaryScoreAuditor(in_scores, out_scores)
    explicit = auditing.Explicit(threshold)
    scores, labels = np.r_[in_scores, out_scores], np.r_[np.ones(1000, bool), np.zeros(1500, bool)]
    k = int((scores >= threshold).sum())
    delta = 1e-6
    ours = eps_lb_fdp_one_run(scores, labels, delta, ALPHA, family="gdp", k_plus=k, k_minus=0)
    assert ours.epsilon == pytest.approx(auditor.epsilon_one_run_fdp(ALPHA, delta, threshold_strategy=explicit),
                                         rel=1e-5, abs=1e-5)
    steinke = eps_lb_one_run(scores, labels, delta, ALPHA, k_plus=k, k_minus=0)
    assert steinke.epsilon == pytest.approx(auditor.epsilon_one_run(ALPHA, delta, threshold_strategy=explicit),
                                            rel=1e-5, abs=1e-5)


def _p_value_every_outcome(m, r, v, epsilon, delta):
    """Theorem 3's p-value summed over every outcome, none left out: what ``one_run_p_value`` must equal."""
    q = 1.0 / (1.0 + math.exp(-epsilon))
    p = stats.binom.sf(v - 1, r, q)
    if delta > 0 and v > 0:
        i = np.arange(1, v + 1)
        p += 2.0 * m * delta * (np.cumsum(stats.binom.pmf(v - i, r, q)) / i).max()
    return min(p, 1.0)


@pytest.mark.parametrize("epsilon", [0.0, 0.7, 3.0, 9.0, 14.0, 40.0])
def test_the_outcomes_left_out_are_zero_and_the_p_value_is_the_full_sums(epsilon):
    """The p-value sums only outcomes that are not 0 in float64 (``negligible_outcomes``, a tail bound on each
    side): bit for bit the sum over every outcome, for large and small r and guesses right or not."""
    rng = np.random.default_rng(7)
    for r in (1, 40, 3_000, 20_000, 60_000):
        below, above = one_run.negligible_outcomes(np.array([r]), epsilon)
        q = 1.0 / (1.0 + math.exp(-epsilon))
        assert stats.binom.pmf(below, r, q)[0] == 0.0 or below[0] == 0
        assert above[0] > r or stats.binom.pmf(above, r, q)[0] == 0.0
        for v in {r, max(r - 3, 0), int(r * rng.uniform(0.5, 1.0))}:
            for delta in (1e-5, 0.01):
                assert one_run.one_run_p_value(2 * r, r, v, epsilon, delta) == _p_value_every_outcome(
                    2 * r, r, v, epsilon, delta), (r, v, delta)
