"""One-run ε lower bounds: one auditor over the scores, Steinke et al.'s bound, the δ-tail test, the ceiling.

The experiment (Steinke, Nasr & Jagielski 2023): m canaries, each included in
ONE training independently with probability ½; from the release, guess "in"
for the k+ highest scores and "out" for the k− lowest
(:mod:`topicaudit.bounds.guesses`). Two analyses of the same guesses:

* Steinke et al.'s (ε, δ) bound, here (``Method.ONE_RUN``);
* the f-DP analysis (Mahloujifar, Melis & Chaudhuri 2024) in
  :mod:`topicaudit.bounds.fdp`: ``Method.FDP_PURE`` (any (ε, δ)-DP mechanism),
  ``Method.FDP_GDP`` (assumes a Gaussian trade-off curve) and
  ``Method.FDP_CURVE`` (the claimed mechanism's own curve).

:class:`OneRunAuditor` holds one set of scores and coins and offers every
method by its :class:`~topicaudit.bounds.epsilon.Method` name, in the style of
jax_privacy's ``CanaryScoreAuditor``. ``one_run_ceiling`` gives the largest ε
any outcome of m canaries could prove with a bound and guess family: what a
CONSISTENT verdict cannot rule out. ``delta_tail_bound`` tests a claim's δ from
counts of released canary words, not from scores.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from topicaudit.bounds.epsilon import EpsilonBound, Method, check_level, prepare_scores
from topicaudit.bounds.fdp import curve_epsilon, eps_lb_fdp_one_run, eps_lb_profile_one_run, fdp_one_run_bound
from topicaudit.bounds.guesses import guess_pairs, one_run_details, one_run_guesses

# The methods whose ceiling ``one_run_ceiling`` computes (the curve test's depends on the claimed curve).
CEILING_METHODS = (Method.ONE_RUN, Method.FDP_PURE, Method.FDP_GDP)


class OneRunAuditor:
    """The scores and coins of one one-run experiment, held once; every one-run bound of them by method name.

    Parameters
    ----------
    scores : array of float, (n,)
        Higher = more likely member; NaN counts as the lowest score.
    labels : array of bool, (n,)
        The coins: True where the canary was included.
    m : int or None
        Canaries randomised (default: every scored one, n).
    seed : int
        Breaks ties among equal scores when guessing (never input order).

    Every bound of one auditor guesses from the same scores with the same
    tie-breaking, so its bounds differ only in their analysis.
    """

    def __init__(self, scores, labels, *, m=None, seed=0):
        self.scores, self.labels = prepare_scores(scores, labels)
        self.m = m
        self.seed = seed

    def bound(self, method, delta, alpha=0.05, *, k_plus=None, k_minus=None) -> EpsilonBound:
        """The ε lower bound of ``method`` (ONE_RUN, FDP_PURE or FDP_GDP) at confidence 1 − α.

        k_plus/k_minus: the guess counts (ints, or equal-length sequences for
        a Bonferroni-corrected family); default ``default_guess_counts(n)``.
        """
        method = Method(method)
        if method is Method.ONE_RUN:
            return eps_lb_one_run(self.scores, self.labels, delta, alpha, k_plus=k_plus, k_minus=k_minus,
                                  m=self.m, seed=self.seed)
        if method in (Method.FDP_PURE, Method.FDP_GDP):
            return eps_lb_fdp_one_run(self.scores, self.labels, delta, alpha, family=method.rsplit("-", 1)[1],
                                      k_plus=k_plus, k_minus=k_minus, m=self.m, seed=self.seed)
        raise ValueError(f"{method} is not an (ε, δ) bound of the one-run experiment; use "
                         f"{', '.join(map(str, CEILING_METHODS))}, or curve() for {Method.FDP_CURVE}")

    def curve(self, profile, claimed_epsilon, alpha=0.05, *, k_plus=None, k_minus=None) -> EpsilonBound:
        """The claimed mechanism's own trade-off curve (its (ε_i, δ_i) profile) tested (``Method.FDP_CURVE``)."""
        return eps_lb_profile_one_run(self.scores, self.labels, profile, claimed_epsilon, alpha, k_plus=k_plus,
                                      k_minus=k_minus, m=self.m, seed=self.seed)

    def ceiling(self, method, delta, alpha=0.05, *, k_plus=None, k_minus=None) -> float:
        """The largest ε ``method`` could prove from these canaries, whatever their scores (``one_run_ceiling``)."""
        n = self.scores.size
        return one_run_ceiling(n if self.m is None else int(self.m), alpha, delta, Method(method),
                               k_plus=k_plus, k_minus=k_minus, n=n)


# --------------------------------------------------------------------------
# Steinke, Nasr & Jagielski (2023)
# --------------------------------------------------------------------------


def one_run_p_value(m, r, v, epsilon, delta):
    """Steinke, Nasr & Jagielski (2023), Theorem 3 / Appendix D: P[≥ v of r guesses correct] under (ε, δ)-DP.

    With q = e^ε/(1 + e^ε) and f(u) = P[Bin(r, q) ≥ u]:
    p = f(v) + 2·m·δ·max_{i=1..v} (f(v − i) − f(v))/i, capped at 1.
    Vectorised over arrays of r and v (m, ε, δ scalars).
    """
    r, v = np.broadcast_arrays(np.asarray(r, np.int64), np.asarray(v, np.int64))
    if np.any((v < 0) | (v > r) | (r > m)):
        raise ValueError("need 0 <= v <= r <= m")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    p = stats.binom.sf(v - 1, r, q)
    if delta > 0:
        # Only outcomes that are not 0 in float64 are summed (``negligible_outcomes``): those above add exact zeros
        # before the first term, those below add zeros after it that, over a larger i, cannot raise the maximum.
        below, above = negligible_outcomes(r, epsilon)
        first = np.maximum(v - above, 1)  # i < first: outcomes v − i ≥ above
        last = v - np.minimum(below, v)   # i > last: outcomes v − i ≤ below
        start, stop = (int(first.min()), int(last.max())) if r.size else (1, 0)
        if r.size * (stop - start + 1) <= ONE_ARRAY_OUTCOMES:
            term = _largest_share(r, v, q, start, stop)
        else:  # each (r, v) over its own outcomes: the guess counts of a large audit lie far apart
            term = np.zeros(r.shape)
            for at in np.ndindex(r.shape):
                term[at] = _largest_share(r[at], v[at], q, int(first[at]), int(last[at]))
        p = p + 2.0 * m * delta * term
    out = np.minimum(p, 1.0)
    return float(out) if out.ndim == 0 else out


# An outcome whose probability is below e^−NEGLIGIBLE_LOG is 0 in float64 (the smallest positive double is about
# e^−744): it adds nothing to a sum of probabilities.
NEGLIGIBLE_LOG = 760.0


def negligible_outcomes(r, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Per r: outcomes (below, above) such that P[Bin(r, q) = j] < e^−760 for every j ≤ below and every
    j ≥ above (q = e^ε/(1 + e^ε)), so that ``one_run_p_value`` sums only the outcomes between them: the others
    are 0 in float64 and change neither a sum nor a maximum. Each side lies t from r·q, t the smaller of two tail
    bounds for a sum of r independent coins: Hoeffding's, P ≤ e^(−2t²/r), and Bernstein's (each coin within 1 of
    its mean), P ≤ e^(−t²/(2(σ² + t/3))) with σ² = r·q·(1 − q), far the tighter near q = 1, where the ceilings of
    large audits lie. A bound over a million canaries then sums thousands of outcomes, not hundreds of thousands,
    and gives the same number."""
    r = np.asarray(r, np.float64)
    q, one_minus_q = float(special.expit(epsilon)), float(special.expit(-epsilon))
    hoeffding = np.sqrt(NEGLIGIBLE_LOG / 2.0 * r)
    third = NEGLIGIBLE_LOG / 3.0  # Bernstein's exponent at t equals the limit: t² − (2L/3)·t − 2L·σ² = 0
    bernstein = third + np.sqrt(third * third + 2.0 * NEGLIGIBLE_LOG * r * q * one_minus_q)
    spread = np.minimum(hoeffding, bernstein)
    return (np.maximum(np.floor(r * q - spread) - 1, 0).astype(np.int64),
            np.minimum(np.ceil(r * q + spread) + 1, r + 1).astype(np.int64))


# How many outcomes ``one_run_p_value`` evaluates in one array for all its (r, v) at once; past it, one array each.
ONE_ARRAY_OUTCOMES = 200_000


def _largest_share(r, v, q: float, first: int, last: int):
    """max over i in [first, last] of P[v − i ≤ Bin(r, q) < v] / i, for scalar or array r and v (0 where v = 0):
    the outcomes v − 1, …, v − first + 1 must be 0 in float64, so that the sum may start at v − first."""
    if last < first:
        return np.zeros(np.shape(r))
    i = np.arange(first, last + 1)
    j = np.asarray(v)[..., None] - i  # outcomes v − first, …, v − last
    pmf = np.where(j >= 0, stats.binom.pmf(np.maximum(j, 0), np.asarray(r)[..., None], q), 0.0)
    term = (np.cumsum(pmf, axis=-1) / i).max(axis=-1)
    return np.where(np.asarray(v) > 0, term, 0.0)


def one_run_epsilon(m, r, v, delta, alpha, iterations=40) -> float:
    """Largest ε (to bisection precision) whose one-run p-value is below α; 0 if none.

    δ = 0: p = P[Bin(r, q) ≥ v] = I_q(v, r − v + 1), so q is the
    Clopper–Pearson lower bound of the guess accuracy and ε = logit(q)
    exactly. δ > 0: bisection below that value (the δ term only adds),
    keeping p(ε_lo) < α throughout, so the answer is a rejected ε even where p
    is not monotone; any rejected ε ≥ the true ε has probability ≤ α, because
    every p(ε') with ε' ≥ ε_true bounds the true tail.
    """
    if v == 0:
        return 0.0
    q0 = float(special.betaincinv(v, r - v + 1, alpha))
    hi = math.log(q0) - math.log1p(-q0) if q0 < 1 else math.inf
    if hi <= 0:
        return 0.0
    if delta <= 0:
        return hi
    lo = 0.0
    if one_run_p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    if math.isinf(hi):
        hi = 1.0
        while one_run_p_value(m, r, v, hi, delta) < alpha:
            lo, hi = hi, 2 * hi
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(m, r, v, mid, delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def eps_lb_one_run(
    scores, labels, delta, alpha=0.05, *, k_plus=None, k_minus=None, m=None, seed=0
) -> EpsilonBound:
    """ε_LB from one training run (Steinke, Nasr & Jagielski 2023, Algorithm 1 + Theorem 3).

    Assumes each of the m canaries (default: every scored example) was
    included independently with probability ½ and the scores are computed
    from the release without the labels. Guess "in" for the k+ highest scores
    and "out" for the k− lowest (ties broken by a seeded random order, never
    by input order); r = k+ + k− guesses, v correct. Theorem 3: for an
    (ε, δ)-DP release, P[V ≥ v] ≤ f(v) + 2mδ·max_{i=1..v}(f(v − i) − f(v))/i
    with f(u) = P[Bin(r, e^ε/(1 + e^ε)) ≥ u]; ε_LB is the largest ε whose
    bound is below α (``one_run_epsilon``).

    k_plus/k_minus: ints (one pre-registered test), or equal-length sequences
    (a family); default ``default_guess_counts(n)``. A family is Bonferroni-
    corrected (each member at α/|family|) and the largest bound is reported —
    the paper's own sweep over k takes the max without correction.
    """
    m, results, a = one_run_guesses(scores, labels, delta, alpha, k_plus, k_minus, m, seed)
    if isinstance(results, str):
        return EpsilonBound(0.0, Method.ONE_RUN, 1.0 - alpha, delta, {"m": m, "reason": results})
    # The δ = 0 bound (closed form) caps the δ > 0 one: bisect only pairs that could win.
    cap = [one_run_epsilon(m, r, v, 0.0, a) if r else 0.0 for _, _, r, v in results]
    best, best_i = 0.0, 0
    for i in np.argsort(cap)[::-1]:
        if cap[i] <= best:
            break
        _, _, r, v = results[i]
        e = one_run_epsilon(m, r, v, delta, a)
        if e > best:
            best, best_i = e, int(i)
    return EpsilonBound(best, Method.ONE_RUN, 1.0 - alpha, delta, one_run_details(m, results, best_i, a, seed))


# A single event of probability δ is what an (ε, δ) claim allows to happen now and then: the δ-tail test
# refutes only on at least two (a subset of the Markov test's rejections, so still valid at α).
DELTA_TAIL_MIN_RELEASES = 2


def delta_tail_bound(released: int, fresh: int, delta: float, alpha: float) -> EpsilonBound:
    """The δ of a claim tested by words that only a canary holds: releases refute it when rare enough.

    Without canary i its words are in no document, so an (ε, δ)-DP step releases
    one with probability 0 without it and ≤ δ with it; each canary trains with
    probability ½, so the count X of canaries with a release has E[X] ≤ fresh·δ/2
    and P[X ≥ x] ≤ fresh·δ/(2x) (Markov), whatever the dependence between them.
    When that is ≤ α and X ≥ ``DELTA_TAIL_MIN_RELEASES`` the claim fails for
    every ε: the bound is ∞. Method "delta-tail".
    """
    p_value = fresh * delta / (2.0 * released) if released else 1.0
    refuted = released >= DELTA_TAIL_MIN_RELEASES and p_value <= alpha
    return EpsilonBound(math.inf if refuted else 0.0, Method.DELTA_TAIL, 1.0 - alpha, delta,
                        {"fresh_canaries": fresh, "released": released, "p_value": min(1.0, p_value)})


# --------------------------------------------------------------------------
# The ceiling
# --------------------------------------------------------------------------


def one_run_ceiling(m, alpha, delta, method, *, k_plus=None, k_minus=None, n=None) -> float:
    """The largest ε that m canaries could ever prove at confidence 1 − α with this bound.

    The bound at the best possible outcome, every guess correct (v = r), over
    the same Bonferroni-corrected guess family the bound uses: ``guess_pairs``
    of n scored canaries (default n = m) and k_plus/k_minus. ``method``: one of
    CEILING_METHODS ("one-run" = Steinke et al.; "fdp-one-run-pure"; "fdp-one-run-gdp",
    0 at δ = 0). A claim above the ceiling cannot be refuted by this audit,
    whatever the attack: CONSISTENT then means "not refuted", not "private".
    """
    check_level(alpha, delta)
    if method not in CEILING_METHODS:
        raise ValueError(f"method must be one of {tuple(map(str, CEILING_METHODS))}; got {method!r}")
    n = m if n is None else int(n)
    if n > m:
        raise ValueError("n (canaries scored) cannot exceed m")
    pairs = guess_pairs(n, k_plus, k_minus)
    if not pairs:
        return 0.0
    a = alpha / len(pairs)
    rs = sorted({kp + km for kp, km in pairs if kp + km > 0}, reverse=True)
    best = 0.0
    for r in rs:
        if method == "one-run":
            # Its δ = 0 value (closed form) caps the δ > 0 one: bisect only where it could win.
            if one_run_epsilon(m, r, r, 0.0, a) <= best:
                continue
            e = one_run_epsilon(m, r, r, delta, a)
        else:
            family = method.rsplit("-", 1)[1]
            e = curve_epsilon(family, fdp_one_run_bound(m, r, r, a, family=family, delta=delta), delta)
        best = max(best, e)
    return float(best)
