"""Vocabulary steps: which corpus words a release covers.

A step maps the training rows of the count matrix to sorted corpus column ids.
Non-private steps live here; DP set-union steps will sit beside them.
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

import topicaudit.targets.privacy as privacy  # its events (dp-accounting) load when a guarantee is asked for
from topicaudit.targets.base import NO_GUARANTEE, Basis, Guarantee


class ObservedVocabulary:
    """Words that occur in the training documents — what ``CountVectorizer``
    fitted on the training texts gives, and what the paper's target releases."""

    name = "observed"

    def select(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        return np.flatnonzero(np.bincount(X.indices, minlength=X.shape[1]))

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE


@functools.cache
def public_vocabulary() -> Guarantee:
    """The whole corpus vocabulary does not depend on which documents train the model, so it spends no privacy:
    ε = 0 under any adjacency.

    Built on first use: its event is dp-accounting's, which the driver composing
    guarantees loads, and a Ray worker unpickling this step to fit never does.
    """
    return Guarantee(epsilon=0.0, delta=0.0, adjacency=None, basis=Basis.THEOREM,
                     accountant="data-independent (public vocabulary)", event=privacy.events.NO_OP_EVENT,
                     parameters={"step": "all"})


class CorpusVocabulary:
    """The whole corpus vocabulary, treated as public (no data-dependent choice).

    The audit's corpus is the universe the training set is drawn from, so its
    vocabulary is the same whichever documents are members: ε = 0. This is the
    step for learners with a public vocabulary (LP-LDA's presence vectors, a DP
    learner audited on its own).
    """

    name = "all"

    def select(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        return np.arange(X.shape[1])

    def guarantee(self) -> Guarantee:
        return public_vocabulary()
