"""Non-private LDA learners: the model the paper attacks.

``lda`` is our compiled port of scikit-learn's batch variational Bayes
(``topicaudit.targets.learners.vb_lda``): same updates, same random draws, ~20x faster, so
hundreds of shadow models are cheap. ``sklearn-lda`` calls scikit-learn
itself, for checking that the port changes nothing in an audit.
"""
from __future__ import annotations

from typing import TypedDict

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.base import NO_GUARANTEE, Guarantee
from topicaudit.targets.params import choice, integer, iteration_count, non_negative, positive
from topicaudit.targets.learners.vb_lda import fit_lda_sklearn, fit_lda_vb


class _Settings(TypedDict):
    """The settings both backends take."""

    doc_topic_prior: float | None
    topic_word_prior: float | None
    max_iter: int
    mean_change_tol: float
    max_doc_update_iter: int


class VariationalLDA:
    """LDA by variational Bayes with scikit-learn's defaults.

    Parameters
    ----------
    k : number of topics.
    backend : "compiled" (our numba port) or "sklearn".
    doc_topic_prior, topic_word_prior : Dirichlet priors; None means 1/k.
    max_iter : passes over the corpus (sklearn's default 10).
    mean_change_tol, max_doc_update_iter : the E-step's stopping rule (sklearn's 1e-3 and 100).
    learning_method : "batch" (both backends) or "online" (scikit-learn's online VB; the sklearn backend only),
        with ``learning_decay``, ``learning_offset``, ``batch_size`` and ``total_samples`` as in scikit-learn
        (they are used only when online).
    """

    def __init__(self, k: int, backend: str = "compiled", doc_topic_prior: float | None = None,
                 topic_word_prior: float | None = None, max_iter: int = 10, mean_change_tol: float = 1e-3,
                 max_doc_update_iter: int = 100, learning_method: str = "batch", learning_decay: float = 0.7,
                 learning_offset: float = 10.0, batch_size: int = 128, total_samples: float = 1e6):
        choice("backend", backend, ("compiled", "sklearn"))
        positive("doc_topic_prior", doc_topic_prior, optional=True)
        positive("topic_word_prior", topic_word_prior, optional=True)
        iteration_count("max_iter", max_iter, 1)
        positive("mean_change_tol", mean_change_tol)
        iteration_count("max_doc_update_iter", max_doc_update_iter, 1)
        choice("learning_method", learning_method, ("batch", "online"))
        if learning_method == "online" and backend == "compiled":
            raise ValueError("learning_method='online' is scikit-learn's online VB, which the compiled learner lda "
                             "does not implement: use the learner sklearn-lda")
        positive("learning_decay", learning_decay)
        non_negative("learning_offset", learning_offset)
        integer("batch_size", batch_size, 1)
        positive("total_samples", total_samples)
        self.k = k
        self.backend = backend
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.max_iter = max_iter
        self.mean_change_tol = mean_change_tol
        self.max_doc_update_iter = max_doc_update_iter
        self.learning_method = learning_method
        self.learning_decay = learning_decay
        self.learning_offset = learning_offset
        self.batch_size = batch_size
        self.total_samples = total_samples

    def fit(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex) learned from X's rows."""
        common: _Settings = {"doc_topic_prior": self.doc_topic_prior, "topic_word_prior": self.topic_word_prior,
                             "max_iter": self.max_iter, "mean_change_tol": self.mean_change_tol,
                             "max_doc_update_iter": self.max_doc_update_iter}
        if self.backend == "compiled":
            components = fit_lda_vb(X, self.k, seed, **common)
        elif self.learning_method == "batch":
            components = fit_lda_sklearn(X, self.k, seed, **common)
        else:
            components = fit_lda_sklearn(
                X, self.k, seed, **common, learning_method="online", learning_decay=self.learning_decay,
                learning_offset=self.learning_offset, batch_size=self.batch_size, total_samples=self.total_samples)
        return (components / components.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE
