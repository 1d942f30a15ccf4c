"""topicaudit.targets.learners.cgs: collapsed Gibbs sampling for LDA.

* the compiled sweep samples the exact collapsed posterior (enumerated on a
  tiny corpus);
* planted, well-separated topics are recovered;
* determinism by seed, the learner contract, empty documents / unused words,
  count invariants of the final state.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln

from topicaudit.targets.base import NO_GUARANTEE
from topicaudit.targets.learners.cgs import CollapsedGibbsLDA, _initial_counts, _sweep, run_cgs, tokens_from_counts

from planted import matched_topic_errors, planted_corpus


def _random_corpus(seed=0, n_docs=40, n_words=25, lam=0.4):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.poisson(lam, (n_docs, n_words)).astype(np.float64))


def test_recovers_planted_topics():
    X, truth = planted_corpus()
    errors = matched_topic_errors(CollapsedGibbsLDA(3).fit(X, seed=1), truth)
    assert np.all(errors < 0.1), errors


def test_sweep_samples_the_exact_collapsed_posterior():
    # 2 documents, 2 words, k = 2, 5 tokens: enumerate all 32 topic vectors.
    doc = np.array([0, 0, 0, 1, 1], dtype=np.int32)
    word = np.array([0, 0, 1, 1, 0], dtype=np.int32)
    k, V, alpha, beta = 2, 2, 0.3, 0.7

    def log_joint(z):
        lp = 0.0
        for t in range(k):
            n_t = sum(1 for zi in z if zi == t)
            lp += gammaln(V * beta) - gammaln(n_t + V * beta)
            for w in range(V):
                n_tw = sum(1 for i, zi in enumerate(z) if zi == t and word[i] == w)
                lp += gammaln(n_tw + beta) - gammaln(beta)
            for d in range(2):
                lp += gammaln(sum(1 for i, zi in enumerate(z) if zi == t and doc[i] == d) + alpha)
        return lp

    states = list(itertools.product(range(k), repeat=len(doc)))
    logp = np.array([log_joint(s) for s in states])
    exact = np.exp(logp - logp.max())
    exact /= exact.sum()

    rng = np.random.default_rng(0)
    z = rng.integers(0, k, len(doc)).astype(np.int32)
    ndk = np.zeros((2, k), np.int32)
    nwk = np.zeros((V, k), np.int32)
    nk = np.zeros(k, np.int32)
    _initial_counts(doc, word, z, ndk, nwk, nk)
    cum = np.empty(k)
    n_sweeps = 40_000
    u_all = rng.random((n_sweeps, len(doc)))
    hist = np.zeros(len(states))
    powers = k ** np.arange(len(doc))[::-1]
    for s in range(n_sweeps):
        _sweep(doc, word, z, ndk, nwk, nk, alpha, beta, V * beta, u_all[s], cum)
        hist[int(z @ powers)] += 1
    hist /= n_sweeps
    assert 0.5 * np.abs(hist - exact).sum() < 0.02


def test_contract_shape_dtype_simplex_guarantee():
    X = _random_corpus()
    learner = CollapsedGibbsLDA(4, n_iter=30)
    phi = learner.fit(X, seed=3)
    assert phi.shape == (4, X.shape[1]) and phi.dtype == np.float32
    assert np.all(phi > 0)
    np.testing.assert_allclose(phi.sum(axis=1), 1.0, atol=1e-6)
    assert learner.guarantee() == NO_GUARANTEE


def test_determinism_by_seed():
    X = _random_corpus(1)
    learner = CollapsedGibbsLDA(3, n_iter=25)
    a, b, c = learner.fit(X, 7), learner.fit(X, 7), learner.fit(X, 8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_empty_documents_and_unused_words():
    X = _random_corpus(2).toarray()
    X[[0, 5, 17], :] = 0          # empty documents
    X[:, [3, 11, 24]] = 0         # unused words
    Xs = sp.csr_matrix(X)
    k, beta = 3, 0.01
    state = run_cgs(Xs, k, seed=0, beta=beta, n_iter=20)
    assert np.all(state.ndk[[0, 5, 17]] == 0)
    expected = beta / (state.nk + X.shape[1] * beta)
    np.testing.assert_allclose(state.phi[:, [3, 11, 24]], np.repeat(expected[:, None], 3, axis=1))
    phi = CollapsedGibbsLDA(k, n_iter=20).fit(Xs, 0)
    np.testing.assert_allclose(phi.sum(axis=1), 1.0, atol=1e-6)
    # removing empty rows changes nothing: tokens (hence draws) are identical
    keep = np.setdiff1d(np.arange(X.shape[0]), [0, 5, 17])
    np.testing.assert_array_equal(phi, CollapsedGibbsLDA(k, n_iter=20).fit(sp.csr_matrix(X[keep]), 0))


def test_corpus_without_tokens_gives_uniform_rows():
    phi = CollapsedGibbsLDA(2, n_iter=5).fit(sp.csr_matrix((4, 6)), 0)
    np.testing.assert_allclose(phi, 1 / 6, rtol=1e-6)


def test_count_invariants_and_phi_formula():
    X = _random_corpus(3, lam=0.8)
    X[2, 4] = 3.0  # a repeated word
    k, alpha, beta = 4, 0.2, 0.05
    state = run_cgs(X, k, seed=5, alpha=alpha, beta=beta, n_iter=15)
    n_tokens = int(X.sum())
    assert state.z.shape == (n_tokens,) and state.z.min() >= 0 and state.z.max() < k
    assert state.nk.sum() == n_tokens
    np.testing.assert_array_equal(state.ndk.sum(axis=1), np.asarray(X.sum(axis=1)).ravel())
    np.testing.assert_array_equal(state.nwk.sum(axis=1), np.asarray(X.sum(axis=0)).ravel())
    np.testing.assert_array_equal(state.ndk.sum(axis=0), state.nk)
    np.testing.assert_array_equal(state.nwk.sum(axis=0), state.nk)
    # counts are exactly those of z
    ndk = np.zeros_like(state.ndk)
    np.add.at(ndk, (state.doc, state.z), 1)
    nwk = np.zeros_like(state.nwk)
    np.add.at(nwk, (state.word, state.z), 1)
    np.testing.assert_array_equal(ndk, state.ndk)
    np.testing.assert_array_equal(nwk, state.nwk)
    V = X.shape[1]
    np.testing.assert_allclose(state.phi, (state.nwk.T + beta) / (state.nk[:, None] + V * beta))


def test_averaging_last_sweeps():
    X = _random_corpus(4)
    final = run_cgs(X, 3, seed=2, n_iter=20, n_avg=1).phi
    avg = run_cgs(X, 3, seed=2, n_iter=20, n_avg=5).phi
    np.testing.assert_allclose(avg.sum(axis=1), 1.0)
    assert not np.allclose(final, avg)
    with pytest.raises(ValueError):
        run_cgs(X, 3, seed=2, n_iter=20, n_avg=21)


def test_tokens_from_counts():
    X = sp.csr_matrix(np.array([[0, 2, 1], [0, 0, 0], [3, 0, 1]], dtype=np.float64))
    doc, word = tokens_from_counts(X)
    assert doc.dtype == np.int32 and word.dtype == np.int32
    np.testing.assert_array_equal(doc, [0, 0, 0, 2, 2, 2, 2])
    np.testing.assert_array_equal(word, [1, 1, 2, 0, 0, 0, 2])
    # non-canonical input (unsorted, duplicate entries) is not modified
    Y = sp.csr_matrix((np.array([1.0, 1.0, 2.0]), np.array([2, 0, 2]), np.array([0, 3])), shape=(1, 3))
    before = Y.indices.copy()
    doc, word = tokens_from_counts(Y)
    np.testing.assert_array_equal(word, [0, 2, 2, 2])
    np.testing.assert_array_equal(Y.indices, before)
    with pytest.raises(ValueError):
        tokens_from_counts(sp.csr_matrix(np.array([[0.5, 1.0]])))
    with pytest.raises(ValueError):
        tokens_from_counts(sp.csr_matrix(np.array([[-1.0, 1.0]])))


def test_default_alpha_is_one_over_k():
    X = _random_corpus(5)
    a = run_cgs(X, 4, seed=0, n_iter=10).phi
    b = run_cgs(X, 4, seed=0, alpha=0.25, n_iter=10).phi
    np.testing.assert_array_equal(a, b)
    assert math.isinf(CollapsedGibbsLDA(4).guarantee().epsilon)
