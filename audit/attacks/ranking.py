"""Ranking candidate documents by membership evidence (``topicaudit audit``): no ground truth, an order.

The scores are the registry's attacks (``topicaudit.attacks.registry``) under
their own names. An offline LiRA attack's score is z = (ζ − μ_out)/σ_out; a
ranking reports it as the one-sided p-value P(ζ_OUT ≥ ζ) = 1 − Φ(z), in a
column named after the attack with ``_p`` appended, and orders by z, which
keeps the order of p-values that round to 0.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtr

from topicaudit.attacks.registry import (AttackInputs, compute_attacks, recommended_attack,
                                         requested_attacks)
from topicaudit.errors import UserError

# The attacks a ranking may be ordered by, with their labels.
RANKINGS = {
    "lira_offline": "offline LiRA p-value (OUT shadows, per-document variance)",
    "lira_offline_global": "offline LiRA p-value (OUT shadows, pooled variance)",
    "lira_online": "online LiRA log-likelihood ratio (per-document variances)",
    "lira_online_global": "online LiRA log-likelihood ratio (pooled variances)",
    "lira_offline_shrunk": "offline LiRA p-value (OUT shadows, variance shrunk towards a prior)",
    "lira_online_shrunk": "online LiRA log-likelihood ratio (variances shrunk towards a prior)",
    "rmia_online": "RMIA log likelihood ratio (per token, all shadows)",
    "rmia_offline": "RMIA offline log likelihood ratio (per token, OUT shadows and fitted a)",
    "quantile_regression": "quantile regression (per-token ζ against the predicted non-member quantiles)",
}
OFFLINE = ("lira_offline", "lira_offline_global", "lira_offline_shrunk")
# The names --rank-by and [ranking] by took before they became the attacks' own names.
RENAMED = {"offline": "lira_offline", "offline-global": "lira_offline_global", "online": "lira_online",
           "online-global": "lira_online_global", "offline-shrunk": "lira_offline_shrunk",
           "online-shrunk": "lira_online_shrunk", "rmia-online": "rmia_online", "rmia-offline": "rmia_offline",
           "quantile": "quantile_regression"}
DEFAULT_RANKING = "recommended"
RECOMMENDATION_RULE = ("1 shadow: rmia_online; 2 or more: lira_offline_shrunk (offline LiRA with shrunk variance; "
                       "docs/attacks.md)")
RANKING_ORDER = ("strongest evidence first: by the chosen score (offline: smallest p-value first, ordered by z so "
                 "p-values that round to 0 keep their order; online: largest log-ratio first), ties by the other "
                 "family (online log-ratio, or offline z), then by candidate position")
# Reference documents whose RMIA ratios form the population (a seeded sample when there are more).
POPULATION_SIZE = 1000

# Columns of scores.csv, in order ("text" only with show_text); after zeta, one per attack.
SCORE_COLUMNS = ("rank", "candidate", "id", "n_tokens", "zeta", "lira_online", "lira_online_global",
                 "lira_offline_p", "lira_offline_global_p", "lira_online_shrunk", "lira_offline_shrunk_p",
                 "rmia_online", "rmia_offline", "rmia_population", "quantile_regression")
# After the attack columns: each offline p-value as log10 p (exact where p underflows to 0), and the ranking
# score's standing among the sampled reference documents.
LOG10_P_COLUMNS = tuple(f"{name}_log10_p" for name in OFFLINE)
EXTRA_COLUMNS = LOG10_P_COLUMNS + ("beyond_reference",)
COLUMN_DESCRIPTIONS = {
    "rank": "1 = strongest membership evidence, by the ranking score",
    "candidate": "0-based position of the document in the candidates input",
    "id": "the input's own name of the document: file path in a folder, archive member of 20news, "
          "docID of UCI, list position of JSON",
    "n_tokens": "tokens of the document within the vocabulary (the words ζ is computed on)",
    "zeta": "ζ = max over θ of Σ_w x_w log(θ·Φ_w) under the user's Φ",
    "lira_online": "online LiRA log N(ζ; μ_in, σ_in²) − log N(ζ; μ_out, σ_out²), per-document variances "
                   "(> 0: ζ looks more like the IN shadows')",
    "lira_online_global": "the same with one variance per side pooled over candidates",
    "lira_offline_p": "offline LiRA one-sided p-value P(ζ_OUT ≥ ζ) under the OUT shadows' Gaussian, per-document "
                      "variance (small = likely member); not corrected for multiple testing; values far below "
                      "1/(number of OUT shadows) extrapolate the Gaussian's tail: rank by them, do not read them "
                      "literally",
    "lira_offline_global_p": "the same with the pooled OUT variance",
    "lira_online_shrunk": "online LiRA log-likelihood ratio with each variance shrunk towards a prior (pooled, or "
                          "regressed on the documents' word-count features; Bayesian; strong with few shadows)",
    "lira_offline_shrunk_p": "offline LiRA p-value with the OUT variance shrunk towards a prior (as "
                             "lira_online_shrunk)",
    "rmia_online": "RMIA log ratio: log of the per-token likelihood under Φ over its mean under the shadows",
    "rmia_offline": "RMIA offline log ratio: over the OUT shadows' mean, the IN mean approximated with the fitted a",
    "rmia_population": "RMIA score: fraction of sampled reference documents z (taken as non-members of Φ) whose "
                       "rmia_online ratio this candidate's reaches (1 = beyond every one)",
    "quantile_regression": "quantile regression: per-token ζ under Φ above the non-member median that gradient "
                           "boosting predicts from word counts and the OUT shadows' ζ, in units of the predicted "
                           "90%−50% spread; computed with up to 16 shadows or when ranked by (else empty)",
    "lira_offline_log10_p": "log10 of lira_offline_p, computed from z (exact where the p-value underflows to 0): "
                            "-12 is p = 1e-12",
    "lira_offline_global_log10_p": "log10 of lira_offline_global_p (as lira_offline_log10_p)",
    "lira_offline_shrunk_log10_p": "log10 of lira_offline_shrunk_p (as lira_offline_log10_p)",
    "beyond_reference": "fraction of the sampled reference documents (taken as non-members of the model) whose "
                        "ranking score, computed the same way under the model, this candidate's exceeds (1 = beyond "
                        "every one; ties count half); empty without reference documents to compare with",
    "text": "the document's text as read (cells starting with = + - @ or a tab are prefixed with ' so "
            "spreadsheets do not run them as formulas)",
}
# Per-document variances rest on N/2 shadows a side: below this many shadows they are too noisy to read.
RELIABLE_PER_DOCUMENT_SHADOWS = 16
PER_DOCUMENT_COLUMNS = ("lira_online", "lira_offline_p")


def column(attack: str) -> str:
    """The scores.csv column of an attack: its name, with ``_p`` for an offline LiRA p-value."""
    return attack + "_p" if attack in OFFLINE else attack


def check_rank_by(rank_by: str, where: str) -> str:
    """A ranking name (``recommended`` or an attack of RANKINGS); an old name is refused with its new one."""
    if rank_by == DEFAULT_RANKING or rank_by in RANKINGS:
        return rank_by
    if rank_by in RENAMED:
        raise UserError(f"{where} {rank_by!r}: rankings are now named after their attacks; use "
                        f"{RENAMED[rank_by]!r}")
    raise UserError(f"unknown ranking {rank_by!r} ({where}); choose recommended or one of {', '.join(RANKINGS)}")


def resolve_ranking(rank_by: str, n_shadows: int) -> tuple[str, bool]:
    """(attack to rank by, whether it was chosen by the recommendation rule)."""
    if rank_by != DEFAULT_RANKING:
        return rank_by, False
    return recommended_attack(n_shadows), True


def candidate_scores(inputs: AttackInputs, rank_by: str) -> dict[str, np.ndarray]:
    """Every attack a ranking reports, by attack name (offline ones as z); the ranked attack always included.

    quantile_regression is computed as a run computes it (up to 16 shadows)
    or when it is ranked by; rmia_population when there is a population.
    Columns that are not computed are NaN.
    """
    n_shadows, n = inputs.shadow_in.shape
    names = [name for name in requested_attacks(n_shadows) if name in RANKINGS or name == "rmia_population"]
    scores = compute_attacks(inputs, names + [rank_by])
    for name in ("rmia_population", "quantile_regression"):
        scores.setdefault(name, np.full(n, np.nan))
    return scores


def score_columns(scores: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The attack columns of scores.csv (after ``zeta``) from ``candidate_scores``."""
    return {column(name): ndtr(-values) if name in OFFLINE else values for name, values in scores.items()}


def log10_p_columns(scores: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """log10 of each offline p-value, from its z (``log_ndtr``: no underflow), by EXTRA_COLUMNS name."""
    return {f"{name}_log10_p": log_ndtr(-scores[name]) / math.log(10) for name in OFFLINE if name in scores}


def beyond(scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """For each score, the fraction of ``reference`` scores below it (ties count half); NaN scores give NaN."""
    reference = np.sort(np.asarray(reference, dtype=np.float64)[np.isfinite(reference)])
    scores = np.asarray(scores, dtype=np.float64)
    if not reference.size:
        return np.full(scores.shape, np.nan)
    below = np.searchsorted(reference, scores, side="left")
    ties = np.searchsorted(reference, scores, side="right") - below
    out = (below + ties / 2) / reference.size
    return np.where(np.isnan(scores), np.nan, out)


def ranking(scores: dict[str, np.ndarray], rank_by: str) -> np.ndarray:
    """Row order of the candidates: see ``RANKING_ORDER``."""
    other = "lira_offline" if rank_by.startswith("lira_online") else "lira_online"
    return np.lexsort((np.arange(scores[rank_by].size), -scores[other], -scores[rank_by]))


def unreliable_columns(n_shadows: int) -> dict[str, str]:
    """Score columns that cannot be read literally with this many shadows, and why (docs/user-audit.md)."""
    why = {"lira_offline_p": "not calibrated p-values (the Gaussian's tail is extrapolated far beyond the shadows): "
                             "rank by them, never count or correct them for multiple testing",
           "lira_offline_global_p": "as lira_offline_p", "lira_offline_shrunk_p": "as lira_offline_p"}
    if n_shadows < RELIABLE_PER_DOCUMENT_SHADOWS:
        few = (f"per-document variances from {n_shadows // 2} shadow(s) a side: values like LLR 1e14 or p = 0 "
               "are artefacts of a variance estimated near 0")
        why.update({"lira_online": few, "lira_offline_p": few + "; " + why["lira_offline_p"]})
    return why
