"""The ROC region an (ε, δ)-differentially-private release allows.

For any membership test against an (ε, δ)-DP mechanism (Kairouz, Oh &
Viswanath 2015, hypothesis-testing view of DP), every point of its ROC curve
satisfies both

    TPR ≤ e^ε · FPR + δ            and        1 − FPR ≤ e^ε · (1 − TPR) + δ,

the second being the first with the roles of IN and OUT swapped. Together:

    TPR ≤ min(e^ε · FPR + δ,  1 − e^{−ε} · (1 − δ − FPR)),   capped at 1.

An ROC point above this boundary is evidence against the claim (a
statistical test of it is :mod:`topicaudit.bounds.epsilon`'s job; the figure only shows
where the claim puts its ceiling).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from topicaudit.targets.privacy.guarantee import Adjacency, Basis, adjacency_of, basis_of


def dp_tpr_bound(fpr, epsilon: float, delta: float) -> np.ndarray:
    """The largest TPR an (ε, δ)-DP mechanism allows at each FPR.

    Parameters
    ----------
    fpr : array-like in [0, 1]
    epsilon : float ≥ 0 (``inf`` allows everything: the bound is 1)
    delta : float in [0, 1]

    Returns
    -------
    numpy.ndarray of the same shape as ``fpr``, in [0, 1].
    """
    fpr = np.asarray(fpr, dtype=np.float64)
    if not (epsilon >= 0) or not (0 <= delta <= 1):
        raise ValueError(f"need ε ≥ 0 and δ in [0, 1] (got ε={epsilon}, δ={delta})")
    if math.isinf(epsilon):
        return np.ones_like(fpr)
    first = math.exp(epsilon) * fpr + delta
    second = 1.0 - math.exp(-epsilon) * (1.0 - delta - fpr)
    return np.clip(np.minimum(first, second), 0.0, 1.0)


@dataclass(frozen=True)
class Claim:
    """The (ε, δ) a run's target claims, and whether it bounds document membership."""

    epsilon: float
    delta: float
    adjacency: Adjacency | None
    basis: Basis
    document_level: bool

    def label(self) -> str:
        adjacency = self.adjacency or "unspecified adjacency"
        basis = "" if self.basis in (Basis.THEOREM, Basis.NONE) else f", {self.basis}"
        return f"excluded by claimed ({self.epsilon:g}, {self.delta:g})-DP ({adjacency}{basis})"


def claim_of(results: dict[str, Any]) -> Claim | None:
    """The target's claim from ``results.json``; None when it claims no ε."""
    guarantee = results.get("target", {}).get("guarantee") or {}
    epsilon = guarantee.get("epsilon")
    if epsilon is None:
        return None
    adjacency = adjacency_of(guarantee.get("adjacency"))
    # A claim with no stated adjacency is read as document-level: the figure then shows what the
    # claim would have to mean to protect documents, and the label says the adjacency is unspecified.
    document_level = adjacency is None or adjacency.document_level
    return Claim(float(epsilon), float(guarantee.get("delta") or 0.0), adjacency,
                 basis_of(guarantee.get("basis")), document_level)
