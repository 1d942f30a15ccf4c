"""Membership scores from statistics: LiRA (online, offline) and threshold baselines.

Every function maps arrays of a statistic to one score per document where
higher means "more likely a member". Shapes: ``observed`` (n_docs,) is the
statistic under the target model; ``shadow`` (n_shadows, n_docs) under each
shadow model; ``shadow_in`` (n_shadows, n_docs) says which shadows trained on
which document.
"""
from __future__ import annotations

import numpy as np

# A floor on variances so a document whose statistic never varies (e.g. it has
# no words in the vocabulary) scores a neutral 0 instead of NaN. Statistics
# are log-likelihoods of order 1-1000, so 1e-12 never binds on real data.
VARIANCE_FLOOR = 1e-12


def _masked_moments(shadow: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-document mean and (ddof 0) variance over the shadows where mask holds."""
    count = mask.sum(axis=0)
    total = np.where(mask, shadow, 0.0).sum(axis=0)
    mean = total / np.maximum(count, 1)
    var = np.where(mask, (shadow - mean) ** 2, 0.0).sum(axis=0) / np.maximum(count, 1)
    return mean, var


def pooled_within_document_variance(var: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """One σ² for every document: the per-document variances (each about its own mean) averaged, weighted by count.

    Centring each document on its own mean keeps differences between documents
    out of the variance. (Carlini et al.'s fixed variance is another quantity:
    it does not centre per document.)
    """
    count = mask.sum(axis=0)
    return np.full_like(var, (var * count).sum() / max(count.sum(), 1))


def _gaussian_logpdf(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    return -0.5 * (np.log(2 * np.pi * var) + (x - mean) ** 2 / var)


def online_scores(
    observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray, global_variance: bool = False
) -> np.ndarray:
    """log N(obs; μ_in, σ_in²) − log N(obs; μ_out, σ_out²), kept as a log ratio."""
    mu_in, var_in = _masked_moments(shadow, shadow_in)
    mu_out, var_out = _masked_moments(shadow, ~shadow_in)
    if global_variance:
        var_in, var_out = pooled_within_document_variance(var_in, shadow_in), pooled_within_document_variance(var_out, ~shadow_in)
    var_in = np.maximum(var_in, VARIANCE_FLOOR)
    var_out = np.maximum(var_out, VARIANCE_FLOOR)
    return _gaussian_logpdf(observed, mu_in, var_in) - _gaussian_logpdf(observed, mu_out, var_out)


def offline_scores(
    observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray, global_variance: bool = False
) -> np.ndarray:
    """One-sided test against the OUT distribution: z = (obs − μ_out)/σ_out.

    Members sit high. Carlini's offline score is Φ(z); z ranks identically and
    does not saturate at 1 for large z, so ties do not blur the low-FPR end.
    The p-value of "d is not a member" is 1 − Φ(z) = ``ndtr(-z)``.
    """
    mu_out, var_out = _masked_moments(shadow, ~shadow_in)
    if global_variance:
        var_out = pooled_within_document_variance(var_out, ~shadow_in)
    return (observed - mu_out) / np.sqrt(np.maximum(var_out, VARIANCE_FLOOR))
