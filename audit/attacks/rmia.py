"""RMIA (Zarifzadeh et al. 2024) for topic models: likelihood ratios against reference models.

RMIA scores a document x by how much more likely the target model makes it
than the reference (shadow) models do on average,

    LR(x) = Pr(x | Φ_target) / Pr(x),   Pr(x) = mean over reference models of Pr(x | Φ_r),

and compares LR(x) with the LR(z) of population documents z known not to be
members: score(x) = fraction of z with LR(x) / LR(z) ≥ γ. That score is a
non-decreasing function of LR(x) alone, so it ranks documents exactly as
LR(x) does (ties aside): the audits rank by log LR(x) and use the population
only where a calibrated number is wanted (``population_scores``).

The likelihood of a document under Φ is exp(ζ), ζ the maximum log-likelihood
over topic mixtures. Two scales are offered:

* ``token``: the per-token likelihood exp(ζ/n) ∈ (0, 1] (n = the document's
  tokens), the analogue of the probability of the true label that RMIA was
  written for; the offline approximation below needs a probability in (0, 1].
* ``document``: the whole document's likelihood exp(ζ).

Online: Pr(x) = ½(mean over IN shadows + mean over OUT shadows).
Offline (OUT shadows only): the paper's approximation of the unseen IN mean,
Pr_IN(x) ≈ a·Pr_OUT(x) + (1 − a), so Pr(x) = ½((1 + a)·Pr_OUT(x) + 1 − a).
``fit_offline_a`` chooses a from the shadows alone (never the target).
All sums of exponentials are taken in log space.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

SCALES = ("token", "document")
# With one reference model nothing can be fitted: a defaults to 1 (Pr_IN = Pr_OUT).
DEFAULT_A = 1.0


def log_likelihoods(zeta: np.ndarray, n_tokens: np.ndarray, scale: str = "token") -> np.ndarray:
    """log Pr(x | Φ) on the chosen scale, for ζ of shape (..., n_docs)."""
    if scale == "document":
        return zeta
    if scale == "token":
        return zeta / np.maximum(n_tokens, 1.0)
    raise ValueError(f"unknown likelihood scale {scale!r}; choose one of {', '.join(SCALES)}")


def log_mean_exp(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """log of the mean of exp(values) over axis 0 where mask holds (−inf where it never does)."""
    count = mask.sum(axis=0)
    with np.errstate(divide="ignore"):
        total = logsumexp(np.where(mask, values, -np.inf), axis=0)
        return np.where(count > 0, total - np.log(np.maximum(count, 1)), -np.inf)


def online_log_ratio(observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray) -> np.ndarray:
    """log LR(x) = log Pr(x|target) − log ½(Pr_IN(x) + Pr_OUT(x)), inputs already log-likelihoods.

    A side without shadows (one reference model) is left out: Pr(x) is then the other side's mean.
    """
    log_in = log_mean_exp(shadow, shadow_in)
    log_out = log_mean_exp(shadow, ~shadow_in)
    sides = np.stack([log_in, log_out])
    log_pr = log_mean_exp(sides, np.isfinite(sides))
    return observed - log_pr


def offline_log_ratio(observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray, a: float) -> np.ndarray:
    """log LR(x) with Pr(x) = ½((1 + a) Pr_OUT(x) + 1 − a) from the OUT shadows (log-likelihoods ≤ 0).

    A document with no OUT shadow (one reference model that trained on it)
    gets Pr_OUT from inverting the approximation on its IN mean.
    """
    log_out = log_mean_exp(shadow, ~shadow_in)
    missing = ~np.isfinite(log_out)
    if missing.any():
        log_in = log_mean_exp(shadow, shadow_in)[missing]
        p_in = np.exp(log_in)
        p_out = (p_in - (1 - a)) / a if a > 0 else p_in
        log_out[missing] = np.log(np.clip(p_out, np.exp(log_in) * 1e-3, 1.0))
    pr = 0.5 * ((1 + a) * np.exp(log_out) + (1 - a))
    return observed - np.log(pr)


def fit_offline_a(shadow: np.ndarray, shadow_in: np.ndarray) -> float:
    """The a of Pr_IN ≈ a·Pr_OUT + (1 − a), fitted to the shadows' own IN and OUT means.

    Least squares of (1 − Pr_IN) = a·(1 − Pr_OUT) over documents with both
    sides: a = Σ(1 − p_out)(1 − p_in) / Σ(1 − p_out)², clipped to [0, 1].
    It reads only the shadows' statistics and their own membership
    (``shadow_in``), so it cannot depend on the target's members. With one
    reference model there is no document with both sides: ``DEFAULT_A``.
    """
    log_in = log_mean_exp(shadow, shadow_in)
    log_out = log_mean_exp(shadow, ~shadow_in)
    both = np.isfinite(log_in) & np.isfinite(log_out)
    if not both.any():
        return DEFAULT_A
    loss_in, loss_out = -np.expm1(log_in[both]), -np.expm1(log_out[both])
    denominator = (loss_out ** 2).sum()
    if denominator == 0:
        return DEFAULT_A
    return float(np.clip((loss_out * loss_in).sum() / denominator, 0.0, 1.0))


def population_scores(log_ratio: np.ndarray, population_log_ratio: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """RMIA's score: the fraction of population documents z with LR(x)/LR(z) ≥ γ."""
    if population_log_ratio.size == 0:
        raise ValueError("RMIA needs at least one population document")
    ordered = np.sort(population_log_ratio)
    beaten = np.searchsorted(ordered, log_ratio - np.log(gamma), side="right")
    return beaten / ordered.size


def rmia_scores(observed_zeta: np.ndarray, shadow_zeta: np.ndarray, shadow_in: np.ndarray,
                n_tokens: np.ndarray, online: bool, scale: str = "token") -> tuple[np.ndarray, float | None]:
    """log LR of every document from ζ under the target (n,) and the shadows (N, n).

    Returns the log ratios and, offline, the fitted a.
    """
    target = log_likelihoods(observed_zeta, n_tokens, scale)
    shadow = log_likelihoods(shadow_zeta, n_tokens, scale)
    if online:
        return online_log_ratio(target, shadow, shadow_in), None
    if scale != "token":
        raise ValueError("offline RMIA needs likelihoods in (0, 1]: use the token scale")
    a = fit_offline_a(shadow, shadow_in)
    return offline_log_ratio(target, shadow, shadow_in, a), a
