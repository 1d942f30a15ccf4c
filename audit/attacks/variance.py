"""Shrunk per-document variances for LiRA with few shadow models.

LiRA's per-document variance is estimated from the N/2 shadows on each side;
with N = 2–16 that estimate is noise (zero with one shadow per side) and the
Gaussian test over-trusts it, while one variance pooled over all documents
ignores that documents differ. Here each document's variance is a Bayesian
posterior (Brännvall's BaVarIA idea): the conjugate normal-inverse-gamma prior
(flat on the mean, scaled-inverse-χ² on σ² with ν₀ degrees of freedom and
scale s₀², the pooled variance) updated by the document's own c_d shadows:

    s²_post(d) = (ν₀ s₀² + S_d) / (ν₀ + c_d − 1),   S_d = Σ (x − x̄_d)²

With c_d = 1 this is the pooled variance; as c_d grows it becomes the
document's sample variance. ν₀ maximises the marginal likelihood of the
sample variances: under the prior, s_d²/s₀² follows an F(c_d − 1, ν₀)
distribution.

Where documents differ a lot in how much their ζ varies (20 Newsgroups:
long posts and one-line replies), one pooled s₀² is far from most documents
and the prior must follow the document: s₀²(d) is then a regression of the
document's log sample variance on its word-count features
(``topicaudit.attacks.features``). Everything here reads the shadows'
statistics, their own membership (``shadow_in``) and the documents' word
counts only, never the target's. Derivation, the rule and measurements:
docs/attacks.md.
"""
from __future__ import annotations

import numpy as np
from scipy import optimize, stats
from scipy.special import digamma

from topicaudit.attacks.lira import VARIANCE_FLOOR, _gaussian_logpdf

# Bounds of the prior strength ν₀ (degrees of freedom of the prior).
NU_RANGE = (0.5, 1e4)
# The regressed prior replaces the pooled one when its predicted log variances spread more than this
# (sd over documents). Measured: PHEME ≈ 0.5, KOS ≈ 1.0, 20 Newsgroups ≈ 1.9 (docs/attacks.md).
UNEQUAL_SPREAD = 0.75
# Fewest documents with a sample variance for that regression (five coefficients).
MIN_REGRESSION_DOCUMENTS = 200


def side_moments(shadow: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per document: count c, mean, and sum of squared deviations S over the shadows where mask holds."""
    count = mask.sum(axis=0)
    mean = np.where(mask, shadow, 0.0).sum(axis=0) / np.maximum(count, 1)
    ss = np.where(mask, (shadow - mean) ** 2, 0.0).sum(axis=0)
    return count, mean, ss


def prior_strength(sample_var: np.ndarray, dof: np.ndarray, prior_var: float | np.ndarray) -> float:
    """ν₀ maximising Σ_d log F(s_d²/s₀²(d); dof_d, ν₀) over documents with dof > 0 and s_d² > 0."""
    use = (dof > 0) & (sample_var > 0)
    if not use.any():
        return NU_RANGE[1]  # no document varies: trust the prior
    ratio, k = sample_var[use] / np.broadcast_to(prior_var, sample_var.shape)[use], dof[use]

    def negative_log_likelihood(log_nu: float) -> float:
        return -stats.f.logpdf(ratio, k, np.exp(log_nu)).sum()

    found = optimize.minimize_scalar(negative_log_likelihood, method="bounded",
                                     bounds=(np.log(NU_RANGE[0]), np.log(NU_RANGE[1])))
    return float(np.exp(found.x))


def pooled_prior(count: np.ndarray, ss: np.ndarray) -> tuple[float, float]:
    """(s₀², ν₀) of one side: the pooled variance Σ S_d / Σ (c_d − 1) and its fitted strength."""
    dof = np.maximum(count - 1, 0).astype(float)
    pooled = max(ss.sum() / dof.sum(), VARIANCE_FLOOR)
    sample_var = np.where(dof > 0, ss / np.maximum(dof, 1), 0.0)
    return pooled, prior_strength(sample_var, dof, pooled)


def regressed_variance(ss: np.ndarray, dof: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Per-document s₀²(d): least squares of log s_d² on [1, features], at the pooled level.

    log s² of k degrees of freedom is biased low by ψ(k/2) − log(k/2), which
    is added back; the fit is then scaled so that Σ_d dof_d s₀²(d) = Σ_d S_d.
    Uses the documents with dof > 0 and S > 0.
    """
    use = (dof > 0) & (ss > 0)
    design = np.column_stack([np.ones(len(features)), features])
    log_sample_var = np.log(ss[use] / dof[use]) - (digamma(dof[use] / 2) - np.log(dof[use] / 2))
    beta, *_ = np.linalg.lstsq(design[use], log_sample_var, rcond=None)
    log_prior = design @ beta
    prior = np.exp(log_prior - log_prior.max())  # relative scale first: no overflow
    return np.maximum(prior * ss[use].sum() / (dof[use] * prior[use]).sum(), VARIANCE_FLOOR)


def regressed_prior(count: np.ndarray, ss: np.ndarray, features: np.ndarray) -> np.ndarray | None:
    """``regressed_variance`` of one side, or None where the pooled s₀² should stay.

    None when too few documents vary or the predictions spread less than
    UNEQUAL_SPREAD: a near-constant prediction only adds the regression's noise.
    """
    dof = np.maximum(count - 1, 0).astype(float)
    if ((dof > 0) & (ss > 0)).sum() < MIN_REGRESSION_DOCUMENTS:
        return None
    prior = regressed_variance(ss, dof, features)
    return prior if np.std(np.log(prior)) > UNEQUAL_SPREAD else None


def side_prior(count: np.ndarray, ss: np.ndarray, features: np.ndarray | None) -> tuple[float | np.ndarray, float]:
    """(s₀², ν₀) of one side: regressed on the features where documents differ enough, else pooled."""
    prior = regressed_prior(count, ss, features) if features is not None else None
    if prior is None:
        return pooled_prior(count, ss)
    dof = np.maximum(count - 1, 0).astype(float)
    sample_var = np.where(dof > 0, ss / np.maximum(dof, 1), 0.0)
    return prior, prior_strength(sample_var, dof, prior)


def pair_prior(mean_in: np.ndarray, mean_out: np.ndarray) -> float:
    """The pooled variance when every side has one shadow (N = 2): half the variance of IN − OUT.

    Var(x_in − x_out) = σ²_in + σ²_out + the spread of the membership shift
    over documents, so this errs large, the safe side for a variance.
    """
    return max(float(np.var(mean_in - mean_out)) / 2, VARIANCE_FLOOR)


def shrunk_moments(shadow: np.ndarray, shadow_in: np.ndarray,
                   features: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Means and shrunk variances of both sides: keys mu_in, var_in, mu_out, var_out.

    features: (n_docs, m) word-count features of the documents
    (``topicaudit.attacks.features.document_features``); without them the
    prior is always the pooled variance.
    """
    count_in, mu_in, ss_in = side_moments(shadow, shadow_in)
    count_out, mu_out, ss_out = side_moments(shadow, ~shadow_in)
    priors = []
    for count, ss in ((count_in, ss_in), (count_out, ss_out)):
        # With one shadow per side ν₀ is irrelevant: with c_d = 1 the posterior is the prior.
        priors.append(side_prior(count, ss, features) if (count > 1).any() else (pair_prior(mu_in, mu_out), 1.0))
    (prior_in, nu_in), (prior_out, nu_out) = priors
    return {
        "mu_in": mu_in, "var_in": posterior_variance(count_in, ss_in, prior_in, nu_in),
        "mu_out": mu_out, "var_out": posterior_variance(count_out, ss_out, prior_out, nu_out),
    }


def posterior_variance(count: np.ndarray, ss: np.ndarray, prior_var: float | np.ndarray, nu0: float) -> np.ndarray:
    """(ν₀ s₀² + S) / (ν₀ + c − 1): the shrunk variance of each document."""
    return (nu0 * prior_var + ss) / (nu0 + np.maximum(count - 1, 0))


def shrunk_online_scores(observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray,
                         features: np.ndarray | None = None) -> np.ndarray:
    """Online LiRA log N(obs; μ_in, s²_in) − log N(obs; μ_out, s²_out) with shrunk variances."""
    m = shrunk_moments(shadow, shadow_in, features)
    return _gaussian_logpdf(observed, m["mu_in"], m["var_in"]) - _gaussian_logpdf(observed, m["mu_out"], m["var_out"])


def shrunk_offline_scores(observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray,
                          features: np.ndarray | None = None) -> np.ndarray:
    """Offline LiRA z = (obs − μ_out)/s_out with the shrunk OUT variance (higher = member)."""
    m = shrunk_moments(shadow, shadow_in, features)
    return (observed - m["mu_out"]) / np.sqrt(m["var_out"])
