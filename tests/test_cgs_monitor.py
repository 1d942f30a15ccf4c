"""topicaudit.targets.learners.cgs_monitor: CGS with Zhao et al.'s inherent-privacy monitor.

* the sampler is exactly ``cgs`` (same Φ from the same seed);
* the trajectories are cumulative (non-decreasing), word level ≤ document level;
* a pure-Python replay of the chain recomputes the trajectory exactly, and
  enumerating every neighbour (all ways m ≤ L tokens can be removed from or
  added to the topic-word counts) shows the per-draw bound is an upper bound
  of the exact privacy loss of every draw, and not a vacuous one;
* the guarantee is no guarantee (ε = inf) with basis "monitor".
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from topicaudit.mechanisms import Recorder
import pytest
import scipy.sparse as sp

from topicaudit.targets import build_target
from topicaudit.targets.learners.cgs import CollapsedGibbsLDA, tokens_from_counts
from topicaudit.targets.learners.cgs_monitor import (MonitoredCollapsedGibbsLDA, _fast_bound, _topic_terms, draw_bound,
                                 run_monitored_cgs)


def _random_corpus(seed=0, n_docs=40, n_words=25, lam=0.4):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.poisson(lam, (n_docs, n_words)).astype(np.float64))


def _bound_python(nwk_w, nk, beta, vbeta, m):
    """The module docstring's ε_i(m), written out independently."""
    nwk_w, nk = nwk_w.astype(float), nk.astype(float)
    b, c = nwk_w + beta, nk + vbeta
    s = np.minimum(m, nk - nwk_w)
    t = np.minimum(m, nwk_w)
    up_remove = max(0.0, np.max(-np.log(1 - s / c)))
    down_remove = max(0.0, np.max(np.log(1 - t / c) - np.log(1 - t / b)))
    up_add = np.max(np.log(1 + m / b) - np.log(1 + m / c))
    down_add = np.max(np.log(1 + m / c))
    return max(up_remove + down_remove, up_add + down_add)


def _exact_loss(a, nwk_w, nk, beta, vbeta, m):
    """max over neighbours differing by ≤ m tokens of max_j |ln p'_j − ln p_j|, by enumeration.

    A neighbour removes (or adds) in topic j x_j tokens of the draw's word and
    o_j of other words; a removal needs x_j ≤ n_jw and o_j ≤ n_j − n_jw.
    """
    k = nk.size
    q = a * (nwk_w + beta) / (nk + vbeta)
    p = q / q.sum()
    worst = 0.0
    cells = [(j, kind) for j in range(k) for kind in ("w", "other")]
    for total in range(1, m + 1):
        for combo in itertools.combinations_with_replacement(range(len(cells)), total):
            x, o = np.zeros(k), np.zeros(k)
            for idx in combo:
                j, kind = cells[idx]
                (x if kind == "w" else o)[j] += 1
            for sign in (-1, 1):
                if sign < 0 and (np.any(x > nwk_w) or np.any(o > nk - nwk_w)):
                    continue
                q2 = a * (nwk_w + sign * x + beta) / (nk + sign * (x + o) + vbeta)
                p2 = q2 / q2.sum()
                worst = max(worst, float(np.max(np.abs(np.log(p2) - np.log(p)))))
    return worst


def test_same_phi_as_cgs_and_the_monitor_in_info():
    X = _random_corpus()
    learner = MonitoredCollapsedGibbsLDA(3, n_iter=40)
    record = Recorder()
    phi = learner.fit(X, 5, record=record)
    info = record.info
    assert record.transcript() is None  # the monitor releases nothing private
    np.testing.assert_array_equal(phi, CollapsedGibbsLDA(3, n_iter=40).fit(X, 5))
    np.testing.assert_array_equal(learner.fit(X, 5), phi)
    monitor = info["monitor"]
    assert monitor["basis"] == "monitor" and monitor["iterations"] == 40
    assert monitor["max_doc_length"] == int(X.sum(axis=1).max())
    assert len(monitor["epsilon_word"]) == len(monitor["epsilon_document"]) == 40


def test_trajectories_are_cumulative_and_word_level_below_document_level():
    X = _random_corpus(1, lam=0.8)
    _, monitor = run_monitored_cgs(X, 4, 2, n_iter=30, max_doc_length=12)
    word, document = np.array(monitor["epsilon_word"]), np.array(monitor["epsilon_document"])
    assert np.all(np.diff(word) > 0) and np.all(np.diff(document) > 0)
    assert np.all(word <= document)
    assert word[0] > 0


def test_brute_force_replay_matches_and_bounds_the_exact_loss():
    # 3 documents, 3 words, k = 2, 8 tokens: small enough to enumerate every neighbour.
    X = sp.csr_matrix(np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 2.0], [1.0, 0.0, 1.0]]))
    k, beta, alpha, n_iter, L, seed = 2, 0.1, 0.5, 6, 3, 4
    _, monitor = run_monitored_cgs(X, k, seed, alpha=alpha, beta=beta, n_iter=n_iter, max_doc_length=L)

    doc, word = tokens_from_counts(X)
    V = X.shape[1]
    vbeta = V * beta
    rng = np.random.default_rng(seed)  # the monitor uses its seed as run_cgs does
    z = rng.integers(0, k, doc.size)
    per_word, per_doc = [], []
    for _ in range(n_iter):
        u = rng.random(doc.size)
        ew = ed = 0.0
        for i in range(doc.size):
            nwk = np.zeros((V, k))
            ndk = np.zeros((X.shape[0], k))
            mask = np.arange(doc.size) != i
            np.add.at(nwk, (word[mask], z[mask]), 1)
            np.add.at(ndk, (doc[mask], z[mask]), 1)
            nk = nwk.sum(axis=0)
            w = word[i]
            a = ndk[doc[i]] + alpha
            for m, store in ((1, "w"), (L, "d")):
                bound = _bound_python(nwk[w], nk, beta, vbeta, m)
                assert bound == pytest.approx(draw_bound(nwk, nk, w, beta, m), rel=1e-12)
                exact = _exact_loss(a, nwk[w], nk, beta, vbeta, m)
                assert exact <= bound + 1e-12
                assert exact >= bound / 4  # an upper bound, not a vacuous one
                if store == "w":
                    ew = max(ew, bound)
                else:
                    ed = max(ed, bound)
            q = a * (nwk[w] + beta) / (nk + vbeta)
            cum = np.cumsum(q)
            z[i] = min(int(np.searchsorted(cum, u[i] * cum[-1], side="right")), k - 1)
        per_word.append(ew)
        per_doc.append(ed)
    np.testing.assert_allclose(monitor["epsilon_word"], np.cumsum(per_word), rtol=1e-12)
    np.testing.assert_allclose(monitor["epsilon_document"], np.cumsum(per_doc), rtol=1e-12)


def test_fast_bound_with_cached_and_tabulated_terms_equals_the_direct_formula():
    rng = np.random.default_rng(0)
    k, beta, V = 5, 0.01, 40
    ms = np.array([1, 7], dtype=np.int64)
    for _ in range(200):
        nwk = rng.poisson(rng.choice([0.3, 3.0, 40.0]), (V, k)).astype(np.int32)
        nk = (nwk.sum(axis=0) + rng.integers(0, 5, k)).astype(np.int32)
        w = int(rng.integers(V))
        up_rm, dn_add = np.zeros((2, k)), np.zeros((2, k))
        for j in range(k):
            _topic_terms(nk, V * beta, ms, j, up_rm, dn_add)
        for width in (1, 20, 1000):  # width 1: every count above the table, computed directly
            table = np.log1p(ms[:, None] / (np.arange(width)[None, :] + beta))
            for a in range(2):
                fast = _fast_bound(nwk, nk, w, beta, V * beta, a, ms[a], up_rm, dn_add, table)
                assert fast == pytest.approx(draw_bound(nwk, nk, w, beta, int(ms[a])), rel=1e-13)


def test_the_monitor_is_not_a_guarantee():
    g = MonitoredCollapsedGibbsLDA(3).guarantee()
    assert math.isinf(g.epsilon) and g.basis == "monitor"
    assert g.to_json()["epsilon"] is None


def test_pipeline_carries_the_trajectory_in_the_release():
    X = _random_corpus(2)
    target = build_target("cgs-monitor", 3, "observed", {"n_iter": 10, "max_doc_length": 20})
    release = target.fit(X, 0)
    assert release.info["monitor"]["max_doc_length"] == 20
    assert len(release.info["monitor"]["epsilon_word"]) == 10
    assert build_target("cgs", 3, "observed", {"n_iter": 10}).fit(X, 0).info == {}
