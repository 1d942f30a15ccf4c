"""Planted-topic corpora and topic-recovery error, shared by the learners' tests."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment


def planted_corpus(seed=0, k=3, block=10, n_docs=300, doc_len=50, doc_alpha=0.5):
    """An LDA corpus whose k topics are uniform over disjoint blocks of ``block`` words.

    Returns (X, phi): counts (CSR, n_docs × k·block) and the true topics.
    """
    rng = np.random.default_rng(seed)
    V = k * block
    phi = np.zeros((k, V))
    for t in range(k):
        phi[t, t * block:(t + 1) * block] = 1.0 / block
    theta = rng.dirichlet(np.full(k, doc_alpha), n_docs)
    X = np.zeros((n_docs, V))
    for d in range(n_docs):
        for t in rng.choice(k, doc_len, p=theta[d]):
            X[d, rng.choice(V, p=phi[t])] += 1
    return sp.csr_matrix(X), phi


def matched_topic_errors(estimate, truth) -> np.ndarray:
    """Total-variation distance of each true topic to its learned one, topics matched by the Hungarian algorithm."""
    tv = 0.5 * np.abs(np.asarray(estimate, dtype=np.float64)[:, None, :] - truth[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(tv)
    return tv[rows, cols]


def assert_recovers(phi, truth, tolerance: float = 0.1) -> None:
    """Φ is a float32 topic matrix of the truth's shape whose matched topics are each within ``tolerance`` (TV)."""
    assert phi.dtype == np.float32 and phi.shape == truth.shape
    assert np.allclose(phi.sum(axis=1), 1, atol=1e-5)
    errors = matched_topic_errors(phi, truth)
    assert np.all(errors < tolerance), errors
