"""The attacks a run reports, each a score per document (higher = member).

Names are part of the results interface (keys of ``results.json["attacks"]``
and of ``scores.npz``).
"""
from __future__ import annotations

import numpy as np

from audit.epsilon import EpsilonBound, eps_lb_one_run
from audit.lira import offline_scores, online_scores

# Attacks whose ε lower bound a run reports (each at α/len, so all hold jointly).
BOUNDED_ATTACKS = ("lira_online", "lira_offline")

ATTACK_DESCRIPTIONS = {
    "lira_online": "online LiRA on ζ, per-document variances (the paper's attack)",
    "lira_online_global": "online LiRA on ζ, one variance per side pooled over documents",
    "lira_offline": "offline LiRA on ζ (OUT shadows only, one-sided), per-document variance",
    "lira_offline_global": "offline LiRA on ζ, pooled variance",
    "lira_online_neg_entropy": "online LiRA on the negative entropy of θ̂",
    "lira_online_logit_max": "online LiRA on logit(max θ̂)",
    "lira_online_std": "online LiRA on std(θ̂)",
    "threshold_max_theta": "Huang et al. threshold on max θ̂ under the target alone",
    "threshold_std_theta": "Huang et al. threshold on std θ̂ under the target alone",
    "threshold_entropy_theta": "Huang et al. threshold on entropy of θ̂ (lower = member)",
}


def attack_scores(target: dict[str, np.ndarray], shadow: dict[str, np.ndarray],
                  shadow_in: np.ndarray) -> dict[str, np.ndarray]:
    """Scores of every attack from target statistics (n_docs,) and shadow ones (n_shadows, n_docs)."""
    z_obs, z_shadow = target["zeta"], shadow["zeta"]
    scores = {
        "lira_online": online_scores(z_obs, z_shadow, shadow_in),
        "lira_online_global": online_scores(z_obs, z_shadow, shadow_in, global_variance=True),
        "lira_offline": offline_scores(z_obs, z_shadow, shadow_in),
        "lira_offline_global": offline_scores(z_obs, z_shadow, shadow_in, global_variance=True),
    }
    for stat in ("neg_entropy", "logit_max", "std"):
        scores[f"lira_online_{stat}"] = online_scores(target[stat], shadow[stat], shadow_in)
    scores["threshold_max_theta"] = target["max"]
    scores["threshold_std_theta"] = target["std"]
    scores["threshold_entropy_theta"] = target["neg_entropy"]
    return scores


def epsilon_lower_bounds(scores: dict[str, np.ndarray], is_member: np.ndarray, delta: float,
                         alpha: float) -> dict[str, EpsilonBound]:
    """One-run ε lower bounds (Steinke, Nasr & Jagielski 2023) for the main attacks.

    One-run auditing is the valid route for a single target training in which
    every document was included independently with probability ½ — exactly
    the plan's target membership. The α is split over the attacks (Bonferroni),
    so the largest of the bounds is itself a valid bound at confidence 1 − α.
    """
    share = alpha / len(BOUNDED_ATTACKS)
    return {name: eps_lb_one_run(scores[name], is_member, delta=delta, alpha=share)
            for name in BOUNDED_ATTACKS}
