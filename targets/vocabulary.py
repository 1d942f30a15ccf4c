"""Vocabulary steps: which corpus words a release covers.

A step maps the training rows of the count matrix to sorted corpus column ids.
Non-private steps live here; DP set-union steps will sit beside them.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from targets.base import NO_GUARANTEE, Guarantee


class ObservedVocabulary:
    """Words that occur in the training documents — what ``CountVectorizer``
    fitted on the training texts gives, and what the paper's target releases."""

    name = "observed"

    def select(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        return np.flatnonzero(np.bincount(X.indices, minlength=X.shape[1]))

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE


class CorpusVocabulary:
    """The whole corpus vocabulary, treated as public (no data-dependent choice)."""

    name = "all"

    def select(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        return np.arange(X.shape[1])

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE
