"""Empirical lower bounds on ε from membership scores (docs/algorithms.md#empirical-epsilon).

An audit turns attack scores into a statement "the release is *not*
(ε, δ)-DP for any ε < ε_LB", wrong with probability at most α. A claim
(ε_claim, δ) is *violated* when ε_LB > ε_claim.

Conventions: ``scores`` (n,) float, higher = more likely member (NaN counts as
the lowest score); ``labels`` (n,) bool, true membership. A threshold t guesses
"member" iff score ≥ t; FPR = P[score ≥ t | out], FNR = P[score < t | in].

Which method fits which experiment:

* ``eps_lb_split``, ``eps_lb_bonferroni`` and ``eps_lb_gdp`` bound FPR and FNR
  with Clopper–Pearson, which needs *independent trials*: conditionally on
  the labels, the members' scores are i.i.d. and so are the non-members'
  (one canary per independent training, or a mechanism whose outputs are
  independent across canaries given their membership). Many documents scored
  against ONE target training are not independent trials.
* ``eps_lb_one_run`` (Steinke, Nasr & Jagielski 2023) is valid for a single
  training in which each of m canaries was included independently with
  probability ½ (``topicaudit.engine.plan`` draws the target that way), whatever the
  dependence between the canaries' scores.
* ``eps_lb_gdp`` is valid only under the extra assumption that the mechanism's
  trade-off curve is Gaussian (μ-GDP, e.g. a Gaussian release or DP-SGD as
  Nasr et al. 2023 assume). For a pure ε-DP mechanism (randomised response,
  Laplace) it overstates the leak and flags correct implementations.

Every bound here is 0 when nothing can be proven, never larger than the data
support at confidence 1 − α.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

from topicaudit.errors import UserError

METHODS = ("clopper-pearson-split", "clopper-pearson-bonferroni", "gdp", "one-run")


@dataclass(frozen=True)
class EpsilonBound:
    """An empirical ε lower bound at confidence 1 − α, with what it rests on."""

    epsilon: float  # the lower bound (0 when nothing can be proven)
    method: str  # one of METHODS
    confidence: float  # 1 - alpha
    delta: float
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return _jsonable(
            {
                "epsilon": self.epsilon,
                "method": self.method,
                "confidence": self.confidence,
                "delta": self.delta,
                "details": self.details,
            }
        )


def _jsonable(x):
    """Plain JSON values: NumPy scalars unwrapped, ±inf/NaN as strings."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in (x.tolist() if isinstance(x, np.ndarray) else x)]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    return x


# --------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------


def clopper_pearson_upper(k, n, alpha):
    """One-sided Clopper–Pearson upper bound: P[p > bound] ≤ alpha for k ~ Bin(n, p).

    The (1 − alpha) quantile of Beta(k + 1, n − k); 1 when k = n (including
    n = 0, where nothing is known). Never 0 for finite n, so an observed
    rate of 0 still gives a finite ε.
    """
    k, n, alpha = np.broadcast_arrays(np.asarray(k, float), np.asarray(n, float), np.asarray(alpha, float))
    if np.any((k < 0) | (k > n)):
        raise ValueError("need 0 <= k <= n")
    full = k >= n
    out = np.ones(k.shape)
    if np.any(~full):
        out[~full] = special.betaincinv(k[~full] + 1.0, n[~full] - k[~full], 1.0 - alpha[~full])
    return float(out) if out.ndim == 0 else out


def epsilon_from_rates(fpr, fnr, delta):
    """ε proven by a test whose FPR and FNR are at most ``fpr`` and ``fnr``.

    (ε, δ)-DP forces FPR + e^ε·FNR ≥ 1 − δ and FNR + e^ε·FPR ≥ 1 − δ for every
    test, so ε ≥ max{ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR)}; both sides
    only grow as the rates shrink, which is why upper bounds may be plugged
    in. Clipped at 0; +inf only when a rate bound is exactly 0 (impossible
    with Clopper–Pearson). Vectorised.
    """
    fpr, fnr = np.asarray(fpr, float), np.asarray(fnr, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = 1.0 - delta - fnr, 1.0 - delta - fpr
        e1 = np.where(a > 0, np.log(a) - np.log(fpr), -np.inf)
        e2 = np.where(b > 0, np.log(b) - np.log(fnr), -np.inf)
    out = np.maximum(np.maximum(e1, e2), 0.0)
    return float(out) if out.ndim == 0 else out


def gdp_mu_from_rates(fpr, fnr):
    """Smallest μ for which μ-GDP allows a test with these rates.

    μ-GDP means FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ) for every test, i.e.
    μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR); decreasing in both rates, so upper bounds of
    the rates give a lower bound of μ. Clipped at 0. Vectorised.
    """
    mu = -special.ndtri(np.asarray(fpr, float)) - special.ndtri(np.asarray(fnr, float))
    out = np.maximum(np.nan_to_num(mu, nan=0.0), 0.0)
    return float(out) if out.ndim == 0 else out


def gdp_delta(epsilon, mu):
    """δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022, Cor. 2.13).

    Also the exact privacy profile of the Gaussian mechanism with sensitivity
    Δ and noise σ, μ = Δ/σ (Balle & Wang 2018). Written as
    Φ(a)·(1 − exp(ε + log Φ(b) − log Φ(a))) to avoid cancellation at small δ.
    """
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    a, b = -epsilon / mu + mu / 2, -epsilon / mu - mu / 2
    return float(special.ndtr(a) * -math.expm1(epsilon + special.log_ndtr(b) - special.log_ndtr(a)))


def gdp_epsilon(mu, delta):
    """Smallest ε ≥ 0 with μ-GDP ⊆ (ε, δ)-DP, i.e. the root of gdp_delta(ε, μ) = δ."""
    if mu <= 0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    if math.isinf(mu) or delta <= 0:
        return math.inf
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2.0
    return float(optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


def gdp_mu_for(epsilon, delta):
    """The μ whose GDP profile passes through (ε, δ): the Gaussian mechanism's μ = Δ/σ for that claim."""
    if delta <= 0:
        return 0.0
    hi = 1.0
    while gdp_delta(epsilon, hi) < delta:
        hi *= 2.0
    return float(optimize.brentq(lambda m: gdp_delta(epsilon, m) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14))


# --------------------------------------------------------------------------
# Thresholds and their rate bounds
# --------------------------------------------------------------------------


def _prepare(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64).ravel(), nan=-np.inf)
    labels = np.asarray(labels).ravel()
    if labels.dtype != bool:
        if not np.isin(labels, (0, 1)).all():
            raise ValueError("labels must be boolean (True = member)")
        labels = labels.astype(bool)
    if scores.shape != labels.shape:
        raise ValueError(f"scores {scores.shape} and labels {labels.shape} differ in shape")
    return scores, labels


def check_level(alpha, delta, alpha_name: str = "alpha", delta_name: str = "delta") -> None:
    """The one check of a bound's level: α in (0, 1), δ in [0, 1); the names say which key or flag."""
    if not 0.0 <= delta < 1.0:
        raise UserError(f"{delta_name} must be in [0, 1) (got {delta})")
    if not 0.0 < alpha < 1.0:
        raise UserError(f"{alpha_name} must be in (0, 1) (got {alpha})")


def _errors(scores, labels, thresholds) -> tuple[np.ndarray, np.ndarray, int, int]:
    """False positives (out, score ≥ t) and false negatives (in, score < t) per threshold."""
    neg, pos = np.sort(scores[~labels]), np.sort(scores[labels])
    fp = neg.size - np.searchsorted(neg, thresholds, side="left")
    fn = np.searchsorted(pos, thresholds, side="left")
    return fp, fn, pos.size, neg.size


def _candidates(scores) -> np.ndarray:
    """Every distinct score, plus +inf (guess nobody)."""
    return np.r_[np.unique(scores), np.inf]


def _midpoints(scores) -> np.ndarray:
    """Thresholds between consecutive distinct scores, plus both ends: a split's threshold
    should sit in the gap, not on a selection-half score the other half may fall just below."""
    u = np.unique(scores)
    with np.errstate(invalid="ignore", over="ignore"):
        mid = u[:-1] + (u[1:] - u[:-1]) / 2
    mid = np.where(np.isfinite(mid), mid, u[1:])
    return np.r_[u[:1], mid, np.inf]


def count_grid(n: int, size: int = 32) -> np.ndarray:
    """A label-free grid of error counts 0 … n, dense at small counts (geometric steps)."""
    return np.unique(np.floor(np.geomspace(1, n + 1, max(size, 2))).astype(np.int64) - 1)


def _band(n: int, alpha: float, grid_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Grid of counts, their Clopper–Pearson upper bounds valid *simultaneously*, and #tests."""
    grid = count_grid(n, grid_size)
    tests = int((grid < n).sum())  # the bound at k = n is 1: always true, costs nothing
    return grid, clopper_pearson_upper(grid, n, alpha / max(tests, 1)), tests


def _band_bounds(fp, fn, n_pos, n_neg, alpha, grid_size):
    """FPR/FNR upper bounds at every threshold, all valid together with probability ≥ 1 − alpha.

    Counts are rounded up to a grid and Clopper-Pearson bounds Bonferroni-corrected over it, so the
    threshold may be picked after looking at the labels; why that is valid: docs/algorithms.md#threshold-bands.
    """
    g_neg, u_neg, t_neg = _band(n_neg, alpha / 2, grid_size)
    g_pos, u_pos, t_pos = _band(n_pos, alpha / 2, grid_size)
    i_fp = np.searchsorted(g_neg, fp, side="left")
    i_fn = np.searchsorted(g_pos, fn, side="left")
    return u_neg[i_fp], u_pos[i_fn], g_neg[i_fp], g_pos[i_fn], t_neg, t_pos


def _objective(kind: str, delta: float):
    if kind == "dp":
        return lambda fpr, fnr: epsilon_from_rates(fpr, fnr, delta)
    return gdp_mu_from_rates


def _select_bonferroni(scores, labels, alpha, delta, kind, thresholds, grid_size) -> dict:
    """The threshold with the best valid bound over a Bonferroni-corrected family."""
    objective = _objective(kind, delta)
    if thresholds is not None:
        thresholds = np.atleast_1d(np.asarray(thresholds, float))
        if thresholds.size == 0:
            raise ValueError("thresholds is empty")
        m = thresholds.size
        fp, fn, n_pos, n_neg = _errors(scores, labels, thresholds)
        a = alpha / (2 * m)
        fpr_ub, fnr_ub = clopper_pearson_upper(fp, n_neg, a), clopper_pearson_upper(fn, n_pos, a)
        info = {"family": "fixed thresholds", "n_thresholds": m, "alpha_per_rate_bound": a}
        fp_used, fn_used = fp, fn
    else:
        thresholds = _candidates(scores)
        fp, fn, n_pos, n_neg = _errors(scores, labels, thresholds)
        fpr_ub, fnr_ub, fp_used, fn_used, t_neg, t_pos = _band_bounds(fp, fn, n_pos, n_neg, alpha, grid_size)
        info = {
            "family": "count grid (simultaneous Clopper-Pearson band over all thresholds)",
            "grid_tests_fpr": t_neg,
            "grid_tests_fnr": t_pos,
            "alpha_per_fpr_bound": alpha / 2 / max(t_neg, 1),
            "alpha_per_fnr_bound": alpha / 2 / max(t_pos, 1),
        }
    value = np.atleast_1d(objective(fpr_ub, fnr_ub))
    i = int(np.argmax(value))
    return {
        "threshold": float(thresholds[i]),
        "false_positives": int(fp[i]),
        "false_negatives": int(fn[i]),
        "false_positives_bounded_as": int(fp_used[i]),
        "false_negatives_bounded_as": int(fn_used[i]),
        "n_members": n_pos,
        "n_nonmembers": n_neg,
        "fpr_ub": float(fpr_ub[i]),
        "fnr_ub": float(fnr_ub[i]),
        **info,
    }


def _select_split(scores, labels, alpha, delta, kind, split, seed) -> dict:
    """Pick the threshold on a random part of the trials, bound its rates on the rest.

    The split is stratified by label (valid: given the labels, the two parts'
    scores are independent), so the evaluation part's counts are binomial at
    a threshold fixed in advance; each rate is bounded at α/2.
    """
    if not 0.0 < split < 1.0:
        raise ValueError("split must be in (0, 1)")
    rng = np.random.default_rng(seed)
    select = np.zeros(scores.size, bool)
    for cls in (False, True):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        select[idx[: int(round(split * idx.size))]] = True
    objective = _objective(kind, delta)
    s_sel, l_sel = scores[select], labels[select]
    cand = _midpoints(s_sel)
    fp, fn, n_pos, n_neg = _errors(s_sel, l_sel, cand)
    value = np.atleast_1d(
        objective(clopper_pearson_upper(fp, n_neg, alpha / 2), clopper_pearson_upper(fn, n_pos, alpha / 2))
    )
    t = float(cand[int(np.argmax(value))])
    fp, fn, n_pos, n_neg = _errors(scores[~select], labels[~select], np.array([t]))
    return {
        "threshold": t,
        "false_positives": int(fp[0]),
        "false_negatives": int(fn[0]),
        "n_members": n_pos,
        "n_nonmembers": n_neg,
        "fpr_ub": clopper_pearson_upper(fp[0], n_neg, alpha / 2),
        "fnr_ub": clopper_pearson_upper(fn[0], n_pos, alpha / 2),
        "split": split,
        "seed": seed,
        "n_selection": int(select.sum()),
        "alpha_per_rate_bound": alpha / 2,
    }


# --------------------------------------------------------------------------
# The four bounds
# --------------------------------------------------------------------------


def eps_lb_split(scores, labels, delta, alpha=0.05, *, split=0.5, seed=0) -> EpsilonBound:
    """ε_LB from one threshold chosen on a held-out split of independent trials.

    A stratified fraction ``split`` of the trials picks the threshold (the one
    maximising the bound computed on that part); the remaining trials give
    Clopper–Pearson upper bounds of FPR and FNR, each at α/2, fed to
    ``epsilon_from_rates``. Needs independent trials (module docstring).
    """
    check_level(alpha, delta)
    scores, labels = _prepare(scores, labels)
    d = _select_split(scores, labels, alpha, delta, "dp", split, seed)
    eps = epsilon_from_rates(d["fpr_ub"], d["fnr_ub"], delta)
    return EpsilonBound(eps, "clopper-pearson-split", 1.0 - alpha, delta, d)


def eps_lb_bonferroni(scores, labels, delta, alpha=0.05, *, thresholds=None, grid_size=32) -> EpsilonBound:
    """ε_LB from the best of a Bonferroni-corrected family of threshold tests.

    With ``thresholds`` (fixed before seeing these scores) each of the m
    thresholds gets Clopper–Pearson bounds at α/(2m). Without, every
    threshold is allowed and validity comes from a simultaneous band: error
    counts are rounded up to a fixed geometric grid of ``grid_size`` counts
    and the correction is over the grid (see ``_band_bounds``, derived here).
    This uses all trials and lets the threshold follow the labels, unlike
    quantiles of the pooled scores, which depend on the data being bounded.
    Needs independent trials (module docstring).
    """
    check_level(alpha, delta)
    scores, labels = _prepare(scores, labels)
    d = _select_bonferroni(scores, labels, alpha, delta, "dp", thresholds, grid_size)
    eps = epsilon_from_rates(d["fpr_ub"], d["fnr_ub"], delta)
    return EpsilonBound(eps, "clopper-pearson-bonferroni", 1.0 - alpha, delta, d)


def eps_lb_gdp(
    scores, labels, delta, alpha=0.05, *, threshold="bonferroni", split=0.5, seed=0, grid_size=32, thresholds=None
) -> EpsilonBound:
    """ε_LB by the Gaussian-DP route (Nasr et al. 2023), valid only if the release is μ-GDP.

    With valid upper bounds FPR_ub, FNR_ub at one threshold (chosen as in
    ``eps_lb_bonferroni`` when ``threshold="bonferroni"``, the default, or as
    in ``eps_lb_split`` when ``"split"``; the threshold maximises μ):
    μ_LB = Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub) (0 if negative), and ε_LB is the
    ε solving δ = Φ(−ε/μ_LB + μ_LB/2) − e^ε·Φ(−ε/μ_LB − μ_LB/2).
    Why it needs the assumption: if the release is μ-GDP and (ε, δ)-DP with
    the tight conversion, then μ ≥ μ_LB and ε ≥ ε(μ_LB, δ). A release that is
    (ε, δ)-DP but not Gaussian-shaped (randomised response, Laplace) can have
    μ_LB far above the μ its (ε, δ) corresponds to: the bound is then invalid.
    """
    check_level(alpha, delta)
    scores, labels = _prepare(scores, labels)
    if threshold == "bonferroni":
        d = _select_bonferroni(scores, labels, alpha, delta, "gdp", thresholds, grid_size)
    elif threshold == "split":
        d = _select_split(scores, labels, alpha, delta, "gdp", split, seed)
    else:
        raise ValueError("threshold must be 'bonferroni' or 'split'")
    mu = gdp_mu_from_rates(d["fpr_ub"], d["fnr_ub"])
    d = {"threshold_rule": threshold, "mu_lb": mu, "assumes": "the release is mu-GDP (Gaussian trade-off curve)", **d}
    return EpsilonBound(gdp_epsilon(mu, delta), "gdp", 1.0 - alpha, delta, d)


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
        vmax = int(v.max(initial=0))
        if vmax > 0:
            i = np.arange(1, vmax + 1)
            j = v[..., None] - i  # v - i: outcomes v-1, v-2, ..., v-vmax
            pmf = np.where(j >= 0, stats.binom.pmf(np.maximum(j, 0), r[..., None], q), 0.0)
            term = (np.cumsum(pmf, axis=-1) / i).max(axis=-1)  # (f(v-i) - f(v)) / i, max over i
            p = p + 2.0 * m * delta * np.where(v > 0, term, 0.0)
    out = np.minimum(p, 1.0)
    return float(out) if out.ndim == 0 else out


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


def default_guess_counts(n: int, min_guesses: int = 32) -> list[tuple[int, int]]:
    """Label-free (k+, k−) family: k = n/2, n/4, … down to min_guesses/2, as (k, k) and (k, 0).

    (k, k) suits attacks that separate both tails; (k, 0) suits attacks
    like LiRA whose evidence sits in the members' top scores. Fewer than ~32
    guesses cannot prove much at α/|family| anyway.
    """
    pairs, k = [], n // 2
    while k >= max(min_guesses // 2, 1):
        pairs += [(k, k), (k, 0)]
        k //= 2
    if not pairs and n:
        pairs = [(n // 2, n - n // 2)]
    return pairs


def margin_guess_counts(n: int, zs=(1.5, 2.5, 3.5)) -> list[tuple[int, int]]:
    """Label-free (k, k) pairs just inside the member count: k = ⌊n/2 − z·√n/2⌋ for each z.

    With independent ½ coins the members number Bin(n, ½) (sd √n/2), so k
    sits below both class sizes with probability ≈ (2Φ(z) − 1): a perfect
    attack then gets all 2k guesses right. The family for near-perfect
    attacks (canaries a non-private learner memorises); the default family
    wastes guesses on (n/2, n/2), which a perfect attack gets wrong by
    |#members − n/2|, and pays Bonferroni for pairs that cannot win.
    """
    ks = sorted({int(n // 2 - z * math.sqrt(n) / 2) for z in zs}, reverse=True)
    return [(k, k) for k in ks if k >= 1]


def guess_pairs(n: int, k_plus=None, k_minus=None) -> list[tuple[int, int]]:
    """The (k+, k−) guess counts to test: ``default_guess_counts(n)`` unless given.

    k_plus/k_minus: ints (one pre-registered test) or equal-length sequences
    (a family); a missing one counts as 0. Raises ValueError for counts
    outside 0 ≤ k+, k− and k+ + k− ≤ n.
    """
    if k_plus is None and k_minus is None:
        return default_guess_counts(n)
    kp = np.atleast_1d(np.asarray(0 if k_plus is None else k_plus, np.int64))
    km = np.atleast_1d(np.asarray(0 if k_minus is None else k_minus, np.int64))
    kp, km = np.broadcast_arrays(kp, km)
    pairs = list(zip(kp.tolist(), km.tolist()))
    for kp_, km_ in pairs:
        if kp_ < 0 or km_ < 0 or kp_ + km_ > n:
            raise ValueError(f"need k+, k- >= 0 and k+ + k- <= n = {n}; got ({kp_}, {km_})")
    return pairs


def guess_outcomes(scores, labels, pairs, seed=0) -> list[tuple[int, int, int, int]]:
    """(k+, k−, r, v) per pair: guess "in" for the k+ highest scores, "out" for the k− lowest.

    r = k+ + k− guesses, v of them correct. Ties are broken by a seeded random
    order (a permutation, then a stable sort by score), never by input order,
    which may follow the labels. ``scores``/``labels`` as from ``_prepare``.
    """
    n = scores.size
    perm = np.random.default_rng(seed).permutation(n)
    order = perm[np.argsort(-scores[perm], kind="stable")]
    hits_top = np.r_[0, np.cumsum(labels[order])]  # members among the top j
    hits_bottom = np.r_[0, np.cumsum(~labels[order[::-1]])]  # non-members among the bottom j
    return [(kp, km, kp + km, int(hits_top[kp] + hits_bottom[km])) for kp, km in pairs]


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
        return EpsilonBound(0.0, "one-run", 1.0 - alpha, delta, {"m": m, "reason": results})
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
    return EpsilonBound(best, "one-run", 1.0 - alpha, delta, one_run_details(m, results, best_i, a, seed))


def one_run_guesses(scores, labels, delta, alpha, k_plus, k_minus, m, seed):
    """What every one-run bound starts from: checked inputs, m, each guess pair's outcome, α per pair.

    Returns (m, outcomes [(k+, k−, r, v), …], α per pair), or (m, reason, None)
    when nothing can be tested: no guesses, or labels of one class only (then
    inclusion was evidently not randomised; claim nothing rather than lean on
    a 2^-n event).
    """
    check_level(alpha, delta)
    scores, labels = _prepare(scores, labels)
    n = scores.size
    m = n if m is None else int(m)
    if m < n:
        raise ValueError("m (canaries randomised) cannot be below the number scored")
    pairs = guess_pairs(n, k_plus, k_minus)
    if not pairs or labels.all() or not labels.any():
        return m, "no canaries" if not pairs else "labels contain one class only", None
    return m, guess_outcomes(scores, labels, pairs, seed), alpha / len(pairs)


def one_run_details(m, outcomes, best_i, alpha_each, seed) -> dict:
    """The ``details`` of a one-run bound: the winning guess pair and the family it was chosen from."""
    k_plus, k_minus, r, v = outcomes[best_i]
    return {"m": m, "k_plus": k_plus, "k_minus": k_minus, "guesses": r, "correct": v,
            "family_size": len(outcomes), "alpha_per_test": alpha_each,
            "family": [list(x) for x in outcomes], "seed": seed}
