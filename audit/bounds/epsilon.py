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
* ``one_run.eps_lb_one_run`` (Steinke, Nasr & Jagielski 2023) is valid for a single
  training in which each of m canaries was included independently with
  probability ½ (``topicaudit.engine.execution.plan`` draws the target that way), whatever the
  dependence between the canaries' scores.
* ``eps_lb_gdp`` is valid only under the extra assumption that the mechanism's
  trade-off curve is Gaussian (μ-GDP, e.g. a Gaussian release or DP-SGD as
  Nasr et al. 2023 assume). For a pure ε-DP mechanism (randomised response,
  Laplace) it overstates the leak and flags correct implementations.

Every bound here is 0 when nothing can be proven, never larger than the data
support at confidence 1 − α.

Longer than 400 lines because it is one family: every (ε, δ) bound from error rates, with the
confidence bands and threshold selections they share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from scipy import optimize, special

from topicaudit.errors import UserError


class Method(StrEnum):
    """The name of every ε-bound method, as ``EpsilonBound.method`` and results.json record it."""

    SPLIT = "clopper-pearson-split"  # independent trials, threshold on a held-out split
    BONFERRONI = "clopper-pearson-bonferroni"  # independent trials, a corrected family of thresholds
    GDP = "gdp"  # independent trials, assumes a Gaussian trade-off curve
    ONE_RUN = "one-run"  # one training (Steinke, Nasr & Jagielski 2023): topicaudit.bounds.one_run
    FDP_PURE = "fdp-one-run-pure"  # one training, f-DP analysis of f_{ε,δ}: topicaudit.bounds.fdp
    FDP_GDP = "fdp-one-run-gdp"  # one training, f-DP analysis of μ-GDP (assumes a Gaussian curve)
    FDP_CURVE = "fdp-one-run-curve"  # one training, the claimed mechanism's own trade-off curve
    DELTA_TAIL = "delta-tail"  # a claim's δ, tested by words only a canary holds


@dataclass(frozen=True)
class EpsilonBound:
    """An empirical ε lower bound at confidence 1 − α, with what it rests on."""

    epsilon: float  # the lower bound (0 when nothing can be proven)
    method: Method
    confidence: float  # 1 - alpha
    delta: float
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return _jsonable(
            {
                "epsilon": self.epsilon,
                "method": str(self.method),
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


def prepare_scores(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """Scores as flat float64 (NaN → −∞, the lowest) and labels as bool, of one shape, or a ValueError."""
    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64).ravel(), nan=-np.inf)
    labels = np.asarray(labels).ravel()
    if labels.dtype != bool:
        if not np.isin(labels, (0, 1)).all():
            raise ValueError("labels must be boolean (True = member)")
        labels = labels.astype(bool)
    if scores.shape != labels.shape:
        raise ValueError(f"scores {scores.shape} and labels {labels.shape} differ in shape")
    return scores, labels


# α above this is a "proof" at under 50% confidence: a learner that keeps its claim exactly would be refuted
# more often than not (`check --alpha 0.95`, α read as the confidence, said VIOLATED at "5% confidence").
MAX_ALPHA = 0.5


def check_level(alpha, delta, alpha_name: str = "alpha", delta_name: str = "delta") -> None:
    """The one check of a bound's level: α in (0, MAX_ALPHA], δ in [0, 1); the names say which key or flag."""
    if not 0.0 <= delta < 1.0:
        raise UserError(f"{delta_name} must be in [0, 1) (got {delta})")
    if not 0.0 < alpha < 1.0:
        raise UserError(f"{alpha_name} must be in (0, 1) (got {alpha})")
    if alpha > MAX_ALPHA:
        raise UserError(f"{alpha_name} must be at most {MAX_ALPHA} (got {alpha}): it is 1 − the confidence (0.05 "
                        f"is 95% confidence), and at {(1 - alpha) * 100:.10g}% confidence a learner that keeps its "
                        f"claim would be refuted more often than not; did you mean {1 - alpha:.10g}?")


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
# The three bounds of independent trials
# --------------------------------------------------------------------------


def eps_lb_split(scores, labels, delta, alpha=0.05, *, split=0.5, seed=0) -> EpsilonBound:
    """ε_LB from one threshold chosen on a held-out split of independent trials.

    A stratified fraction ``split`` of the trials picks the threshold (the one
    maximising the bound computed on that part); the remaining trials give
    Clopper–Pearson upper bounds of FPR and FNR, each at α/2, fed to
    ``epsilon_from_rates``. Needs independent trials (module docstring).
    """
    check_level(alpha, delta)
    scores, labels = prepare_scores(scores, labels)
    d = _select_split(scores, labels, alpha, delta, "dp", split, seed)
    eps = epsilon_from_rates(d["fpr_ub"], d["fnr_ub"], delta)
    return EpsilonBound(eps, Method.SPLIT, 1.0 - alpha, delta, d)


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
    scores, labels = prepare_scores(scores, labels)
    d = _select_bonferroni(scores, labels, alpha, delta, "dp", thresholds, grid_size)
    eps = epsilon_from_rates(d["fpr_ub"], d["fnr_ub"], delta)
    return EpsilonBound(eps, Method.BONFERRONI, 1.0 - alpha, delta, d)


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
    scores, labels = prepare_scores(scores, labels)
    if threshold == "bonferroni":
        d = _select_bonferroni(scores, labels, alpha, delta, "gdp", thresholds, grid_size)
    elif threshold == "split":
        d = _select_split(scores, labels, alpha, delta, "gdp", split, seed)
    else:
        raise ValueError("threshold must be 'bonferroni' or 'split'")
    mu = gdp_mu_from_rates(d["fpr_ub"], d["fnr_ub"])
    d = {"threshold_rule": threshold, "mu_lb": mu, "assumes": "the release is mu-GDP (Gaussian trade-off curve)", **d}
    return EpsilonBound(gdp_epsilon(mu, delta), Method.GDP, 1.0 - alpha, delta, d)
