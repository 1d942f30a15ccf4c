"""topicaudit.targets.learners.hdp_lda: Zhao et al.'s HDP-LDA (word-level DP) without the repository's defects.

* ε_g = T(ε_l + 2 ln(C/β + 1)), reported as a theorem at word adjacency;
* the privacy argument itself, on the conditional the kernel samples from:
  a token other than the substituted one has the same conditional on both
  corpora, the substituted one's probabilities move by at most (C/β + 1)²;
* the sampler's counts are never contaminated: they equal the counts of z,
  the clip never writes into them, release noise never accumulates;
* no negative probabilities with a tiny ε_l; planted topics at a generous ε.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.targets.learners.cgs import _initial_counts, tokens_from_counts
from topicaudit.targets.learners.hdp_lda import ZhaoHDPLDA, _hdp_sweep, epsilon_g, run_hdp_lda

from planted import matched_topic_errors, planted_corpus


def _random_corpus(seed=0, n_docs=50, n_words=30, lam=0.5):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.poisson(lam, (n_docs, n_words)).astype(np.float64))


def _conditional(i, doc, word, z, ndk, nk, released, informed, alpha, beta, vbeta, clip):
    """The documented conditional of token i (counts include token i; it is removed here)."""
    d, w, t = doc[i], word[i], z[i]
    a = ndk[d].astype(float).copy()
    c = nk.astype(float).copy()
    a[t] -= 1
    c[t] -= 1
    if informed:
        g = released[w].copy()
        g[t] -= 1
        g = np.clip(g, 0, clip) + beta
    else:
        g = np.full(nk.size, beta)
    q = (a + alpha) * g / (c + vbeta)
    return q / q.sum()


@pytest.mark.parametrize("T, eps_l, C, beta", [(1, 1.0, 1.0, 0.01), (200, 0.5, 10.0, 0.01), (50, 2.0, 3.0, 0.1)])
def test_epsilon_g_formula(T, eps_l, C, beta):
    expected = T * (eps_l + 2 * math.log(C / beta + 1))
    assert epsilon_g(T, eps_l, C, beta) == pytest.approx(expected, rel=1e-14)
    g = ZhaoHDPLDA(4, epsilon_l=eps_l, clip=C, beta=beta, n_iter=T).guarantee()
    assert g.epsilon == pytest.approx(expected, rel=1e-14)
    assert (g.delta, g.adjacency, g.basis) == (0.0, "word", "theorem")
    assert "Zhao et al. 2019 ε_g" in g.accountant
    assert g.parameters["per_iteration_sampling"] == pytest.approx(2 * math.log(C / beta + 1))


def test_kernel_samples_the_documented_conditional():
    X = _random_corpus(1)
    k, alpha, beta, clip = 3, 0.3, 0.05, 2.0
    doc, word = tokens_from_counts(X)
    rng = np.random.default_rng(0)
    z = rng.integers(0, k, doc.size).astype(np.int32)
    ndk = np.zeros((X.shape[0], k), np.int32)
    nwk = np.zeros((X.shape[1], k), np.int32)
    nk = np.zeros(k, np.int32)
    _initial_counts(doc, word, z, ndk, nwk, nk)
    released = nwk + rng.laplace(0, 2.0, nwk.shape)
    vbeta = X.shape[1] * beta
    u = rng.random(doc.size)
    # Replay the sweep token by token in Python with the same uniforms.
    zs, ndk_s, nk_s = z.copy(), ndk.copy(), nk.copy()
    for i in range(doc.size):
        p = _conditional(i, doc, word, zs, ndk_s, nk_s, released, True, alpha, beta, vbeta, clip)
        new = min(int(np.searchsorted(np.cumsum(p), u[i], side="right")), k - 1)
        ndk_s[doc[i], zs[i]] -= 1
        nk_s[zs[i]] -= 1
        zs[i] = new
        ndk_s[doc[i], new] += 1
        nk_s[new] += 1
    before = released.copy()
    _hdp_sweep(doc, word, z, ndk, nwk, nk, released, True, alpha, beta, vbeta, clip, u, np.empty(k))
    np.testing.assert_array_equal(z, zs)
    np.testing.assert_array_equal(released, before)  # the release is read, never written


def test_per_draw_privacy_loss_is_within_two_ln_C_over_beta_plus_one():
    """Substitute the word of one token τ; same transcript (z, ñ) on both corpora."""
    X = _random_corpus(2, n_words=12, lam=0.8)
    k, alpha, beta, clip = 4, 0.25, 0.01, 5.0
    doc, word = tokens_from_counts(X)
    rng = np.random.default_rng(3)
    bound = 2 * math.log(clip / beta + 1)
    worst = 0.0
    for trial in range(30):
        z = rng.integers(0, k, doc.size).astype(np.int32)
        ndk = np.zeros((X.shape[0], k), np.int32)
        nk = np.zeros(k, np.int32)
        np.add.at(ndk, (doc, z), 1)
        np.add.at(nk, z, 1)
        released = rng.normal(3, 10, (X.shape[1], k))  # any public matrix, extreme values included
        tau = rng.integers(doc.size)
        word2 = word.copy()
        word2[tau] = (word[tau] + 1 + rng.integers(X.shape[1] - 1)) % X.shape[1]
        vbeta = X.shape[1] * beta
        for i in range(doc.size):
            p = _conditional(i, doc, word, z, ndk, nk, released, True, alpha, beta, vbeta, clip)
            q = _conditional(i, doc, word2, z, ndk, nk, released, True, alpha, beta, vbeta, clip)
            loss = np.max(np.abs(np.log(p) - np.log(q)))
            if i != tau:
                assert loss == 0.0
            else:
                worst = max(worst, loss)
                assert loss <= bound + 1e-12
    assert worst > 0.5 * bound  # the bound is approached, the test is not vacuous


def test_stored_counts_are_never_contaminated_by_noise_or_clipping():
    X = _random_corpus(4, lam=1.5)
    assert X.max() > 3  # counts above the clip exist
    state = run_hdp_lda(X, 3, 5, epsilon_l=0.05, clip=1.0, n_iter=40)
    for counts in (state.ndk, state.nwk, state.nk):
        assert counts.dtype == np.int32 and counts.min() >= 0
    nwk = np.zeros_like(state.nwk)
    ndk = np.zeros_like(state.ndk)
    np.add.at(nwk, (state.word, state.z), 1)
    np.add.at(ndk, (state.doc, state.z), 1)
    np.testing.assert_array_equal(state.nwk, nwk)
    np.testing.assert_array_equal(state.ndk, ndk)
    np.testing.assert_array_equal(state.nk, np.bincount(state.z, minlength=3))
    np.testing.assert_array_equal(state.nwk.sum(axis=0), state.nk)
    assert state.nwk.max() > 1.0  # the clip at C = 1 wrote nothing back
    # The last release carries one fresh Laplace(2/ε_l) draw, not 40 accumulated ones.
    noise = state.released - state.nwk
    b = 2 / 0.05
    assert abs(noise.std() / (math.sqrt(2) * b) - 1) < 0.2


def test_no_negative_probabilities_with_tiny_epsilon():
    X = _random_corpus(5)
    state = run_hdp_lda(X, 4, 0, epsilon_l=1e-4, clip=3.0, n_iter=10)
    assert state.released.min() < -1000  # huge negative noisy counts occurred
    assert np.all(np.isfinite(state.phi)) and np.all(state.phi > 0)
    np.testing.assert_allclose(state.phi.sum(axis=1), 1.0)
    assert state.z.min() >= 0 and state.z.max() < 4
    phi = ZhaoHDPLDA(4, epsilon_l=1e-4, clip=3.0, n_iter=10).fit(X, 0)
    assert phi.dtype == np.float32 and np.all(phi > 0)


def test_determinism_and_planted_topics_at_a_generous_epsilon():
    X, truth = planted_corpus()
    learner = ZhaoHDPLDA(3, epsilon_l=50.0, clip=1000.0, n_iter=60)
    phi = learner.fit(X, 1)
    np.testing.assert_array_equal(phi, learner.fit(X, 1))
    errors = matched_topic_errors(phi, truth)
    assert np.all(errors < 0.1), errors


@pytest.mark.parametrize("params, message", [
    ({"epsilon_l": 0}, "epsilon_l"), ({"clip": 0}, "clip"), ({"n_iter": 0}, "n_iter"), ({"beta": 0}, "beta"),
])
def test_bad_parameters_are_rejected(params, message):
    with pytest.raises(ValueError, match=message):
        ZhaoHDPLDA(3, **params)
