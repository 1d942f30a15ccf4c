"""tomotopy's ``LDAModel`` (collapsed Gibbs sampling in C++) as a learner.

The shadows of a tomotopy model are trained by tomotopy with the model's own
settings (priors, term weighting, word filters, iterations, hyper-parameter
optimisation). Training uses one worker: tomotopy is reproducible for a seed
only with ``workers=1`` (it warns otherwise), and a Ray task has one CPU.

Documents reach tomotopy as token lists built from the counts, each word
repeated by its count in column order, named by its column; a user who
trains tomotopy on the same token lists with the same seed gets the same Φ
(tests/test_interop.py).

tomotopy knows only the words of its training documents. A column no fit
document uses (or that ``min_cf``/``min_df``/``rm_top`` removed) gets the
prior's share, η / (n_k + Vη) with V all of X's columns, as gensim and the
other learners give a word of their dictionary that no document uses: a word
of the audited vocabulary must not drop out of ζ just because a shadow did not
see it (the user's model scores every word of its vocabulary). On the words
it saw this is tomotopy's (n_kw + η) renormalised over the V columns.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.base import NO_GUARANTEE, Guarantee
from topicaudit.targets.optional import require
from topicaudit.targets.params import choice, integer, iteration_count, positive

TERM_WEIGHTS = ("one", "idf", "pmi")
SETTINGS = ("alpha", "eta", "tw", "min_cf", "min_df", "rm_top", "iterations", "burn_in", "optim_interval")


def token_lists(X: sp.csr_matrix) -> list[list[str]]:
    """Each row of X as tokens: column j written as its zero-padded number, repeated by its count."""
    width = len(str(max(X.shape[1] - 1, 0)))
    names = [f"{j:0{width}d}" for j in range(X.shape[1])]
    docs = []
    for a, b in zip(X.indptr[:-1], X.indptr[1:]):
        doc: list[str] = []
        for j, c in zip(X.indices[a:b].tolist(), X.data[a:b].astype(np.int64).tolist()):
            doc.extend([names[j]] * c)
        docs.append(doc)
    return docs


class TomotopyLDA:
    """LDA by tomotopy's ``LDAModel``; constructor defaults are tomotopy's.

    alpha: a number or a list of k numbers; eta: a number; tw: "one", "idf" or
    "pmi" (term weighting); min_cf, min_df, rm_top: word filters; iterations:
    Gibbs sweeps given to ``train`` (200, as ``cgs``); burn_in, optim_interval:
    tomotopy's hyper-parameter optimisation schedule (it re-estimates alpha
    every ``optim_interval`` sweeps after ``burn_in``; 0 turns it off).
    """

    def __init__(self, k: int, alpha=0.1, eta: float = 0.01, tw: str = "one", min_cf: int = 0, min_df: int = 0,
                 rm_top: int = 0, iterations: int = 200, burn_in: int = 0, optim_interval: int = 10):
        require("tomotopy", "tomotopy", "learner 'tomotopy-lda'")
        if isinstance(alpha, (list, tuple)):
            if len(alpha) != k:
                raise ValueError(f"alpha must be a number or a list of k = {k} numbers (got {len(alpha)} numbers)")
            for a in alpha:
                positive("alpha", a)
        else:
            positive("alpha", alpha)
        positive("eta", eta)
        choice("tw", tw, TERM_WEIGHTS)
        for name, value in (("min_cf", min_cf), ("min_df", min_df), ("rm_top", rm_top), ("burn_in", burn_in),
                            ("optim_interval", optim_interval)):
            integer(name, value, minimum=0)
        iteration_count("iterations", iterations)
        self.k = k
        self.alpha, self.eta, self.tw = alpha, eta, tw
        self.min_cf, self.min_df, self.rm_top = min_cf, min_df, rm_top
        self.iterations, self.burn_in, self.optim_interval = iterations, burn_in, optim_interval

    def settings(self) -> dict:
        return {name: getattr(self, name) for name in SETTINGS}

    def fit(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        """Φ (k × n_words, float32) of a tomotopy model trained on X's rows (unseen words: the prior)."""
        import tomotopy as tp  # optional dependency (extra "tomotopy")

        X = sp.csr_matrix(X)
        alpha = [float(a) for a in self.alpha] if isinstance(self.alpha, (list, tuple)) else float(self.alpha)
        model = tp.LDAModel(k=self.k, alpha=alpha, eta=float(self.eta), tw=getattr(tp.TermWeight, self.tw.upper()),
                            min_cf=self.min_cf, min_df=self.min_df, rm_top=self.rm_top, seed=int(seed) % 2**32)
        for doc in token_lists(X):
            if doc:
                model.add_doc(doc)
        model.burn_in, model.optim_interval = self.burn_in, self.optim_interval
        model.train(self.iterations, workers=1, parallel=tp.ParallelScheme.DEFAULT)
        phi = np.full((self.k, X.shape[1]), float(model.eta), dtype=np.float64)  # unseen words: the prior
        columns = np.array([int(w) for w in model.used_vocabs], dtype=np.int64)
        if columns.size:  # n_kw + η on the words tomotopy saw
            phi[:, columns] = [model.get_topic_word_dist(t, normalize=False) for t in range(self.k)]
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE
