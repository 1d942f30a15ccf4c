"""What anyone can see of a document from its word counts alone: the features both few-model attacks regress on.

Quantile regression predicts a non-member's ζ from them, and shrunk-variance
LiRA predicts how much a document's ζ varies between fits (short documents
of rare words vary most). Document frequencies are counted over the given
documents, which the auditor holds.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

FEATURES = ("log_tokens", "log_distinct_words", "mean_log_document_frequency", "log_sum_squared_count_over_word_count")


def document_features(counts: sp.spmatrix) -> np.ndarray:
    """(n_docs, 4) word-count features of each document (rows of ``counts``, documents × vocabulary); see FEATURES."""
    X = sp.csr_matrix(counts, dtype=np.float64)
    n_docs = X.shape[0]
    present = (X > 0).astype(np.float64)
    tokens = np.asarray(X.sum(axis=1)).ravel()
    distinct = np.asarray(present.sum(axis=1)).ravel()
    document_frequency = np.asarray(present.sum(axis=0)).ravel()
    word_count = np.asarray(X.sum(axis=0)).ravel()
    log_df = np.log(np.maximum(document_frequency, 1) / max(n_docs, 1))
    mean_log_df = (present @ log_df) / np.maximum(distinct, 1)
    squared = X.multiply(X).tocsr() @ (1.0 / np.maximum(word_count, 1))
    return np.column_stack([np.log1p(tokens), np.log1p(distinct), mean_log_df, np.log(squared + 1e-12)])
