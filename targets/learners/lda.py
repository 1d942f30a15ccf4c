"""Non-private LDA learners: the model the paper attacks.

``lda`` is our compiled port of scikit-learn's batch variational Bayes
(``topicaudit.targets.learners.vb_lda``): same updates, same random draws, ~20x faster, so
hundreds of shadow models are cheap. ``sklearn-lda`` calls scikit-learn
itself, for checking that the port changes nothing in an audit.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.base import NO_GUARANTEE, Guarantee
from topicaudit.targets.params import choice, integer, positive
from topicaudit.targets.learners.vb_lda import fit_lda_sklearn, fit_lda_vb


class VariationalLDA:
    """LDA by batch variational Bayes with scikit-learn's defaults.

    Parameters
    ----------
    k : number of topics.
    backend : "compiled" (our numba port) or "sklearn".
    doc_topic_prior, topic_word_prior : Dirichlet priors; None means 1/k.
    max_iter : passes over the corpus (sklearn's default 10).
    """

    def __init__(self, k: int, backend: str = "compiled", doc_topic_prior: float | None = None,
                 topic_word_prior: float | None = None, max_iter: int = 10):
        choice("backend", backend, ("compiled", "sklearn"))
        positive("doc_topic_prior", doc_topic_prior, optional=True)
        positive("topic_word_prior", topic_word_prior, optional=True)
        integer("max_iter", max_iter, 1)
        self.k = k
        self.backend = backend
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.max_iter = max_iter

    def fit(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex) learned from X's rows."""
        fit = fit_lda_vb if self.backend == "compiled" else fit_lda_sklearn
        components = fit(X, self.k, seed, doc_topic_prior=self.doc_topic_prior,
                         topic_word_prior=self.topic_word_prior, max_iter=self.max_iter)
        return (components / components.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE
