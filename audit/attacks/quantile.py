"""Quantile regression (Bertran et al. 2023) for topic models: a per-document threshold learnt from non-members.

Instead of fitting the target's architecture many times, learn how the
statistic of a *non-member* document depends on what anyone can see of the
document, and flag documents whose statistic under the target sits high
against that prediction. Here the statistic is the per-token log-likelihood
ζ/n (n = the document's tokens within the vocabulary) and the regressor is
scikit-learn's histogram gradient boosting with the quantile (pinball) loss.

What the attacker legitimately has, and what we use:

* **Features** of every candidate document, from its word counts alone:
  log n, log of its distinct words, mean log document frequency of its words
  (rarity) and log Σ_w n_dw² / count_w (short documents of rare words vary
  most between fits). Document frequencies are counted over the candidate
  corpus, which the auditor holds.
* **Labelled non-member statistics**: the reference (shadow) models' ζ on the
  documents they did *not* train on (``~shadow_in``). One training row per
  (shadow, OUT document). The target's statistics and membership never enter
  the fit, so the predicted thresholds cannot depend on the target's members.
* **ζ under reference models** (when every document has at least two OUT
  shadows, i.e. N ≥ 4 in complementary pairs): a training row's extra feature
  is the document's mean ζ/n over its *other* OUT shadows (leave one out, so a
  row never sees its own label); for the target it is the mean over all of
  them. With fewer shadows the regression uses the word-count features only
  — the zero-reference-model form: a single shadow's non-members suffice.

Score: (ζ_target/n − q̂₅₀(d)) / (q̂₉₀(d) − q̂₅₀(d)), the distance above the
predicted median in units of the predicted upper spread (higher = member).
Measurements and where it helps: docs/attacks.md.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from topicaudit.attacks.features import document_features

# The two quantile levels: the median is the centre, the 90% quantile the scale.
QUANTILES = (0.5, 0.9)
# Boosting iterations per quantile; chosen on PHEME and KOS seeds 0–1 (docs/attacks.md).
MAX_ITER = 100
# Floor on the predicted spread (per-token log-likelihood units) so a degenerate prediction cannot divide by 0.
SPREAD_FLOOR = 1e-9
# OpenMP threads of the boosting fits. Its many small parallel regions kept about one core busy with two threads
# on 2 cores, and the idle thread's waiting cost more than it gave: spinning against the Ray workers and other jobs
# on a busy machine (30 s instead of 1 at load 8), or, told to sleep (OMP_WAIT_POLICY=passive), waking for every
# region (20news scoring 11.7 s instead of 4.1 on a quiet machine). One thread never waits; the trees are the same.
THREADS = 1


def training_rows(shadow: np.ndarray, shadow_in: np.ndarray, features: np.ndarray,
                  n_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X_train, y_train, X_target): one row per (shadow, OUT document), y = ζ/n.

    Adds the leave-one-out mean ζ/n over the document's other OUT shadows as a
    feature when every document has at least two OUT shadows; X_target then
    carries the mean over all of them.
    """
    per_token = shadow / np.maximum(n_tokens, 1.0)
    out = ~shadow_in
    rows_m, rows_d = np.nonzero(out)
    y = per_token[rows_m, rows_d]
    x_train, x_target = features[rows_d], features
    count = out.sum(axis=0)
    if count.min() >= 2:
        total = np.where(out, per_token, 0.0).sum(axis=0)
        leave_one_out = (total[rows_d] - y) / (count[rows_d] - 1)
        x_train = np.column_stack([x_train, leave_one_out])
        x_target = np.column_stack([features, total / count])
    return x_train, y, x_target


def fit_quantiles(x_train: np.ndarray, y: np.ndarray, x_target: np.ndarray, quantiles=QUANTILES,
                  max_iter: int = MAX_ITER, seed: int = 0) -> list[np.ndarray]:
    """Predicted quantiles of the non-member statistic for each target row, one array per level."""
    from sklearn.ensemble import HistGradientBoostingRegressor  # heavy import, only when this attack runs

    if y.size == 0:
        raise ValueError("quantile regression needs at least one document outside a reference model")
    with threadpool_limits(limits=THREADS, user_api="openmp"):
        return [HistGradientBoostingRegressor(loss="quantile", quantile=q, max_iter=max_iter, random_state=seed)
                .fit(x_train, y).predict(x_target) for q in quantiles]


def quantile_scores(observed: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray, counts: sp.spmatrix,
                    max_iter: int = MAX_ITER, seed: int = 0, features: np.ndarray | None = None) -> np.ndarray:
    """(ζ_target/n − q̂₅₀)/(q̂₉₀ − q̂₅₀) per document from the shadows' non-member ζ and the word counts.

    features: ``document_features(counts)`` when the caller has them already (they are computed once per run).
    """
    n_tokens = np.asarray(counts.sum(axis=1), dtype=np.float64).ravel()
    features = document_features(counts) if features is None else features
    x_train, y, x_target = training_rows(shadow, shadow_in, features, n_tokens)
    median, upper = fit_quantiles(x_train, y, x_target, QUANTILES, max_iter, seed)
    return (observed / np.maximum(n_tokens, 1.0) - median) / np.maximum(upper - median, SPREAD_FLOOR)
