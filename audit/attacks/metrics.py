"""ROC, AUC and TPR at low FPR for membership scores.

Convention: "TPR at FPR ≤ f" is the largest TPR over all thresholds whose FPR
does not exceed f (so with 2,850 non-members, FPR ≤ 0.1% allows at most 2
false positives).
"""
from __future__ import annotations

import numpy as np

LOW_FPRS = (0.001, 0.01)


def roc_curve(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FPR, TPR and thresholds at every distinct score, highest threshold first.

    Starts at (0, 0) with threshold +inf, as ``sklearn.metrics.roc_curve``
    with ``drop_intermediate=False``. NaN scores count as the lowest.
    """
    labels = np.asarray(labels, dtype=bool)
    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-np.inf)
    order = np.argsort(-scores, kind="mergesort")
    scores, labels = scores[order], labels[order]
    last_of_run = np.r_[np.flatnonzero(np.diff(scores)), scores.size - 1]
    tps = np.cumsum(labels)[last_of_run]
    fps = (last_of_run + 1) - tps
    n_pos, n_neg = labels.sum(), labels.size - labels.sum()
    if n_pos == 0 or n_neg == 0:
        raise ValueError("ROC needs both members and non-members")
    fpr = np.r_[0.0, fps / n_neg]
    tpr = np.r_[0.0, tps / n_pos]
    return fpr, tpr, np.r_[np.inf, scores[last_of_run]]


def tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, max_fpr: float) -> float:
    return float(tpr[fpr <= max_fpr].max())


def auc(fpr: np.ndarray, tpr: np.ndarray) -> float:
    return float(np.trapezoid(tpr, fpr))


def summarize(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The metrics every attack reports in ``results.json``."""
    fpr, tpr, _ = roc_curve(scores, labels)
    summary = {"auc": auc(fpr, tpr)}
    for f in LOW_FPRS:
        summary[f"tpr_at_fpr_{f:g}"] = tpr_at_fpr(fpr, tpr, f)
    summary["balanced_accuracy"] = float(np.max((tpr + 1.0 - fpr) / 2.0))
    return summary
