"""The attacks a run reports, each a score per document (higher = member).

Names are part of the results interface (keys of ``results.json["attacks"]``
and of ``scores.npz``).
"""
from __future__ import annotations

import numpy as np

from topicaudit.attacks.features import document_features
from topicaudit.attacks.lira import offline_scores, online_scores
from topicaudit.attacks.quantile import quantile_scores
from topicaudit.attacks.rmia import rmia_scores
from topicaudit.attacks.variance import shrunk_offline_scores, shrunk_online_scores
from topicaudit.bounds.epsilon import EpsilonBound
from topicaudit.bounds.one_run import eps_lb_one_run

# Attacks whose ε lower bound a run reports (each at α/len, so all hold jointly).
BOUNDED_ATTACKS = ("lira_online", "lira_offline")

# Every attack's name; what each computes: docs/run-directory.md (the few-model ones: docs/attacks.md).
ATTACKS = ("lira_online", "lira_online_global", "lira_offline", "lira_offline_global", "lira_online_neg_entropy",
           "lira_online_logit_max", "lira_online_std", "threshold_max_theta", "threshold_std_theta",
           "threshold_entropy_theta", "lira_online_shrunk", "lira_offline_shrunk", "rmia_online", "rmia_offline",
           "quantile_regression")


def recommended_attack(n_shadows: int) -> str:
    """The attack to rank by with N shadow (reference) models; the rule and its measurements: docs/attacks.md.

    One model: only RMIA is defined (LiRA needs a shadow on each side of every
    document). Two or more: offline LiRA with shrunk variance, the best mean
    TPR at 0.1% FPR measured with 4–16 shadows, and with 128 within the seeds'
    spread of online LiRA at a higher AUC.
    """
    if n_shadows < 1:
        raise ValueError(f"need at least one shadow model (got {n_shadows})")
    return "rmia_online" if n_shadows == 1 else "lira_offline_shrunk"


def few_model_scores(z_obs: np.ndarray, z_shadow: np.ndarray, shadow_in: np.ndarray,
                     n_tokens: np.ndarray, features: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Scores of the few-model attacks; the LiRA ones only when every document has IN and OUT shadows.

    features: the documents' word-count features, for the shrunk variances' prior (docs/attacks.md).
    """
    scores = {}
    if shadow_in.any(axis=0).all() and (~shadow_in).any(axis=0).all():
        scores["lira_online_shrunk"] = shrunk_online_scores(z_obs, z_shadow, shadow_in, features)
        scores["lira_offline_shrunk"] = shrunk_offline_scores(z_obs, z_shadow, shadow_in, features)
    scores["rmia_online"] = rmia_scores(z_obs, z_shadow, shadow_in, n_tokens, online=True)[0]
    scores["rmia_offline"] = rmia_scores(z_obs, z_shadow, shadow_in, n_tokens, online=False)[0]
    return scores


def unknown_attacks(names) -> list[str]:
    return [name for name in names if name not in ATTACKS]


def bounded_attacks(names) -> list[str]:
    """The attacks whose ε bound a run reports: the usual ones among ``names``, else all of ``names``."""
    chosen = [name for name in BOUNDED_ATTACKS if name in names]
    return chosen or [name for name in names if name in ATTACKS]


# quantile_regression fits gradient boosting on every OUT (shadow, document) pair: ~1 s with 16 shadows on
# PHEME, ~6 s with 128, where LiRA is stronger anyway. Beyond this many shadows it is computed only when named.
QUANTILE_REGRESSION_MAX_SHADOWS = 16


def wants_quantile_regression(n_shadows: int, attacks) -> bool:
    """Whether a run computes quantile_regression (it needs the documents' word counts)."""
    return "quantile_regression" in (attacks or ()) or (
        n_shadows <= QUANTILE_REGRESSION_MAX_SHADOWS and (not attacks or "quantile_regression" in attacks))


def attack_scores(target: dict[str, np.ndarray], shadow: dict[str, np.ndarray],
                  shadow_in: np.ndarray, n_tokens: np.ndarray | None = None,
                  attacks=None, counts=None) -> dict[str, np.ndarray]:
    """Scores of every attack from target statistics (n_docs,) and shadow ones (n_shadows, n_docs).

    n_tokens: each document's tokens within the target's vocabulary (RMIA's
    per-token likelihood); without it the few-model attacks are left out.
    attacks: names to keep (default all).
    counts: the documents' word counts over the target's vocabulary (sparse,
    documents × words); with it the shrunk variances may follow the documents'
    features, and ``quantile_regression`` is added where
    ``wants_quantile_regression`` says so.
    """
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
    features = document_features(counts) if counts is not None else None
    if n_tokens is not None:
        scores.update(few_model_scores(z_obs, z_shadow, shadow_in, n_tokens, features))
    if counts is not None and wants_quantile_regression(shadow_in.shape[0], attacks):
        scores["quantile_regression"] = quantile_scores(z_obs, z_shadow, shadow_in, counts)
    return {name: s for name, s in scores.items() if not attacks or name in attacks}


def epsilon_lower_bounds(scores: dict[str, np.ndarray], is_member: np.ndarray, delta: float,
                         alpha: float, attacks=BOUNDED_ATTACKS) -> dict[str, EpsilonBound]:
    """One-run ε lower bounds (Steinke, Nasr & Jagielski 2023) for the main attacks on natural documents.

    One-run auditing is the valid route for a single target training in which
    every document was included independently with probability ½ — exactly
    the plan's target membership. The α is split over the attacks (Bonferroni),
    so the largest of the bounds is itself a valid bound at confidence 1 − α.
    """
    attacks = [name for name in attacks if name in scores]
    if not attacks:
        raise ValueError("no attack to bound")
    share = alpha / len(attacks)
    return {name: eps_lb_one_run(scores[name], is_member, delta=delta, alpha=share) for name in attacks}
