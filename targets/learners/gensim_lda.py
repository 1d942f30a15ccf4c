"""gensim's ``LdaModel`` (online variational Bayes) as a learner.

Shadows of a model trained with gensim must be trained with gensim and the
same settings: LiRA compares the released Φ with models that differ only in
their training documents. Every setting that changes gensim's Φ is a
parameter here, with gensim's default, and is passed through unchanged;
``random_state`` is the fit's seed. gensim is deterministic for a given
``random_state`` in one process; the count matrix's columns play the role of
the dictionary's ids (so columns in the dictionary's id order reproduce a
user's model exactly, see tests/test_interop.py).
"""
from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.base import NO_GUARANTEE, Guarantee
from topicaudit.targets.optional import require
from topicaudit.targets.params import _is_real, choice, integer, iteration_count, non_negative, positive

# gensim.models.LdaModel keyword arguments this learner forwards (all that shape Φ).
SETTINGS = ("passes", "chunksize", "update_every", "alpha", "eta", "decay", "offset", "iterations",
            "gamma_threshold", "eval_every", "minimum_probability", "dtype")


def _check_prior(name: str, value, words: tuple[str, ...], length: int | None) -> None:
    """gensim's accepted forms of a Dirichlet prior, checked now rather than inside a Ray task."""
    if value is None and name == "eta" or isinstance(value, str) and value in words:
        return
    values = value if isinstance(value, (list, tuple)) else [value]
    if values and all(_is_real(v) and 0 < v < math.inf for v in values) and (
            not isinstance(value, (list, tuple)) or length is None or len(value) == length):
        return
    raise ValueError(f"{name} must be one of {', '.join(words)}, a finite number > 0 or a list of them"
                     + (f" (k = {length} of them)" if length else "") + f" (got {value!r})")


class GensimLDA:
    """LDA by gensim's ``LdaModel``; parameters and defaults are gensim's.

    alpha: "symmetric", "asymmetric", "auto", a number or a list of k numbers.
    eta: None (1/k), "auto", a number, or a list with one value per word.
    dtype: "float32" (gensim's default) or "float64".
    """

    def __init__(self, k: int, passes: int = 1, chunksize: int = 2000, update_every: int = 1,
                 alpha="symmetric", eta=None, decay: float = 0.5, offset: float = 1.0, iterations: int = 50,
                 gamma_threshold: float = 0.001, eval_every: int | None = 10, minimum_probability: float = 0.01,
                 dtype: str = "float32"):
        require("gensim", "gensim", "learner 'gensim-lda'")
        _check_prior("alpha", alpha, ("symmetric", "asymmetric", "auto"), k)
        _check_prior("eta", eta, ("symmetric", "auto"), None)
        choice("dtype", dtype, ("float32", "float64"))
        iteration_count("passes", passes)
        integer("chunksize", chunksize)
        integer("update_every", update_every, minimum=0)
        iteration_count("iterations", iterations)
        if eval_every is not None:
            integer("eval_every", eval_every, minimum=0)
        positive("decay", decay)
        positive("offset", offset)
        positive("gamma_threshold", gamma_threshold)
        non_negative("minimum_probability", minimum_probability)
        self.k = k
        self.passes, self.chunksize, self.update_every = passes, chunksize, update_every
        self.alpha, self.eta = alpha, eta
        self.decay, self.offset, self.iterations = decay, offset, iterations
        self.gamma_threshold, self.eval_every = gamma_threshold, eval_every
        self.minimum_probability, self.dtype = minimum_probability, dtype

    def settings(self) -> dict:
        return {name: getattr(self, name) for name in SETTINGS}

    def fit(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        """Φ (k × n_words, float32): gensim's ``get_topics()`` after training on X's rows."""

        from gensim.models import LdaModel  # optional dependency (extra "gensim")

        logging.getLogger("gensim").setLevel(logging.WARNING)  # per-pass INFO lines would flood Ray's logs
        X = sp.csr_matrix(X)
        bow = [list(zip(X.indices[a:b].tolist(), X.data[a:b].astype(np.int64).tolist()))
               for a, b in zip(X.indptr[:-1], X.indptr[1:])]
        eta = np.asarray(self.eta, dtype=np.float64) if isinstance(self.eta, (list, tuple)) else self.eta
        alpha = np.asarray(self.alpha, dtype=np.float64) if isinstance(self.alpha, (list, tuple)) else self.alpha
        id2word = {j: str(j) for j in range(X.shape[1])}
        model = LdaModel(bow, num_topics=self.k, id2word=id2word, passes=self.passes, chunksize=self.chunksize,
                         update_every=self.update_every, alpha=alpha, eta=eta, decay=self.decay,
                         offset=self.offset, iterations=self.iterations, gamma_threshold=self.gamma_threshold,
                         eval_every=self.eval_every, minimum_probability=self.minimum_probability,
                         random_state=int(seed) % 2**32, dtype=getattr(np, self.dtype))
        phi = model.get_topics().astype(np.float64)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE
