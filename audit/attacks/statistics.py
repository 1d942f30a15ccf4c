"""Query statistics of a document under a released model.

ζ (the maximum log-likelihood over document-topic mixtures) is the paper's
statistic; the rest are functions of its maximiser θ̂ (paper Appendix C and
Huang et al. 2022). All are oriented so that higher means "more member-like"
except ``entropy``, kept raw because Huang et al. threshold it from below.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.zeta import solve_zeta

# Statistics computed for every (model, document).
STATISTICS = ("zeta", "neg_entropy", "logit_max", "std", "max")

# θ̂ can put all its mass on one topic; clip so logit(max θ̂) stays finite.
LOGIT_CLIP = 1e-12


def theta_statistics(theta: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics of θ̂ rows: negative entropy, logit of the max, std, max."""
    plogp = np.where(theta > 0, theta * np.log(np.where(theta > 0, theta, 1.0)), 0.0)
    top = np.clip(theta.max(axis=1), LOGIT_CLIP, 1.0 - LOGIT_CLIP)
    return {
        "neg_entropy": plogp.sum(axis=1),
        "logit_max": np.log(top) - np.log1p(-top),
        "std": theta.std(axis=1),
        "max": theta.max(axis=1),
    }


def model_statistics(phi: np.ndarray, X: sp.csr_matrix, tol: float = 1e-8) -> dict[str, np.ndarray]:
    """Every statistic of every document (rows of X) under one Φ (k × n_words)."""
    result = solve_zeta(phi, X, tol=tol)
    stats = {"zeta": result.zeta, **theta_statistics(result.theta)}
    stats["gap"] = result.gap
    return stats
