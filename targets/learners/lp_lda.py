"""LP-LDA: locally private LDA by randomised response on word presence (Zhao et al. 2019/2021, §3.2).

See docs/algorithms.md#lp-lda.

User side (the local randomiser, ``randomize_presence``)
--------------------------------------------------------
Each user encodes their document as a binary presence vector over the public
vocabulary (bit v = 1 iff word v occurs) and sends every bit through
randomised response: kept with probability p, flipped with probability 1 − p,
independently. A bit's output distributions under inputs 0 and 1 differ by at
most the factor p/(1 − p), so each word's presence is ε_b-locally private with

    ε_b = ln(p/(1 − p))      (Zhao et al. Thm 4; Warner's randomised response).

Two documents whose presence vectors differ in b bits are (b·ε_b)-
indistinguishable (the bits are independent; the bound is tight for the
all-bits-differ event): a document with b distinct words against the empty
document costs b·ε_b, and any two documents over a vocabulary of V words
V·ε_b. Word counts beyond presence are never sent, so they are not at risk.

Server side (``estimate_counts``, ``reconstruct``): Zhao et al.'s steps 1–5
-----------------------------------------------------------------------------
1. c_v = number of received vectors with bit v = 1 (n users).
2. f̂_v = (c_v − n(1 − p)) / (2p − 1), the unbiased moment estimate of the
   true number of documents containing v (variance n·p(1 − p)/(2p − 1)²,
   Zhao et al. Thm 5).
3. Δ_v = t_v − c_v with the target t_v = f̂_v rounded to the nearest integer
   and clipped to [0, n] (the paper leaves the rounding unstated; clipping is
   needed because f̂_v can fall outside [0, n]).
4. Δ_v > 0: set bit v in Δ_v random vectors that have it 0; Δ_v < 0: clear it
   in |Δ_v| random vectors that have it 1; the choice is uniform without
   replacement. Afterwards column v sums to t_v.
5. The adjusted vectors are the reconstructed corpus (each set bit is one
   token); collapsed Gibbs sampling (``topicaudit.targets.learners.cgs.run_cgs``, compiled) on it
   gives Φ.

Everything after the randomiser is post-processing of locally private data,
so the released Φ keeps the users' guarantee. The vocabulary must be public
(chosen without the users' data): use the pipeline's ``all`` vocabulary step
(the whole corpus vocabulary, membership-independent in an audit). The
``observed`` step would choose the vocabulary from the training documents
themselves, outside the guarantee.

Randomness: ``fit(X, seed)`` spawns three streams from the seed — the users'
randomisation, the server's step-4 choices, and the CGS seed — so a fit is the
whole locally private pipeline, reproducible by seed; in an audit each shadow
model draws its own randomisation, as an adversary simulating the mechanism
would. Memory: the randomised bits are processed in column blocks of at most
2**24 cells.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.base import Adjacency, Basis, Guarantee
from topicaudit.targets.mechanisms import RandomisedResponse, Recorder
from topicaudit.targets.learners.cgs import run_cgs
from topicaudit.targets.counts import check_counts
import topicaudit.targets.privacy as privacy  # its events (dp-accounting) load when a guarantee is asked for
from topicaudit.targets.params import averaged_sweeps, iteration_count, positive, topic_count

__all__ = ["LocallyPrivateLDA", "estimate_counts", "randomize_presence", "reconstruct"]

_BLOCK_CELLS = 1 << 24


def randomize_presence(presence: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """The local randomiser: keep each bit with probability p, flip it otherwise.

    presence: boolean array (users × vocabulary), one row per user. Returns the
    randomised bits (bool, same shape).
    """
    presence = np.asarray(presence, dtype=bool)
    flip = rng.random(presence.shape) >= p
    return presence ^ flip


def estimate_counts(c: np.ndarray | int, n: int, p: float) -> np.ndarray:
    """Step 2: f̂_v = (c_v − n(1 − p))/(2p − 1), unbiased for the true presence counts (c: each word's count of
    received ones, or one word's)."""
    return (np.asarray(c, dtype=np.float64) - n * (1.0 - p)) / (2.0 * p - 1.0)


def _adjust_column(bits: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """Steps 1–4 for one column of received bits; returns the rows holding the word."""
    n = bits.shape[0]
    ones = np.flatnonzero(bits)
    c = ones.size
    target = int(min(max(np.rint(estimate_counts(c, n, p)), 0), n))
    if target < c:
        return np.sort(rng.choice(ones, size=target, replace=False))
    if target > c:
        zeros = np.flatnonzero(~bits)
        added = rng.choice(zeros, size=target - c, replace=False)
        return np.sort(np.concatenate([ones, added]))
    return ones


def reconstruct(received: np.ndarray, p: float, rng: np.random.Generator) -> sp.csr_matrix:
    """Steps 1–4 on the received bit vectors (users × vocabulary, bool).

    Returns the reconstructed binary corpus (CSR, float64), column v holding
    round(f̂_v) ones (clipped to [0, n]).
    """
    received = np.asarray(received, dtype=bool)
    n, V = received.shape
    row_parts, col_parts = [], []
    for v in range(V):
        r = _adjust_column(received[:, v], p, rng)
        row_parts.append(r)
        col_parts.append(np.full(r.size, v, dtype=np.int64))
    rows = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64)
    cols = np.concatenate(col_parts) if col_parts else np.zeros(0, dtype=np.int64)
    return sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, V))


class LocallyPrivateLDA:
    """LP-LDA (Zhao et al.): per-bit randomised response on presence vectors, reconstruction, CGS.

    X given to ``fit`` is documents × the public vocabulary (pipeline step
    ``all``); only word presence is used.

    Parameters
    ----------
    k : number of topics.
    p : probability of keeping each bit, in (1/2, 1). Give exactly one of
        ``p`` and ``epsilon``.
    epsilon : per-bit (per word presence) privacy ε_b > 0; p = e^ε_b/(1 + e^ε_b).
    alpha : CGS document-topic prior on the reconstruction; None means 1/k.
    beta : CGS topic-word prior (0.01).
    n_iter : CGS sweeps (200). n_avg : Φ averaged over the last n_avg sweeps (1).
    """

    def __init__(self, k: int, p: float | None = None, epsilon: float | None = None,
                 alpha: float | None = None, beta: float = 0.01, n_iter: int = 200, n_avg: int = 1):
        topic_count("k", k, 1)
        if (p is None) == (epsilon is None):
            raise ValueError("give exactly one of p (keep probability) and epsilon (per-bit ε)")
        if p is not None and not (isinstance(p, numbers.Real) and 0.5 < p < 1):
            raise ValueError(f"p must be in (0.5, 1), got {p!r}")
        if epsilon is not None and not (isinstance(epsilon, numbers.Real) and 0 < epsilon < math.inf):
            raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
        positive("alpha", alpha, optional=True)
        positive("beta", beta)
        iteration_count("n_iter", n_iter, 1)
        averaged_sweeps(n_avg, n_iter)
        self.k = k
        self.p = p
        self.epsilon = epsilon
        self.alpha = alpha
        self.beta = beta
        self.n_iter = n_iter
        self.n_avg = n_avg

    @property
    def keep_probability(self) -> float:
        if self.p is not None:
            return float(self.p)
        assert self.epsilon is not None, "__init__ takes exactly one of p and epsilon"
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    @property
    def epsilon_per_word(self) -> float:
        if self.epsilon is not None:
            return float(self.epsilon)
        assert self.p is not None, "__init__ takes exactly one of p and epsilon"
        return math.log(self.p / (1.0 - self.p))

    # The users' keep probability; only the test-only bug variants (targets/bug_variants.py) set it apart
    # from the server's, to model a randomiser deleted while the server still de-noises.
    randomiser_keep_probability: float | None = None

    def privatize_and_reconstruct(self, X, randomize_rng: np.random.Generator,
                                  server_rng: np.random.Generator, record: Recorder | None = None) -> sp.csr_matrix:
        """Users randomise their presence vectors; the server reconstructs (steps 1–4).

        Works in column blocks (each column's adjustment needs only that
        column), which is the same computation as randomising whole rows.
        record: receives each block of the bits the server receives
        (``Recorder.randomised_response``), and the server reconstructs from
        what it returns.
        """
        X = check_counts(X).tocsc()
        n, V = X.shape
        p = self.keep_probability
        p_user = p if self.randomiser_keep_probability is None else self.randomiser_keep_probability
        record = Recorder() if record is None else record
        block = max(1, _BLOCK_CELLS // max(n, 1))
        parts = []
        for start in range(0, V, block):
            presence = X[:, start:start + block].toarray() > 0
            received = randomize_presence(presence, p_user, randomize_rng)
            received = record.randomised_response(received, keep_probability=p,
                                                  columns=np.arange(start, start + presence.shape[1]))
            parts.append(reconstruct(received, p, server_rng))
        if not parts:
            return sp.csr_matrix((n, V))
        return sp.hstack(parts, format="csr")

    def fit(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex) from the locally randomised rows of X; ``record``
        receives the users' randomised presence bits, as the server reconstructs from them."""
        randomize, server, cgs = np.random.SeedSequence(seed).spawn(3)
        recon = self.privatize_and_reconstruct(X, np.random.default_rng(randomize), np.random.default_rng(server),
                                               record)
        state = run_cgs(recon, self.k, int(cgs.generate_state(1)[0]), alpha=self.alpha, beta=self.beta,
                        n_iter=self.n_iter, n_avg=self.n_avg)
        phi = state.phi.astype(np.float32)
        return phi / phi.sum(axis=1, keepdims=True)

    def mechanism(self) -> RandomisedResponse:
        """The claimed randomiser: each presence bit kept with this probability."""
        return RandomisedResponse(self.keep_probability)

    def guarantee(self) -> Guarantee:
        """ε_b per word presence, adjacency ``local-word`` (the per-document costs in parameters).

        The ``epsilon`` field carries the per-word ε_b: the statement the
        mechanism is built for (Zhao et al. Thm 4) and the only finite one
        independent of the vocabulary size. Per document it is b·ε_b for two
        documents differing in b word presences — for a document of b distinct
        words against the empty document (what a membership test on whole
        documents faces) — and V·ε_b in the worst case over a V-word vocabulary.
        """
        eps = self.epsilon_per_word
        return Guarantee(
            epsilon=eps,
            delta=0.0,
            adjacency=Adjacency.LOCAL_WORD,
            basis=Basis.THEOREM,
            event=privacy.events.binary_randomized_response_event(self.keep_probability),  # one presence bit
            accountant="randomised response per presence bit (Warner 1965; Zhao et al. 2019 Thm 4); "
                       "group privacy over bits for documents",
            parameters={
                "mechanism": "per-bit randomised response on word-presence vectors over a public vocabulary",
                "keep_probability": self.keep_probability,
                "epsilon_per_word": eps,
                "epsilon_per_document": "b·ε_b for documents differing in b word presences (a document with "
                                        "b distinct words against the empty document)",
                "epsilon_per_document_worst_case": "V·ε_b over a public vocabulary of V words",
                "vocabulary": "the guarantee covers presence over a public vocabulary (step 'all')",
            },
        )
