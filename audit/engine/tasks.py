"""The work done inside Ray tasks, kept apart from the driver's imports.

A worker unpickles these functions by reference, importing this module: it
needs the learners and the ζ solver, not the corpus loaders, nltk or the
attack statistics the driver uses.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.statistics import model_statistics
from topicaudit.targets.base import Release


def fit_release(target, X: sp.csr_matrix, rows: np.ndarray, seed: int,
                vocabulary: np.ndarray | None) -> tuple[Release, float, str]:
    """The release, its fit seconds and the id of the Ray node that fitted it ("" outside Ray)."""
    start = time.perf_counter()
    release = target.fit(X[rows], seed, vocabulary)
    ray = sys.modules.get("ray")  # a Ray worker has it; a Ray-free caller need not import it
    node = ray.get_runtime_context().get_node_id() if ray is not None and ray.is_initialized() else ""
    return release, time.perf_counter() - start, node


def statistics_batch(X: sp.csr_matrix, releases: list[Release], tol: float) -> dict[str, np.ndarray]:
    rows = [model_statistics(r.dense_phi(X.shape[1]), X, tol) for r in releases]
    return {name: np.stack([row[name] for row in rows]) for name in rows[0]}
