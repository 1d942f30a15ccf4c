"""Collapsed Gibbs sampling with Zhao et al.'s inherent-privacy monitor (a monitor, not a guarantee).

Zhao, Ren, Yang & Yang (2019, §3.1) observe that every
Gibbs draw is an exponential mechanism: the topic of token i is drawn with
probability p_j ∝ exp(u_j), u_j = log of its collapsed weight, so the draw is
ε_i-DP for ε_i = how much the log-probabilities can change between
neighbouring corpora. They bound ε_i from the *current* counts, take the
maximum over the tokens of one iteration (parallel composition: each token is
visited once per iteration) and sum over iterations (sequential composition),
at word level (neighbours differ by one word) and document level (by one
document of at most L words). The result is data-dependent and conditional on
the chain's state: it is reported as a **monitor**, never as a guarantee
(``guarantee()`` has ε = inf, basis ``"monitor"``; the trajectory goes into
the release's ``info["monitor"]`` and from there into ``results.json``).

The sampler is exactly ``topicaudit.targets.learners.cgs`` (same draws from the same seed, so the
same Φ); the monitor only reads the counts.

The per-draw bound ε_i(m), its derivation and what it does not cover: docs/algorithms.md#cgs-privacy-monitor.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

from topicaudit.targets.base import Basis, Guarantee
from topicaudit.targets.mechanisms import Recorder
from topicaudit.targets.learners.cgs import (GibbsState, _phi, add_token, check_priors, draw_topic, lda_weights,
                                            random_start, remove_token)
from topicaudit.targets.params import integer, iteration_count

__all__ = ["MonitoredCollapsedGibbsLDA", "run_monitored_cgs", "draw_bound"]


@njit(cache=True)
def _draw_bound(nwk, nk, w, beta, vbeta, m):
    """ε_i(m) for a token of word w from the counts without it (docs/algorithms.md#cgs-privacy-monitor)."""
    k = nk.shape[0]
    up_remove = 0.0
    down_remove = 0.0
    up_add = 0.0
    down_add = 0.0
    for j in range(k):
        nw = nwk[w, j]
        b = nw + beta
        c = nk[j] + vbeta
        s = nk[j] - nw
        if s > m:
            s = m
        if s > 0:
            v = -math.log1p(-s / c)
            if v > up_remove:
                up_remove = v
        t = nw
        if t > m:
            t = m
        if t > 0:
            v = math.log1p(-t / c) - math.log1p(-t / b)
            if v > down_remove:
                down_remove = v
        v = math.log1p(m / b) - math.log1p(m / c)
        if v > up_add:
            up_add = v
        v = math.log1p(m / c)
        if v > down_add:
            down_add = v
    removal = up_remove + down_remove
    addition = up_add + down_add
    return removal if removal > addition else addition


_TABLE = 1 << 14  # log1p(m/(n + β)) is tabulated for counts n below this


@njit(cache=True)
def _topic_terms(nk, vbeta, ms, j, up_rm, dn_add):
    """Per-topic parts of the bound for topic j: −ln(1 − m/c_j) (when m tokens fit) and ln(1 + m/c_j)."""
    c = nk[j] + vbeta
    for a in range(ms.shape[0]):
        m = ms[a]
        up_rm[a, j] = -math.log1p(-m / c) if nk[j] >= m else 0.0
        dn_add[a, j] = math.log1p(m / c)


@njit(cache=True)
def _fast_bound(nwk, nk, w, beta, vbeta, a, m, up_rm, dn_add, table):
    """``_draw_bound`` from cached per-topic terms and tabulated per-word terms (same value)."""
    k = nk.shape[0]
    up_remove = 0.0
    down_remove = 0.0
    up_add = 0.0
    down_add = 0.0
    for j in range(k):
        nw = nwk[w, j]
        c = nk[j] + vbeta
        s = nk[j] - nw
        if s >= m:
            v = up_rm[a, j]
        elif s > 0:
            v = -math.log1p(-s / c)
        else:
            v = 0.0
        if v > up_remove:
            up_remove = v
        if nw > 0:
            b = nw + beta
            t = nw if nw < m else m
            v = math.log1p(-t / c) - math.log1p(-t / b)
            if v > down_remove:
                down_remove = v
        if nw < table.shape[1]:
            v = table[a, nw] - dn_add[a, j]
        else:
            v = math.log1p(m / (nw + beta)) - dn_add[a, j]
        if v > up_add:
            up_add = v
        if dn_add[a, j] > down_add:
            down_add = dn_add[a, j]
    removal = up_remove + down_remove
    addition = up_add + down_add
    return removal if removal > addition else addition


@njit(cache=True)
def _monitored_sweep(doc, word, z, ndk, nwk, nk, alpha, beta, vbeta, u, cum, ms, up_rm, dn_add, table):
    """``topicaudit.targets.learners.cgs._sweep`` plus the largest word- (ms[0] = 1) and document-level (ms[1] = L) ε_i.

    up_rm, dn_add (2, k): per-topic terms of the bound for the current nk, kept
    up to date as tokens move; table (2, T): log1p(m/(n + β)) for n < T.
    """
    k = nk.shape[0]
    eps = np.zeros(2)
    for i in range(z.shape[0]):
        d = doc[i]
        w = word[i]
        t = z[i]
        remove_token(ndk, nwk, nk, d, w, t)
        _topic_terms(nk, vbeta, ms, t, up_rm, dn_add)
        for a in range(2):
            e = _fast_bound(nwk, nk, w, beta, vbeta, a, ms[a], up_rm, dn_add, table)
            if e > eps[a]:
                eps[a] = e
        lda_weights(ndk, nwk, nk, d, w, alpha, beta, vbeta, cum)
        t = draw_topic(cum, k, u[i])
        z[i] = t
        add_token(ndk, nwk, nk, d, w, t)
        _topic_terms(nk, vbeta, ms, t, up_rm, dn_add)  # the old topic's terms were updated on removal
    return eps[0], eps[1]


def draw_bound(nwk: np.ndarray, nk: np.ndarray, w: int, beta: float, m: int) -> float:
    """ε_i(m) for a token of word w, given counts (words × k, k) without that token."""
    nwk = np.ascontiguousarray(nwk, dtype=np.int32)
    nk = np.ascontiguousarray(nk, dtype=np.int32)
    return float(_draw_bound(nwk, nk, int(w), float(beta), nwk.shape[0] * float(beta), int(m)))


def run_monitored_cgs(X, k: int, seed: int, alpha: float | None = None, beta: float = 0.01,
                      n_iter: int = 200, n_avg: int = 1, max_doc_length: int | None = None
                      ) -> tuple[GibbsState, dict]:
    """``topicaudit.targets.learners.cgs.run_cgs`` (same draws) plus the monitor's trajectories.

    max_doc_length: L of the document-level monitor; None means the longest
    document of X (data-dependent, like everything the monitor reports).
    Returns (state, monitor) with monitor["epsilon_word"][t] and
    monitor["epsilon_document"][t] the cumulative ε after sweep t + 1.
    """
    alpha, beta = check_priors(k, alpha, beta, n_iter, n_avg)
    rng = np.random.default_rng(seed)  # used exactly as run_cgs uses it
    doc, word, z, ndk, nwk, nk = random_start(X, k, rng)
    n_tokens, n_words = z.shape[0], nwk.shape[0]
    if max_doc_length is None:
        max_doc_length = int(np.bincount(doc).max()) if n_tokens else 1
    if isinstance(max_doc_length, bool) or int(max_doc_length) != max_doc_length or max_doc_length < 1:
        raise ValueError(f"max_doc_length must be an integer ≥ 1, got {max_doc_length!r}")
    max_doc_length = int(max_doc_length)

    cum = np.empty(k, dtype=np.float64)
    vbeta = n_words * beta
    phi_sum = np.zeros((k, n_words), dtype=np.float64)
    per_word = np.zeros(n_iter)
    per_doc = np.zeros(n_iter)
    ms = np.array([1, max_doc_length], dtype=np.int64)
    up_rm = np.zeros((2, k))
    dn_add = np.zeros((2, k))
    for j in range(k):
        _topic_terms(nk, vbeta, ms, j, up_rm, dn_add)
    counts = np.arange(min(_TABLE, n_tokens + 1), dtype=np.float64)
    table = np.log1p(ms[:, None] / (counts[None, :] + beta))
    for sweep in range(n_iter):
        u = rng.random(n_tokens)
        per_word[sweep], per_doc[sweep] = _monitored_sweep(doc, word, z, ndk, nwk, nk, alpha, beta, vbeta,
                                                           u, cum, ms, up_rm, dn_add, table)
        if sweep >= n_iter - n_avg:
            phi_sum += _phi(nwk, nk, beta)
    phi = phi_sum / n_avg if n_iter else _phi(nwk, nk, beta)
    phi /= phi.sum(axis=1, keepdims=True)
    state = GibbsState(doc=doc, word=word, z=z, ndk=ndk, nwk=nwk, nk=nk, phi=phi)
    monitor = {
        "basis": Basis.MONITOR.value,
        "method": ("Zhao et al. 2019 inherent privacy of CGS: per-draw exponential-mechanism bound from the "
                   "current counts, max over tokens per iteration, summed over iterations (targets/learners/cgs_monitor.py)"),
        "note": "data-dependent diagnostic, not a differential-privacy guarantee",
        "max_doc_length": max_doc_length,
        "beta": beta,
        "iterations": int(n_iter),
        "epsilon_word": np.cumsum(per_word).tolist(),
        "epsilon_document": np.cumsum(per_doc).tolist(),
    }
    return state, monitor


def _compact(values: list[float]) -> list[float]:
    return [float(f"{v:.6g}") for v in values]


class MonitoredCollapsedGibbsLDA:
    """CGS (as ``cgs``) whose fit also reports Zhao et al.'s inherent-privacy trajectory.

    Parameters
    ----------
    k, alpha, beta, n_iter, n_avg : as :class:`topicaudit.targets.learners.cgs.CollapsedGibbsLDA`.
    max_doc_length : L for the document-level monitor; None: the longest
        training document.
    """

    def __init__(self, k: int, alpha: float | None = None, beta: float = 0.01, n_iter: int = 200,
                 n_avg: int = 1, max_doc_length: int | None = None):
        check_priors(k, alpha, beta, n_iter, n_avg)
        iteration_count("n_iter", n_iter, 1)
        if max_doc_length is not None:
            integer("max_doc_length", max_doc_length, 1)
        self.k = k
        self.alpha = alpha
        self.beta = beta
        self.n_iter = n_iter
        self.n_avg = n_avg
        self.max_doc_length = max_doc_length

    def fit(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex), identical to ``cgs`` with the same seed; the monitor's
        trajectory goes to ``record.info["monitor"]`` (it releases nothing private: it records no release)."""
        state, monitor = run_monitored_cgs(X, self.k, seed, alpha=self.alpha, beta=self.beta,
                                           n_iter=self.n_iter, n_avg=self.n_avg,
                                           max_doc_length=self.max_doc_length)
        monitor["epsilon_word"] = _compact(monitor["epsilon_word"])
        monitor["epsilon_document"] = _compact(monitor["epsilon_document"])
        if record is not None:
            record.info["monitor"] = monitor
        phi = state.phi.astype(np.float32)
        return phi / phi.sum(axis=1, keepdims=True)

    def guarantee(self) -> Guarantee:
        # No event: the sampler adds no noise, and the monitor's ε is measured on the data.
        return Guarantee(epsilon=math.inf, basis=Basis.MONITOR,
                         accountant="Zhao et al. 2019 inherent-privacy monitor (data-dependent)",
                         parameters={"learner": "cgs-monitor", "max_doc_length": self.max_doc_length,
                                     "trajectory": "results.json target.monitor"})
