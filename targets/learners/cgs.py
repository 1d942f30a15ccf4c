"""Collapsed Gibbs sampling for LDA (Griffiths & Steyvers 2004), non-private.

The second non-private learner (docs/algorithms.md#dp-cgs). Each token i of document
d with word w carries a topic z_i; a sweep visits every token in corpus order
(documents in row order, within a document its words in column order, a word
counted c times giving c consecutive tokens), removes it from the counts,
draws a new topic from the collapsed conditional

    p(z_i = t | rest) ∝ (n_dt + α) · (n_tw + β) / (n_t + Vβ)

by inverting the cumulative sum with one uniform, and adds it back.

Defaults and why
----------------
* ``alpha=None`` means α = 1/k, the same document-topic prior scikit-learn's
  (and so our ``lda`` learner's) variational LDA uses, which keeps the two
  non-private learners comparable. Griffiths & Steyvers' α = 50/k is tuned for
  long documents (hundreds of tokens); on tweets (~10 tokens, PHEME) it would
  be 10 pseudo-counts per topic for k = 5, swamping each document's own counts
  and flattening its topic mixture.
* ``beta=0.01``: the common sparse topic-word prior (Steyvers & Griffiths'
  later recommendation; their 2004 paper used 0.1), giving peaked topics.
* ``n_iter=200`` sweeps, ``n_avg=1``: Φ_kw = (n_kw + β) / (n_k + Vβ) from the
  final state. With ``n_avg = m > 1`` Φ is the mean of that estimate over the
  last m sweeps (the first n_iter − m sweeps are burn-in); one chain rarely
  switches labels after burn-in, so averaging reduces the sampling noise of Φ.

Randomness
----------
Everything comes from ``np.random.default_rng(seed)`` (PCG64): the initial
topics are ``rng.integers(0, k, n_tokens)``, then each sweep draws
``rng.random(n_tokens)`` uniforms and hands them to the compiled sweep, so a
seed fixes the result exactly (on a given machine; floating-point summation is
sequential, no parallelism) and the memory cost is one float64 per token.

Input: X (documents × words) of non-negative integer counts, any float/int
dtype; empty documents contribute no tokens and unused words get Φ_kw =
β/(n_k + Vβ). A corpus with no tokens gives uniform rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

from topicaudit.targets.base import NO_GUARANTEE, Guarantee
from topicaudit.targets.counts import check_counts
from topicaudit.targets.params import averaged_sweeps, iteration_count, positive, topic_count

__all__ = ["CollapsedGibbsLDA", "GibbsStart", "GibbsState", "check_priors", "random_start", "run_cgs",
           "tokens_from_counts"]


def tokens_from_counts(X) -> tuple[np.ndarray, np.ndarray]:
    """(doc ids, word ids), int32, one entry per token, in corpus order."""
    X = check_counts(X)
    counts = X.data.astype(np.int64)
    if max(X.shape) >= np.iinfo(np.int32).max or counts.sum() >= np.iinfo(np.int32).max:
        raise ValueError("corpus too large for int32 token arrays")
    nnz_per_doc = np.diff(X.indptr)
    doc_of_entry = np.repeat(np.arange(X.shape[0], dtype=np.int32), nnz_per_doc)
    doc = np.repeat(doc_of_entry, counts).astype(np.int32, copy=False)
    word = np.repeat(X.indices.astype(np.int32), counts).astype(np.int32, copy=False)
    return doc, word


@njit(cache=True)
def draw_topic(cum, k, u):
    """Inverse-CDF draw from unnormalised cumulative weights cum[:k] with one uniform u."""
    r = u * cum[k - 1]
    t = 0
    while t < k - 1 and cum[t] <= r:
        t += 1
    return t


@njit(cache=True)
def add_token(ndk, nwk, nk, d, w, t):
    """Count a token of word w in document d under topic t."""
    ndk[d, t] += 1
    nwk[w, t] += 1
    nk[t] += 1


@njit(cache=True)
def remove_token(ndk, nwk, nk, d, w, t):
    """Uncount a token of word w in document d from topic t (before it is drawn again)."""
    ndk[d, t] -= 1
    nwk[w, t] -= 1
    nk[t] -= 1


@njit(cache=True)
def lda_weights(ndk, nwk, nk, d, w, alpha, beta, vbeta, cum):
    """The collapsed Gibbs conditional of a token of word w in document d, cumulated into cum[:k]."""
    acc = 0.0
    for j in range(nk.shape[0]):
        acc += (ndk[d, j] + alpha) * (nwk[w, j] + beta) / (nk[j] + vbeta)
        cum[j] = acc


@njit(cache=True)
def _initial_counts(doc, word, z, ndk, nwk, nk):
    for i in range(z.shape[0]):
        t = z[i]
        ndk[doc[i], t] += 1
        nwk[word[i], t] += 1
        nk[t] += 1


@njit(cache=True)
def _sweep(doc, word, z, ndk, nwk, nk, alpha, beta, vbeta, u, cum):
    """One Gibbs sweep over all tokens, in place. nwk is (V, k) for locality."""
    k = nk.shape[0]
    for i in range(z.shape[0]):
        d = doc[i]
        w = word[i]
        remove_token(ndk, nwk, nk, d, w, z[i])
        lda_weights(ndk, nwk, nk, d, w, alpha, beta, vbeta, cum)
        t = draw_topic(cum, k, u[i])
        z[i] = t
        add_token(ndk, nwk, nk, d, w, t)


@dataclass
class GibbsState:
    """The sampler's final state and its Φ estimate.

    doc, word, z: per-token document id, word id and topic (int32).
    ndk (docs × k), nwk (words × k), nk (k,): counts (int32) of the final z.
    phi: (k, words) float64, rows on the simplex (see ``n_avg``).
    """

    doc: np.ndarray
    word: np.ndarray
    z: np.ndarray
    ndk: np.ndarray
    nwk: np.ndarray
    nk: np.ndarray
    phi: np.ndarray


def _phi(nwk: np.ndarray, nk: np.ndarray, beta: float) -> np.ndarray:
    n_words = nwk.shape[0]
    return ((nwk.T + beta) / (nk[:, None] + n_words * beta)).astype(np.float64)


def check_priors(k, alpha: float | None, beta: float, n_iter: int, n_avg: int) -> tuple[float, float]:
    """(α, β) as floats, α = 1/k when None; ValueError for a setting no sampler can run."""
    topic_count("k", k)
    positive("alpha", alpha, optional=True)
    positive("beta", beta)
    iteration_count("n_iter", n_iter, 0)
    averaged_sweeps(n_avg, n_iter)
    alpha = 1.0 / k if alpha is None else float(alpha)
    return alpha, float(beta)


class GibbsStart(NamedTuple):
    """Every Gibbs sampler's starting point: X's tokens with uniformly random topics.

    Built by ``random_start``, which draws exactly ``rng.integers(0, k,
    n_tokens)`` from the sampler's generator, so samplers that start here and
    then draw one block of uniforms per sweep make the same draws as ``run_cgs``.
    """

    doc: np.ndarray  # per-token document id (int32)
    word: np.ndarray  # per-token word id (int32)
    z: np.ndarray  # per-token topic (int32)
    ndk: np.ndarray  # docs × k counts of z
    nwk: np.ndarray  # words × k counts of z
    nk: np.ndarray  # k counts of z


def random_start(X, k: int, rng: np.random.Generator) -> GibbsStart:
    X = sp.csr_matrix(X)
    n_docs, n_words = X.shape
    doc, word = tokens_from_counts(X)
    z = rng.integers(0, k, size=doc.size).astype(np.int32)  # (doc is 1-D: size == shape[0])
    ndk = np.zeros((n_docs, k), dtype=np.int32)
    nwk = np.zeros((n_words, k), dtype=np.int32)
    nk = np.zeros(k, dtype=np.int32)
    _initial_counts(doc, word, z, ndk, nwk, nk)
    return GibbsStart(doc, word, z, ndk, nwk, nk)


def run_cgs(X, k: int, seed: int, alpha: float | None = None, beta: float = 0.01,
            n_iter: int = 200, n_avg: int = 1) -> GibbsState:
    """Run collapsed Gibbs sampling on the counts X; see the module docstring."""
    alpha, beta = check_priors(k, alpha, beta, n_iter, n_avg)
    rng = np.random.default_rng(seed)
    doc, word, z, ndk, nwk, nk = random_start(X, k, rng)
    n_tokens, n_words = z.shape[0], nwk.shape[0]

    cum = np.empty(k, dtype=np.float64)
    vbeta = n_words * beta
    phi_sum = np.zeros((k, n_words), dtype=np.float64)
    for sweep in range(n_iter):
        u = rng.random(n_tokens)
        _sweep(doc, word, z, ndk, nwk, nk, alpha, beta, vbeta, u, cum)
        if sweep >= n_iter - n_avg:
            phi_sum += _phi(nwk, nk, beta)
    phi = phi_sum / n_avg if n_iter else _phi(nwk, nk, beta)
    phi /= phi.sum(axis=1, keepdims=True)
    return GibbsState(doc=doc, word=word, z=z, ndk=ndk, nwk=nwk, nk=nk, phi=phi)


class CollapsedGibbsLDA:
    """LDA by collapsed Gibbs sampling (Griffiths & Steyvers 2004), compiled.

    Parameters
    ----------
    k : number of topics.
    alpha : document-topic Dirichlet prior; None means 1/k (as sklearn's LDA).
    beta : topic-word Dirichlet prior (default 0.01).
    n_iter : Gibbs sweeps over all tokens (default 200).
    n_avg : Φ is averaged over the last n_avg sweeps (default 1: final state).
    """

    def __init__(self, k: int, alpha: float | None = None, beta: float = 0.01,
                 n_iter: int = 200, n_avg: int = 1):
        check_priors(k, alpha, beta, n_iter, n_avg)
        iteration_count("n_iter", n_iter, 1)
        self.k = k
        self.alpha = alpha
        self.beta = beta
        self.n_iter = n_iter
        self.n_avg = n_avg

    def fit(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex) learned from X's rows."""
        state = run_cgs(X, self.k, seed, alpha=self.alpha, beta=self.beta,
                        n_iter=self.n_iter, n_avg=self.n_avg)
        phi = state.phi.astype(np.float32)
        return phi / phi.sum(axis=1, keepdims=True)

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE
