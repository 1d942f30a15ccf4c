"""One-run ε lower bounds from f-DP (Mahloujifar, Melis & Chaudhuri 2024).

Same experiment as ``topicaudit.bounds.one_run.eps_lb_one_run`` (Steinke, Nasr &
Jagielski 2023): m canaries, each included in ONE training independently
with probability ½; from the release, guess "in" for the k+ highest scores
and "out" for the k− lowest (r = k+ + k− guesses, v correct). What differs
is the analysis: instead of (ε, δ) it assumes a whole trade-off curve f
and bounds P[V ≥ v] for every f-DP mechanism by a short recursion (the
paper's Algorithm; derivation in docs/one_run_bounds.md). Two families:

* ``"pure"``: f = f_{ε,δ}, the trade-off curve of (ε, δ)-DP itself. Valid for
  ANY (ε, δ)-DP mechanism: a refuted f_{ε,δ} is a refuted (ε, δ) claim.
* ``"gdp"``: f = G_μ (μ-GDP), reported as ε = ``gdp_epsilon(μ_LB, δ)``. Valid
  only for mechanisms whose trade-off curve is Gaussian (or dominated by the
  G_μ that their (ε, δ) claim corresponds to), e.g. the Gaussian mechanism
  or DP-SGD/DP-SVI accounted as such; for randomised response or Laplace it
  overstates the leak and can flag a correct mechanism. At δ = 0 it proves
  nothing about ε (no μ-GDP mechanism is (ε, 0)-DP), so its ε is 0 there.

``"curve"`` (``eps_lb_profile_one_run``): the claimed mechanism's own
trade-off curve, given by the (ε, δ) pairs it satisfies.
"""
from __future__ import annotations

import math

import numpy as np

from topicaudit.bounds.epsilon import EpsilonBound, Method, check_level, gdp_epsilon
from topicaudit.bounds.guesses import one_run_details, one_run_guesses
from topicaudit.jit import njit

FAMILIES = ("pure", "gdp")
_FAMILY_CODE = {"pure": 0, "gdp": 1}
_SQRT2 = math.sqrt(2.0)
_PARAM_TOL = 1e-7  # absolute precision of the bisected ε (pure) or μ (gdp)


# --------------------------------------------------------------------------
# The recursion (compiled: it is sequential in the number of correct guesses)
# --------------------------------------------------------------------------


@njit(cache=True)
def _log_ndtr(z):
    """log Φ(z), accurate in both tails."""
    if z >= 0.0:
        return math.log1p(-0.5 * math.erfc(z / _SQRT2))
    if z > -37.0:
        return math.log(0.5 * math.erfc(-z / _SQRT2))
    # Asymptotic series: Φ(z) ≈ φ(z)/|z|·(1 − 1/z² + 3/z⁴).
    z2 = z * z
    return -0.5 * z2 - math.log(-z) - 0.5 * math.log(2.0 * math.pi) + math.log1p(-1.0 / z2 + 3.0 / (z2 * z2))


@njit(cache=True)
def _ndtri(y, z):
    """Φ⁻¹(y) for 0 < y < 1 by Newton on log Φ, started at ``z`` (a warm start; NaN for none).

    log Φ is concave and increasing, so Newton from any start lands left of
    the root and then climbs to it monotonically; from a nearby warm start
    it takes one or two steps.
    """
    if not math.isfinite(z):  # Abramowitz & Stegun 26.2.23 (|error| < 4.5e-4) as the start
        p = y if y < 0.5 else 1.0 - y
        t = math.sqrt(-2.0 * math.log(p))
        z = t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (
            1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t
        )
        z = -z if y < 0.5 else z
    target = math.log(y)
    for _ in range(100):
        lp = _log_ndtr(z)
        # φ(z)/Φ(z) in logs, so deep-tail steps neither overflow nor vanish.
        step = (lp - target) * math.exp(lp + 0.5 * z * z + 0.5 * math.log(2.0 * math.pi))
        z -= step
        if abs(step) <= 1e-14 * (1.0 + abs(z)):
            break
    return z


@njit(cache=True)
def _excess_mass(m, k, c, tau, family, param, delta):
    """Smallest total probability mass (minus 1) of a correct-guess distribution
    that puts ≥ tau on {V ≥ c} and meets every f-DP constraint; > 0 means "impossible".

    r_i = Σ_{j≥i} j·p_j/m, h_i = Σ_{j≥i} (k − j)·p_j/m, constraints
    r_i ≤ f̄(h_{i−1}) with f̄(x) = 1 − f(x). Mass τ sits at j = c; walking down,
    each p_i is the least that meets the constraint above it (the paper's
    algorithm). Total mass = (r_0 + h_0)·m/k. Returns early once it exceeds 1.
    family 0: f_{ε,δ} with param = ε; family 1: G_μ with param = μ.
    """
    cap = k / m
    r = tau * c / m
    h = tau * (k - c) / m
    z = math.nan
    e_minus = math.exp(-param) if family == 0 else 0.0
    e_plus = math.exp(param) if family == 0 else 0.0
    for i in range(c - 1, -1, -1):
        # f̄⁻¹(r): the least h_i the constraint r_{i+1} ≤ f̄(h_i) allows.
        if family == 0:
            need = max(0.0, (r - delta) * e_minus, 1.0 - delta - e_plus * (1.0 - r))
        elif r >= 1.0:
            need = 1.0
        elif r <= 0.0:
            need = 0.0
        else:
            z = _ndtri(r, z)
            need = 0.5 * math.erfc(-(z - param) / _SQRT2)
        if need <= h:
            break  # nothing changes from here down: r and h stay put
        r += i / (k - i) * (need - h)
        h = need
        if r + h > cap:
            break
    return (r + h) / cap - 1.0


@njit(cache=True)
def _excess_mass_profile(m, k, c, tau, epsilons, deltas, scale):
    """``_excess_mass`` for a curve given as the (ε_i, δ_i) pairs it satisfies, every ε_i multiplied by scale.

    f̄ = min_i f̄_{ε_i, δ_i}, so f̄⁻¹(r) is the largest of the pairs' inverses.
    A finite set of the pairs a mechanism satisfies bounds its curve from the
    safe side: fewer constraints only make an outcome easier to explain.
    """
    cap = k / m
    r = tau * c / m
    h = tau * (k - c) / m
    # e^{±ε_i} once per call, not once per guess: the same numbers, a fraction of the time (a power search calls
    # this tens of thousands of times, over thousands of guesses each).
    n = epsilons.shape[0]
    e_minus, e_plus = np.empty(n), np.empty(n)
    for j in range(n):
        e = scale * epsilons[j]
        e_minus[j], e_plus[j] = math.exp(-e), math.exp(e)
    for i in range(c - 1, -1, -1):
        need = 0.0
        for j in range(n):
            d = deltas[j]
            need = max(need, (r - d) * e_minus[j], 1.0 - d - e_plus[j] * (1.0 - r))
        if need <= h:
            break
        r += i / (k - i) * (need - h)
        h = need
        if r + h > cap:
            break
    return (r + h) / cap - 1.0


def profile_one_run_bound(m, r, v, alpha, epsilons, deltas) -> float:
    """The largest s such that the curve of pairs (s·ε_i, δ_i) is refuted by r guesses with v right; 0 if none.

    s ≥ 1 refutes the claimed curve itself (s = 1). Bisection to 1e-7 keeps the
    lower end refuted, as ``fdp_one_run_bound`` does.
    """
    _check_counts(m, r, v)
    eps = np.ascontiguousarray(epsilons, dtype=np.float64)
    dels = np.ascontiguousarray(deltas, dtype=np.float64)

    def rejects(s):
        return v > 0 and _excess_mass_profile(int(m), int(r), int(v), float(alpha), eps, dels, float(s)) > 0.0

    if not rejects(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while rejects(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:
            return math.inf
    while hi - lo > _PARAM_TOL * max(1.0, lo):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return float(lo)


def eps_lb_profile_one_run(scores, labels, profile, claimed_epsilon, alpha=0.05, *, k_plus=None, k_minus=None,
                           m=None, seed=0) -> EpsilonBound:
    """The claimed mechanism's own trade-off curve tested by the one-run experiment (f-DP analysis).

    profile: (ε_i, δ_i) pairs the claimed mechanism satisfies (its privacy-loss
    profile, e.g. from the PLD accountant). The family scales every ε_i by s;
    the bound is s_LB·ε_claim, so it exceeds the claimed ε exactly when the
    claimed curve itself is refuted. Valid only for a release whose mechanism
    is the claimed one (or dominated by it): a refutation says the mechanism
    is not the one claimed, not that every (ε, δ) reading of it fails.
    Method name "fdp-one-run-curve".
    """
    epsilons, deltas = (np.asarray(x, dtype=np.float64) for x in profile)
    m, results, a = one_run_guesses(scores, labels, 0.0, alpha, k_plus, k_minus, m, seed)
    if isinstance(results, str):
        return EpsilonBound(0.0, Method.FDP_CURVE, 1.0 - alpha, 0.0, {"m": m, "reason": results})
    best, best_i = 0.0, 0
    for i, (_, _, r, v) in enumerate(results):
        if v * 2 <= r:
            continue
        b = profile_one_run_bound(m, r, v, a, epsilons, deltas)
        if b > best:
            best, best_i = b, i
    details = {**one_run_details(m, results, best_i, a, seed), "curve_scale_lb": best,
               "assumes": "the release's mechanism is the claimed one (its privacy-loss profile)",
               "profile_points": int(epsilons.size)}
    return EpsilonBound(best * float(claimed_epsilon), Method.FDP_CURVE, 1.0 - alpha,
                        float(deltas.min()) if deltas.size else 0.0, details)


def _rejects(m, r, v, alpha, family, param, delta) -> bool:
    if v == 0:
        return False
    return _excess_mass(int(m), int(r), int(v), float(alpha), _FAMILY_CODE[family], float(param), float(delta)) > 0.0


def _check_counts(m, r, v) -> None:
    if not (0 <= v <= r <= m and m >= 1):
        raise ValueError(f"need 0 <= v <= r <= m and m >= 1; got m={m}, r={r}, v={v}")


def _check_family(family) -> None:
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")


# --------------------------------------------------------------------------
# Public bounds on counts
# --------------------------------------------------------------------------


def fdp_one_run_bound(m, r, v, alpha, *, family, delta=0.0, lo=0.0) -> float:
    """Largest ε (family "pure", curve f_{ε,δ}) or μ (family "gdp") that the outcome refutes; 0 if none.

    The rejection region is {param < bound} (a larger ε or μ only loosens
    the curve), found by doubling then bisection to 1e-7, keeping the lower
    end rejected so the answer is always a refuted value. ``lo``: a value
    known to be refuted (or 0) to start from, e.g. the best so far in a family.
    """
    _check_counts(m, r, v)
    _check_family(family)
    check_level(alpha, delta)
    if not _rejects(m, r, v, alpha, family, lo, delta):
        if lo <= 0 or not _rejects(m, r, v, alpha, family, 0.0, delta):
            return 0.0
        return _bisect(m, r, v, alpha, family, delta, 0.0, lo)
    hi = max(1.0, 2.0 * lo)
    while _rejects(m, r, v, alpha, family, hi, delta):
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:  # no finite curve survives (cannot happen for 0 < alpha < 1 and finite m)
            return math.inf
    return _bisect(m, r, v, alpha, family, delta, lo, hi)


def _bisect(m, r, v, alpha, family, delta, lo, hi) -> float:
    while hi - lo > _PARAM_TOL * max(1.0, lo):
        mid = 0.5 * (lo + hi)
        if _rejects(m, r, v, alpha, family, mid, delta):
            lo = mid
        else:
            hi = mid
    return float(lo)


def curve_epsilon(family, param, delta) -> float:
    """ε of the refuted curve: ε itself (pure) or the ε of μ-GDP at δ (gdp; 0 at δ = 0)."""
    if family == "pure":
        return param
    return gdp_epsilon(param, delta) if delta > 0 and param > 0 else 0.0


# --------------------------------------------------------------------------
# From scores
# --------------------------------------------------------------------------


def eps_lb_fdp_one_run(
    scores, labels, delta, alpha=0.05, *, family="pure", k_plus=None, k_minus=None, m=None, seed=0
) -> EpsilonBound:
    """ε_LB from one training run by the f-DP analysis (Mahloujifar, Melis & Chaudhuri 2024).

    Same experiment, guesses and Bonferroni-corrected (k+, k−) family as
    ``topicaudit.bounds.one_run.eps_lb_one_run`` (defaults: every scored example is a
    canary, m = n; family ``default_guess_counts(n)``; ties broken with
    ``seed``). Assumes each canary was included independently with
    probability ½ and the scores do not use the labels.

    family="pure": refutes f_{ε,δ}; valid for any (ε, δ)-DP mechanism.
    family="gdp": refutes μ-GDP (details["mu_lb"]) and reports
    ε = gdp_epsilon(μ_LB, δ); valid only if the mechanism's trade-off curve is
    Gaussian (or dominated by the G_μ matching its claim); ε is 0 at δ = 0.
    Method names "fdp-one-run-pure" / "fdp-one-run-gdp".
    """
    _check_family(family)
    method = Method(f"fdp-one-run-{family}")
    m, results, a = one_run_guesses(scores, labels, delta, alpha, k_plus, k_minus, m, seed)
    if isinstance(results, str):
        return EpsilonBound(0.0, method, 1.0 - alpha, delta, {"m": m, "reason": results})
    best, best_i = _best_of_family(m, results, a, family, delta)
    details = {**one_run_details(m, results, best_i, a, seed), "tradeoff_family": family}
    if family == "gdp":
        details["mu_lb"] = best
        details["assumes"] = "the release is mu-GDP (Gaussian trade-off curve)"
        if delta <= 0:
            details["note"] = "no mu-GDP mechanism is (eps, 0)-DP: epsilon is 0 at delta = 0, see mu_lb"
    return EpsilonBound(curve_epsilon(family, best, delta), method, 1.0 - alpha, delta, details)


def _best_of_family(m, results, alpha_each, family, delta) -> tuple[float, int]:
    """Largest bound (ε or μ) over the (k+, k−, r, v) outcomes, and its index.

    Outcomes are visited by decreasing accuracy; one recursion at the best
    value so far tells whether an outcome can beat it, so only improvements
    are bisected.
    """
    order = sorted(range(len(results)), key=lambda i: -(results[i][3] / max(results[i][2], 1)))
    best, best_i = 0.0, order[0] if order else 0
    for i in order:
        _, _, r, v = results[i]
        if v == 0 or v * 2 <= r or not _rejects(m, r, v, alpha_each, family, best, delta):
            continue
        b = fdp_one_run_bound(m, r, v, alpha_each, family=family, delta=delta, lo=best)
        if b > best:
            best, best_i = b, i
    return best, best_i
