"""Zhao et al. HDP-LDA: word-level DP collapsed Gibbs sampling with clipped counts.

Zhao, Ren, Yang, Han, Zhao & Yang, "Latent Dirichlet allocation model
training with differential privacy" (2021; arXiv 2010.04391; the 2019 IJCAI
workshop paper is its first part). HDP-LDA protects the
intermediate statistics of CGS training: every iteration releases the
topic-word counts with Laplace(2/ε_l) noise, and every topic draw uses topic-word
counts clipped at C, whose inherent randomness costs at most 2 ln(C/β + 1)
per iteration. Over T iterations (docs/algorithms.md#hdp-lda)

    ε_g = T (ε_l + 2 ln(C/β + 1)).

The mechanism as implemented, why it is ε_g-DP at word level (substitution), and the defects of
the authors' repository not copied: docs/algorithms.md#hdp-lda.

Randomness: ``SeedSequence(seed).spawn(2)`` gives (sampler, noise) streams;
the sampler stream is used as ``topicaudit.targets.learners.cgs.run_cgs`` uses its seed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

from topicaudit.targets.base import Adjacency, Basis, Guarantee
from topicaudit.targets.mechanisms import LaplaceNoise, Recorder
from topicaudit.targets.learners.cgs import add_token, draw_topic, random_start, remove_token
import topicaudit.targets.privacy as privacy  # its events (dp-accounting) load when a guarantee is asked for
from topicaudit.targets.params import iteration_count, positive, topic_count

__all__ = ["ZhaoHDPLDA", "HDPState", "run_hdp_lda", "epsilon_g"]


def epsilon_g(n_iter: int, epsilon_l: float, clip: float, beta: float) -> float:
    """Zhao et al.'s total ε_g = T (ε_l + 2 ln(C/β + 1)) over T iterations."""
    return n_iter * (epsilon_l + 2.0 * math.log(clip / beta + 1.0))


@njit(cache=True)
def _hdp_sweep(doc, word, z, ndk, nwk, nk, released, informed, alpha, beta, vbeta, clip, u, cum):
    """One HDP-LDA sweep in place; ``released`` (words × k) is read, never written."""
    k = nk.shape[0]
    for i in range(z.shape[0]):
        d = doc[i]
        w = word[i]
        t = z[i]
        remove_token(ndk, nwk, nk, d, w, t)
        acc = 0.0
        for j in range(k):
            g = beta
            if informed:
                c = released[w, j]
                if j == t:
                    c -= 1.0
                if c < 0.0:
                    c = 0.0
                elif c > clip:
                    c = clip
                g = c + beta
            acc += (ndk[d, j] + alpha) * g / (nk[j] + vbeta)
            cum[j] = acc
        t = draw_topic(cum, k, u[i])
        z[i] = t
        add_token(ndk, nwk, nk, d, w, t)


@dataclass
class HDPState:
    """Final state of :func:`run_hdp_lda`.

    doc, word, z, ndk, nwk, nk: tokens, assignments and their exact counts
        (int32; nwk is words × k).
    released: the last release ñ (words × k, float64), from which Φ comes.
    phi: (k, words) float64, rows on the simplex.
    """

    doc: np.ndarray
    word: np.ndarray
    z: np.ndarray
    ndk: np.ndarray
    nwk: np.ndarray
    nk: np.ndarray
    released: np.ndarray
    phi: np.ndarray


def _check(k, epsilon_l, clip, alpha, beta, n_iter):
    topic_count("k", k)
    positive("epsilon_l", epsilon_l)
    positive("clip (C)", clip)
    positive("alpha", alpha, optional=True)
    positive("beta", beta)
    iteration_count("n_iter", n_iter)


def run_hdp_lda(X, k: int, seed: int, epsilon_l: float = 1.0, clip: float = 10.0, alpha: float | None = None,
                beta: float = 0.01, n_iter: int = 200, record: Recorder | None = None) -> HDPState:
    """Run HDP-LDA on the counts X; the mechanism: docs/algorithms.md#hdp-lda.

    record: receives every iteration's release (``Recorder.laplace``); the next sweep uses what it returns.
    """
    _check(k, epsilon_l, clip, alpha, beta, n_iter)
    alpha = 1.0 / k if alpha is None else float(alpha)
    beta = float(beta)
    gibbs_seq, noise_seq = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(gibbs_seq)
    noise_rng = np.random.default_rng(noise_seq)
    doc, word, z, ndk, nwk, nk = random_start(X, k, rng)
    n_tokens, n_words = z.shape[0], nwk.shape[0]
    cum = np.empty(k, dtype=np.float64)
    vbeta = n_words * beta
    scale = 2.0 / float(epsilon_l)
    released = np.zeros((n_words, k), dtype=np.float64)
    record = Recorder() if record is None else record
    for sweep in range(n_iter):
        _hdp_sweep(doc, word, z, ndk, nwk, nk, released, sweep > 0, alpha, beta, vbeta, float(clip),
                   rng.random(n_tokens), cum)
        noisy = nwk + noise_rng.laplace(0.0, scale, (n_words, k))  # a fresh array: n stays exact
        released = np.ascontiguousarray(record.laplace(noisy.T, scale=scale, document_tokens=1,
                                                       releases=n_iter).T)
    weights = np.maximum(released.T, 0.0) + beta
    phi = weights / weights.sum(axis=1, keepdims=True)
    return HDPState(doc=doc, word=word, z=z, ndk=ndk, nwk=nwk, nk=nk, released=released, phi=phi)


class ZhaoHDPLDA:
    """Zhao et al.'s HDP-LDA (word-level DP), without the repository's defects.

    Parameters
    ----------
    k : number of topics.
    epsilon_l : ε of each iteration's Laplace(2/ε_l) release of the counts.
    clip : C, the clip of the topic-word counts inside the conditional.
    alpha : document-topic prior; None means 1/k (as ``cgs``).
    beta : topic-word prior (default 0.01). The per-iteration sampling cost
        2 ln(C/β + 1) grows as β shrinks.
    n_iter : T, the number of iterations (sweep + release each).
    """

    def __init__(self, k: int, epsilon_l: float = 1.0, clip: float = 10.0, alpha: float | None = None,
                 beta: float = 0.01, n_iter: int = 200):
        _check(k, epsilon_l, clip, alpha, beta, n_iter)
        self.k = k
        self.epsilon_l = float(epsilon_l)
        self.clip = float(clip)
        self.alpha = alpha
        self.beta = float(beta)
        self.n_iter = n_iter

    def fit(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex) learned from X's rows; ``record`` receives every
        iteration's released counts."""
        state = run_hdp_lda(X, self.k, seed, self.epsilon_l, self.clip, alpha=self.alpha, beta=self.beta,
                            n_iter=self.n_iter, record=record)
        phi = state.phi.astype(np.float32)
        return phi / phi.sum(axis=1, keepdims=True)

    def mechanism(self) -> LaplaceNoise:
        """Each iteration's Laplace scale 2/ε_l, composed over the iterations; a word canary is one token."""
        return LaplaceNoise(2.0 / self.epsilon_l, 1, releases=int(self.n_iter))

    def guarantee(self) -> Guarantee:
        return Guarantee(
            epsilon=epsilon_g(self.n_iter, self.epsilon_l, self.clip, self.beta), delta=0.0,
            adjacency=Adjacency.WORD, basis=Basis.THEOREM,
            # Per iteration: a Laplace(2/ε_l) release of counts with L1 sensitivity 2, and a sweep whose
            # one differing draw is pure 2 ln(C/β + 1)-DP; T iterations, composed adaptively.
            event=privacy.events.repeated_event(privacy.events.composed_event([
                privacy.events.laplace_event(2.0 / self.epsilon_l, 2.0),
                privacy.events.EpsilonDeltaDpEvent(2.0 * math.log(self.clip / self.beta + 1.0))]), self.n_iter),
            accountant=("Zhao et al. 2019 ε_g = T(ε_l + 2 ln(C/β + 1)): basic adaptive composition of "
                        "T Laplace(2/ε_l) releases and T clipped-count sweeps (targets/learners/hdp_lda.py)"),
            parameters={
                "learner": "hdp-lda", "epsilon_l": self.epsilon_l, "clip": self.clip, "beta": self.beta,
                "n_iter": self.n_iter, "per_iteration_sampling": 2.0 * math.log(self.clip / self.beta + 1.0),
                "adjacency_detail": "substitution of one token's word; document lengths are public",
            },
        )

    def __repr__(self) -> str:
        return (f"ZhaoHDPLDA(k={self.k}, epsilon_l={self.epsilon_l}, clip={self.clip}, "
                f"beta={self.beta}, n_iter={self.n_iter})")
