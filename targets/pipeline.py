"""A target is a release pipeline: a vocabulary step, then a learner (paper Alg. 1)."""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.base import NO_GUARANTEE, Guarantee, Release


# From strongest to weakest: a composition is only as well founded as its weakest part.
BASIS_ORDER = ("theorem", "paper-claim", "monitor")


def compose(*guarantees: Guarantee) -> Guarantee:
    """Basic sequential composition: ε and δ add; no claim if any part has none.

    The parts must share an adjacency (document-level DPSU with a word-level
    learner protects nothing at the document level); the basis is the weakest.
    A part with no adjacency (ε = 0, data-independent, like a public
    vocabulary) composes with any adjacency.
    """
    if any(math.isinf(g.epsilon) for g in guarantees):
        return NO_GUARANTEE
    adjacencies = {g.adjacency for g in guarantees if g.adjacency is not None}
    if len(adjacencies) > 1:
        raise ValueError(f"cannot compose guarantees with different adjacencies: {sorted(map(str, adjacencies))}")
    return Guarantee(
        epsilon=sum(g.epsilon for g in guarantees),
        delta=sum(g.delta for g in guarantees),
        adjacency=next(iter(adjacencies), None),
        basis=max((g.basis for g in guarantees), key=lambda b: BASIS_ORDER.index(b) if b in BASIS_ORDER else 0),
        accountant="basic composition",
        parameters={"parts": [g.to_json() for g in guarantees]},
    )


class Pipeline:
    """Select a vocabulary, restrict the counts to it, learn Φ over it."""

    def __init__(self, vocabulary_step, learner):
        self.vocabulary_step = vocabulary_step
        self.learner = learner

    def fit(self, X: sp.csr_matrix, seed: int, vocabulary: np.ndarray | None = None) -> Release:
        vocabulary_seed, learner_seed = (
            int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(2)
        )
        if vocabulary is None:
            vocabulary = self.vocabulary_step.select(X, vocabulary_seed)
        vocabulary = np.asarray(vocabulary, dtype=np.int64)
        if vocabulary.size == 0:
            # A DP vocabulary step may release no word at all: then the release
            # is empty (k × 0) and every document's likelihood is the same.
            return Release(phi=np.zeros((self.learner.k, 0), dtype=np.float32), vocabulary=vocabulary,
                           info={"empty_vocabulary": True})
        X = X[:, vocabulary].tocsr()
        # A learner with something to report beyond Φ (a privacy monitor's
        # trajectory) offers ``fit_with_info(X, seed) -> (phi, info)``; its
        # ``fit`` stays the plain protocol method. Other learners are unchanged.
        if hasattr(self.learner, "fit_with_info"):
            phi, info = self.learner.fit_with_info(X, learner_seed)
        else:
            phi, info = self.learner.fit(X, learner_seed), {}
        return Release(phi=phi, vocabulary=vocabulary, info=dict(info))

    def guarantee(self) -> Guarantee:
        return compose(self.vocabulary_step.guarantee(), self.learner.guarantee())
