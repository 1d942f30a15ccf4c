"""The δ-tail test on a learner's release: a release that can hold only training words shows its δ.

The learner here is written as a user would: an LDA whose release is each
topic's top words, their probabilities noised and the word identities not,
as a published DP topic-mining mechanism does. Its claim (ε = 5, δ = 0.001)
is false for any ε: a canary's fresh word enters a top-n list only when the
canary trained. No score of the release can refute that (a handful of
released words prove little about ε); its δ can, once the learner declares
what its release can hold.
"""
from __future__ import annotations

import numpy as np
import pytest

from topicaudit.engine.check import check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.targets.learners.cgs import CollapsedGibbsLDA
from topicaudit.targets.privacy.guarantee import Basis, Guarantee
from topicaudit.targets.registry import LEARNERS

TOP_N = 10


class TopWordsLDA:
    """Each topic's TOP_N most probable words, their probabilities noised (Laplace), every other word 0."""

    def __init__(self, k: int, declare: bool = True, n_iter: int = 30):
        self.k, self.declare, self.n_iter = k, declare, n_iter

    def fit(self, X, seed: int) -> np.ndarray:
        phi = CollapsedGibbsLDA(self.k, n_iter=self.n_iter).fit(X, seed).astype(np.float64)
        rng = np.random.default_rng(seed)
        released = np.zeros_like(phi)
        for z in range(self.k):
            top = np.argsort(phi[z])[::-1][:TOP_N]
            released[z, top] = np.maximum(phi[z, top] + rng.laplace(0.0, 0.01, TOP_N), 1e-6)
        return (released / released.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self) -> Guarantee:
        declared = {"release_support": "training-words", "release_top_n": TOP_N} if self.declare else \
            {"release_top_n": TOP_N}
        return Guarantee(epsilon=5.0, delta=1e-3, adjacency="document", basis=Basis.PAPER_CLAIM,
                         accountant="the learner's own claim", parameters={"learner": "top-words", **declared})


@pytest.fixture
def top_words(monkeypatch):
    monkeypatch.setitem(LEARNERS, "top-words", (f"{__name__}:TopWordsLDA", {}))


def _audit(tmp_path, pheme_path, declare: bool):
    execute_run(config_from_dict({
        "corpus": {"path": str(pheme_path), "preprocess": False},
        "target": {"learner": "top-words", "k": 5, "vocabulary": "all", "params": {"declare": declare}},
        "attack": {"shadows": 0, "canaries": {"count": 200}},
        "output": str(tmp_path / f"declare-{declare}")}), quiet=True)
    return check_run(tmp_path / f"declare-{declare}")


def test_a_top_words_release_with_noiseless_word_identities_fails_its_delta(tmp_path, pheme_path, top_words):
    result = _audit(tmp_path, pheme_path, declare=True)
    assert result.violated and result.strongest_attack == "canaries/column:delta-tail"
    tail = result.bounds["canaries/column:delta-tail"].details
    assert tail["released"] >= 10 and tail["fresh_canaries"] == 200   # canaries long enough to enter a top-10
    assert "were released" in result.message() and "for every ε" in result.message()


def test_without_the_declaration_the_verdict_says_which_test_it_could_not_run(tmp_path, pheme_path, top_words):
    result = _audit(tmp_path, pheme_path, declare=False)
    assert not result.violated  # no score of ~200 canaries can refute ε = 5 here
    assert any("release_support" in note for note in result.unseen)
    assert "release_support" in result.message()
