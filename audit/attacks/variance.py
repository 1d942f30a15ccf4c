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
distribution. Everything here reads the shadows' statistics and their own
membership (``shadow_in``) only, never the target's. Derivation and
measurements: docs/attacks.md.
"""
from __future__ import annotations

import numpy as np
from scipy import optimize, stats

from topicaudit.attacks.lira import VARIANCE_FLOOR, _gaussian_logpdf

# Bounds of the prior strength ν₀ (degrees of freedom of the prior).
NU_RANGE = (0.5, 1e4)


def side_moments(shadow: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per document: count c, mean, and sum of squared deviations S over the shadows where mask holds."""
    count = mask.sum(axis=0)
    mean = np.where(mask, shadow, 0.0).sum(axis=0) / np.maximum(count, 1)
    ss = np.where(mask, (shadow - mean) ** 2, 0.0).sum(axis=0)
    return count, mean, ss


def prior_strength(sample_var: np.ndarray, dof: np.ndarray, prior_var: float) -> float:
    """ν₀ maximising Σ_d log F(s_d²/s₀²; dof_d, ν₀) over documents with dof > 0 and s_d² > 0."""
    use = (dof > 0) & (sample_var > 0)
    if not use.any():
        return NU_RANGE[1]  # no document varies: trust the pooled variance
    ratio, k = sample_var[use] / prior_var, dof[use]

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


def pair_prior(mean_in: np.ndarray, mean_out: np.ndarray) -> float:
    """The pooled variance when every side has one shadow (N = 2): half the variance of IN − OUT.

    Var(x_in − x_out) = σ²_in + σ²_out + the spread of the membership shift
    over documents, so this errs large, the safe side for a variance.
    """
    return max(float(np.var(mean_in - mean_out)) / 2, VARIANCE_FLOOR)


def shrunk_moments(shadow: np.ndarray, shadow_in: np.ndarray) -> dict[str, np.ndarray]:
    """Means and shrunk variances of both sides: keys mu_in, var_in, mu_out, var_out."""
    count_in, mu_in, ss_in = side_moments(shadow, shadow_in)
    count_out, mu_out, ss_out = side_moments(shadow, ~shadow_in)
    priors = []
    for count, ss in ((count_in, ss_in), (count_out, ss_out)):
        # With one shadow per side ν₀ is irrelevant: with c_d = 1 the posterior is the prior.
        priors.append(pooled_prior(count, ss) if (count > 1).any() else (pair_prior(mu_in, mu_out), 1.0))
    (prior_in, nu_in), (prior_out, nu_out) = priors
    return {
        "mu_in": mu_in, "var_in": posterior_variance(count_in, ss_in, prior_in, nu_in),
        "mu_out": mu_out, "var_out": posterior_variance(count_out, ss_out, prior_out, nu_out),
    }


def posterior_variance(count: np.ndarray, ss: np.ndarray, prior_var: float, nu0: float) -> np.ndarray:
    """(ν₀ s₀² + S) / (ν₀ + c − 1): the shrunk variance of each document."""
    return (nu0 * prior_var + ss) / (nu0 + np.maximum(count - 1, 0))


def shrunk_online_scores(observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray) -> np.ndarray:
    """Online LiRA log N(obs; μ_in, s²_in) − log N(obs; μ_out, s²_out) with shrunk variances."""
    m = shrunk_moments(shadow, shadow_in)
    return _gaussian_logpdf(observed, m["mu_in"], m["var_in"]) - _gaussian_logpdf(observed, m["mu_out"], m["var_out"])


def shrunk_offline_scores(observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray) -> np.ndarray:
    """Offline LiRA z = (obs − μ_out)/s_out with the shrunk OUT variance (higher = member)."""
    m = shrunk_moments(shadow, shadow_in)
    return (observed - m["mu_out"]) / np.sqrt(m["var_out"])
