"""Zhu et al. 2016 document-level DP collapsed Gibbs sampling (the paper's FDPTM learner).

Zhu, Li, Zhou, Xiong & Yuan, "Privacy-preserving topic model for tagging
recommender systems", KAIS 46(1), 2016 (doi 10.1007/s10115-015-0832-9), make
LDA training differentially private by letting Laplace noise enter the
collapsed Gibbs sampling distribution. Manzonelli, Zhang & Vadhan (2024, §4.4)
use it as M₂ of fully DP topic modelling (FDPTM, their Alg. 1) with privacy
parameter ε₂, after a document-level DP vocabulary step with ε₁ (``dpsu-gw``),
and claim (ε₁ + ε₂, δ₁)-DP for the release (Φ, vocabulary) by basic
composition (their Thm 4.1). docs/algorithms.md#dp-cgs lists the defects of the
public implementation; none is copied here (see "Defects not copied").

The mechanism as implemented, why the noise scale is 2L/ε, why the guarantee is a paper claim and
not a theorem, and the defects of the public code not copied: docs/algorithms.md#dp-cgs.

Randomness: ``np.random.SeedSequence(seed).spawn(3)`` gives (cap, sampler,
noise) streams; the sampler stream is used exactly as ``topicaudit.targets.learners.cgs.run_cgs``
uses its seed, so with the noise set to zero the result equals
``run_cgs(capped X, k, sampler seed, n_iter=n_iter)`` (tests check this).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

from topicaudit.targets.base import Adjacency, Basis, Guarantee, Neighbours
from topicaudit.targets.mechanisms import LaplaceNoise, Recorder
from topicaudit.targets.learners.cgs import (_sweep, add_token, draw_topic, random_start, remove_token,
                                            tokens_from_counts)
import topicaudit.targets.privacy as privacy  # its events (dp-accounting) load when a guarantee is asked for
from topicaudit.targets.params import integer, iteration_count, positive, topic_count

__all__ = ["ZhuDPCollapsedGibbsLDA", "DPGibbsState", "cap_document_lengths", "run_dp_cgs",
           "laplace_scale"]


def laplace_scale(epsilon: float, max_doc_length: int) -> float:
    """b = 2L/ε: Laplace scale for (n_tw, n_t) at document-level L1 sensitivity 2L."""
    return 2.0 * max_doc_length / epsilon


def cap_document_lengths(X, max_doc_length: int, rng: np.random.Generator) -> sp.csr_matrix:
    """Keep at most L token occurrences per document, a uniform random subset of a longer one.

    Vectorised: one uniform key per token, tokens ranked by key within their
    document, the L lowest kept (a uniformly random L-subset of the
    document's token multiset). Documents of length ≤ L come back unchanged.
    Returns a canonical CSR matrix of integer counts (float64), same shape.
    """
    X = sp.csr_matrix(X)
    doc, word = tokens_from_counts(X)  # validates: non-negative integer counts
    n_docs, n_words = X.shape
    keys = rng.random(doc.size)
    order = np.lexsort((keys, doc))
    lengths = np.bincount(doc, minlength=n_docs)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    rank = np.arange(doc.size) - starts[doc[order]]
    kept = order[rank < max_doc_length]
    capped = sp.csr_matrix((np.ones(kept.size), (doc[kept], word[kept])), shape=(n_docs, n_words))
    capped.sum_duplicates()
    capped.sort_indices()
    return capped


@njit(cache=True)
def _noisy_sweep(doc, word, z, ndk, nwk, nk, alpha, beta, vbeta, u, cum, noise_wk, noise_k):
    """The private sweep: like ``topicaudit.targets.learners.cgs._sweep`` with fixed noise on n_tw and n_t."""
    k = nk.shape[0]
    for i in range(z.shape[0]):
        d = doc[i]
        w = word[i]
        t = z[i]
        remove_token(ndk, nwk, nk, d, w, t)
        acc = 0.0
        for j in range(k):
            num = nwk[w, j] + noise_wk[w, j]
            if num < 0.0:
                num = 0.0
            den = nk[j] + noise_k[j]
            if den < 0.0:
                den = 0.0
            acc += (ndk[d, j] + alpha) * (num + beta) / (den + vbeta)
            cum[j] = acc
        t = draw_topic(cum, k, u[i])
        z[i] = t
        add_token(ndk, nwk, nk, d, w, t)


@dataclass
class DPGibbsState:
    """Final state of :func:`run_dp_cgs`.

    X: the capped counts the sampler ran on (docs × words, CSR).
    doc, word, z, ndk, nwk, nk: as ``topicaudit.targets.learners.cgs.GibbsState`` (true counts of the
        final z; the noise is never added to them).
    noise_wk (words × k), noise_k (k,): the Laplace noise of the private sweep.
    scale: its scale b = 2L/ε.
    phi: (k, words) float64, rows on the simplex.
    """

    X: sp.csr_matrix
    doc: np.ndarray
    word: np.ndarray
    z: np.ndarray
    ndk: np.ndarray
    nwk: np.ndarray
    nk: np.ndarray
    noise_wk: np.ndarray
    noise_k: np.ndarray
    scale: float
    phi: np.ndarray


def _check(k, epsilon, max_doc_length, alpha, beta, n_iter):
    topic_count("k", k)
    positive("epsilon", epsilon)
    integer("max_doc_length", max_doc_length)
    positive("alpha", alpha, optional=True)
    positive("beta", beta)
    iteration_count("n_iter", n_iter)  # ≥ 1: the last sweep is the private one


def run_dp_cgs(X, k: int, seed: int, epsilon: float, max_doc_length: int, alpha: float | None = None,
               beta: float = 0.01, n_iter: int = 200, noise: bool = True) -> DPGibbsState:
    """Run Zhu et al.'s DP-CGS on the counts X; the mechanism: docs/algorithms.md#dp-cgs.

    noise=False sets the Laplace noise to exactly zero (for tests: the result
    is then ordinary CGS on the capped corpus).
    """
    _check(k, epsilon, max_doc_length, alpha, beta, n_iter)
    alpha = 1.0 / k if alpha is None else float(alpha)
    beta = float(beta)
    cap_seq, gibbs_seq, noise_seq = np.random.SeedSequence(seed).spawn(3)
    X = cap_document_lengths(X, int(max_doc_length), np.random.default_rng(cap_seq))
    n_words = X.shape[1]
    rng = np.random.default_rng(gibbs_seq)  # used exactly as run_cgs uses it
    doc, word, z, ndk, nwk, nk = random_start(X, k, rng)
    n_tokens = z.shape[0]
    cum = np.empty(k, dtype=np.float64)
    vbeta = n_words * beta
    for _ in range(n_iter - 1):
        _sweep(doc, word, z, ndk, nwk, nk, alpha, beta, vbeta, rng.random(n_tokens), cum)

    scale = laplace_scale(float(epsilon), int(max_doc_length))
    noise_rng = np.random.default_rng(noise_seq)
    noise_wk = noise_rng.laplace(0.0, scale, (n_words, k))
    noise_k = noise_rng.laplace(0.0, scale, k)
    if not noise:
        noise_wk[:] = 0.0
        noise_k[:] = 0.0
    _noisy_sweep(doc, word, z, ndk, nwk, nk, alpha, beta, vbeta, rng.random(n_tokens), cum,
                 noise_wk, noise_k)

    weights = np.maximum(nwk.T + noise_wk.T, 0.0) + beta
    phi = weights / weights.sum(axis=1, keepdims=True)
    return DPGibbsState(X=X, doc=doc, word=word, z=z, ndk=ndk, nwk=nwk, nk=nk, noise_wk=noise_wk,
                        noise_k=noise_k, scale=scale, phi=phi)


class ZhuDPCollapsedGibbsLDA:
    """Zhu et al. 2016 DP collapsed Gibbs sampling with a document-length cap.

    Parameters
    ----------
    k : number of topics.
    epsilon : the claimed document-level ε (ε₂ of FDPTM). Noise scale 2L/ε.
    max_doc_length : L, the most tokens a document contributes (longer ones are
        subsampled, seeded). A public bound, not read off the data.
    alpha : document-topic prior; None means 1/k (as ``cgs`` and ``lda``).
    beta : topic-word prior (default 0.01, as ``cgs``).
    n_iter : sweeps in total; the last one is the private sweep (default 200).
    """

    def __init__(self, k: int, epsilon: float = 3.0, max_doc_length: int = 32, alpha: float | None = None,
                 beta: float = 0.01, n_iter: int = 200):
        _check(k, epsilon, max_doc_length, alpha, beta, n_iter)
        self.k = k
        self.epsilon = float(epsilon)
        self.max_doc_length = int(max_doc_length)
        self.alpha = alpha
        self.beta = beta
        self.n_iter = n_iter

    @property
    def noise_scale(self) -> float:
        return laplace_scale(self.epsilon, self.max_doc_length)

    def fit(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex) learned from X's rows; ``record`` receives the noisy
        counts n_tw + Lap (k × words, unclipped), the mechanism's output that Φ is made from."""
        state = run_dp_cgs(X, self.k, seed, self.epsilon, self.max_doc_length, alpha=self.alpha,
                           beta=self.beta, n_iter=self.n_iter)
        record = Recorder() if record is None else record
        m = self.mechanism()
        noisy = record.laplace((state.nwk + state.noise_wk).T, scale=m.scale, document_tokens=m.document_tokens,
                               noisy_sweep=True)
        weights = np.maximum(noisy, 0.0) + self.beta
        phi = (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)
        return phi / phi.sum(axis=1, keepdims=True)

    def mechanism(self) -> LaplaceNoise:
        """The claimed mechanism: one release of the counts with Laplace noise of scale b = 2L/ε, each document
        capped at L tokens, after a sweep that drew the tokens against the noisy counts."""
        return LaplaceNoise(self.noise_scale, self.max_doc_length, noisy_sweep=True)

    def guarantee(self) -> Guarantee:
        return Guarantee(
            epsilon=self.epsilon, delta=0.0, adjacency=Adjacency.DOCUMENT, basis=Basis.PAPER_CLAIM,
            # Sensitivity 2L covers replacing one document's L tokens by another's.
            neighbours=Neighbours.REPLACE_ONE,
            # What the paper claims the mechanism is: Laplace of scale 2L/ε on counts of L1 sensitivity 2L.
            event=privacy.events.laplace_event(self.noise_scale, 2.0 * self.max_doc_length),
            accountant="Zhu et al. 2016 (KAIS) claim: Laplace noise in the CGS conditional; not proven here",
            parameters={
                "learner": "dp-cgs", "max_doc_length": self.max_doc_length,
                "noise_scale": self.noise_scale, "noise": "Lap(2L/ε) on every n_tw and n_t, once, final sweep",
                "n_iter": self.n_iter, "private_sweeps": 1,
                "why_not_a_theorem": ("the sensitivity 2L holds only if every other token keeps its topic; "
                                      "the noiseless burn-in depends on the whole corpus"),
            },
        )

    def __repr__(self) -> str:
        return (f"ZhuDPCollapsedGibbsLDA(k={self.k}, epsilon={self.epsilon}, "
                f"max_doc_length={self.max_doc_length}, n_iter={self.n_iter})")
