"""topicaudit.targets.learners.dp_cgs: Zhu et al.'s DP collapsed Gibbs sampling with a document-length cap.

Privacy properties, not only shapes:
* the Laplace scale is exactly 2L/ε, linear in the cap L and in 1/ε, and the
  noise drawn has that scale, independently per topic;
* the cap is enforced (every document the sampler sees has ≤ L tokens, a
  uniform random subset of the original);
* the guarantee is ε, δ = 0, document adjacency, basis paper-claim, and it
  composes with DPSU to ε₁ + ε₂;
* Φ is made from the noisy counts (not the noiseless ones) and is a valid
  distribution at any ε; as ε grows the output becomes ordinary CGS, and
  planted topics are recovered at a generous ε but not at a tiny one.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.targets import build_target
from topicaudit.targets.learners.cgs import run_cgs
from topicaudit.targets.learners.dp_cgs import ZhuDPCollapsedGibbsLDA, cap_document_lengths, laplace_scale, run_dp_cgs

from planted import matched_topic_errors, planted_corpus


def _random_corpus(seed=0, n_docs=60, n_words=400, lam=0.08):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.poisson(lam, (n_docs, n_words)).astype(np.float64))


@pytest.mark.parametrize("L, epsilon", [(1, 1.0), (8, 3.0), (16, 0.5), (32, 10.0)])
def test_noise_scale_is_two_L_over_epsilon(L, epsilon):
    learner = ZhuDPCollapsedGibbsLDA(4, epsilon=epsilon, max_doc_length=L)
    assert learner.noise_scale == laplace_scale(epsilon, L) == 2.0 * L / epsilon
    assert learner.guarantee().parameters["noise_scale"] == 2.0 * L / epsilon


def test_noise_drawn_follows_the_cap_and_epsilon_exactly():
    X = _random_corpus()
    states = {(L, eps): run_dp_cgs(X, 5, 7, eps, L, n_iter=2) for L in (4, 8) for eps in (1.0, 2.0)}
    base = states[(4, 1.0)]
    assert base.scale == 8.0
    # Same seed, same standard-Laplace draws: the noise scales exactly with L and 1/ε.
    np.testing.assert_allclose(states[(8, 1.0)].noise_wk, 2.0 * base.noise_wk, rtol=1e-12)
    np.testing.assert_allclose(states[(4, 2.0)].noise_wk, 0.5 * base.noise_wk, rtol=1e-12)
    np.testing.assert_allclose(states[(8, 2.0)].noise_k, base.noise_k, rtol=1e-12)
    # ... and it is Laplace of that scale: E|η| = b, Var η = 2b², over 2,000 draws.
    noise = base.noise_wk.ravel()
    assert noise.size == 400 * 5
    assert abs(np.abs(noise).mean() / 8.0 - 1) < 0.08
    assert abs(noise.std() / (np.sqrt(2) * 8.0) - 1) < 0.1
    # Independent per topic (the public code shared one draw across topics).
    assert abs(np.corrcoef(base.noise_wk[:, 0], base.noise_wk[:, 1])[0, 1]) < 0.1


def test_cap_is_enforced_on_what_the_sampler_sees():
    rng = np.random.default_rng(0)
    lengths = np.array([3, 8, 9, 40, 200, 0, 12])
    X = sp.lil_matrix((lengths.size, 30))
    for d, n in enumerate(lengths):
        for w in rng.integers(0, 30, n):
            X[d, w] += 1
    X = sp.csr_matrix(X)
    L = 8
    state = run_dp_cgs(X, 3, 1, 2.0, L, n_iter=3)
    capped = state.X
    np.testing.assert_array_equal(np.asarray(capped.sum(axis=1)).ravel(), np.minimum(lengths, L))
    assert (capped - X).max() <= 0  # a sub-multiset of each document
    short = lengths <= L
    assert (abs(capped[short] - X[short])).sum() == 0  # short documents untouched
    np.testing.assert_array_equal(np.bincount(state.doc, minlength=lengths.size), np.minimum(lengths, L))
    np.testing.assert_array_equal(state.ndk.sum(axis=1), np.minimum(lengths, L))


def test_cap_keeps_a_uniform_random_subset():
    # One document: 30 copies of word 0 and 10 of word 1, capped at 8:
    # the kept copies of word 0 are hypergeometric, mean 8·30/40 = 6.
    X = sp.csr_matrix(np.array([[30.0, 10.0]]))
    kept = [cap_document_lengths(X, 8, np.random.default_rng(s))[0, 0] for s in range(3000)]
    assert abs(np.mean(kept) - 6.0) < 0.06
    var = 8 * 0.75 * 0.25 * (40 - 8) / (40 - 1)  # hypergeometric variance
    assert abs(np.var(kept) / var - 1) < 0.1
    again = cap_document_lengths(X, 8, np.random.default_rng(5)).toarray()
    np.testing.assert_array_equal(again, cap_document_lengths(X, 8, np.random.default_rng(5)).toarray())


def test_guarantee_is_the_papers_claim_and_composes_with_dpsu():
    g = ZhuDPCollapsedGibbsLDA(5, epsilon=3.0, max_doc_length=16).guarantee()
    assert (g.epsilon, g.delta, g.adjacency, g.basis) == (3.0, 0.0, "document", "paper-claim")
    assert g.parameters["max_doc_length"] == 16
    pipeline = build_target("dp-cgs", 5, "dpsu-gw", {"epsilon": 5.0, "max_doc_length": 16},
                            {"epsilon": 1.0, "delta": 1e-5})
    total = pipeline.guarantee()
    # DP-CGS's claim is about replacing a document, the step's about adding or removing one: the step's (1, 1e-5)
    # is restated for replace-one as (2, (1 + e)·1e-5) before the parts add up.
    assert total.epsilon == pytest.approx(7.0) and total.delta == pytest.approx((1 + math.e) * 1e-5)
    assert total.adjacency == "document" and total.basis == "paper-claim" and total.neighbours == "replace-one"


def test_phi_comes_from_the_noisy_counts_and_is_a_distribution_at_tiny_epsilon():
    X = _random_corpus(1)
    state = run_dp_cgs(X, 4, 3, 1e-3, 16, n_iter=5)
    weights = np.maximum(state.nwk.T + state.noise_wk.T, 0.0) + 0.01
    np.testing.assert_allclose(state.phi, weights / weights.sum(axis=1, keepdims=True), rtol=1e-12)
    # the sampler's counts are the exact counts of z: the noise never enters them
    nwk = np.zeros_like(state.nwk)
    np.add.at(nwk, (state.word, state.z), 1)
    np.testing.assert_array_equal(nwk, state.nwk)
    phi = ZhuDPCollapsedGibbsLDA(4, epsilon=1e-3, max_doc_length=16, n_iter=5).fit(X, 3)
    assert phi.dtype == np.float32 and phi.shape == (4, 400)
    assert np.all(phi > 0) and np.all(np.isfinite(phi))
    np.testing.assert_allclose(phi.sum(axis=1), 1.0, rtol=1e-5)


def test_without_noise_it_is_ordinary_cgs_on_the_capped_corpus():
    X = _random_corpus(2)
    state = run_dp_cgs(X, 4, 11, 1.0, 6, n_iter=20, noise=False)
    reference = run_cgs(state.X, 4, np.random.SeedSequence(11).spawn(3)[1], n_iter=20)
    np.testing.assert_array_equal(state.z, reference.z)
    np.testing.assert_allclose(state.phi, reference.phi, rtol=1e-12)
    # a huge ε is the same run up to noise of scale 1e-8
    huge = run_dp_cgs(X, 4, 11, 1e9, 6, n_iter=20)
    np.testing.assert_array_equal(huge.z, reference.z)
    np.testing.assert_allclose(huge.phi, reference.phi, atol=1e-6)


def test_output_approaches_non_private_cgs_as_epsilon_grows():
    X, truth = planted_corpus(seed=3, n_docs=150)
    L = 50  # no document is longer: the cap removes nothing here
    tv = {}
    for eps in (0.05, 2.0, 200.0):
        tv[eps] = np.mean([matched_topic_errors(ZhuDPCollapsedGibbsLDA(3, eps, L, n_iter=60).fit(X, s), truth).mean()
                           for s in range(3)])
    cgs = np.mean([matched_topic_errors(run_cgs(X, 3, s, n_iter=60).phi, truth).mean() for s in range(3)])
    assert tv[0.05] > tv[2.0] > tv[200.0]
    assert abs(tv[200.0] - cgs) < 0.02


def test_recovers_planted_topics_at_generous_epsilon_but_not_at_tiny():
    X, truth = planted_corpus()
    phi = ZhuDPCollapsedGibbsLDA(3, epsilon=50.0, max_doc_length=64, n_iter=100).fit(X, 1).astype(np.float64)
    assert np.all(matched_topic_errors(phi, truth) < 0.1)
    noisy = ZhuDPCollapsedGibbsLDA(3, epsilon=0.01, max_doc_length=64, n_iter=100).fit(X, 1).astype(np.float64)
    assert matched_topic_errors(noisy, truth).mean() > 0.3


@pytest.mark.parametrize("params, message", [
    ({"epsilon": 0}, "epsilon"), ({"epsilon": float("inf")}, "epsilon"), ({"max_doc_length": 0}, "max_doc_length"),
    ({"max_doc_length": 2.5}, "max_doc_length"), ({"n_iter": 0}, "n_iter"), ({"beta": -1}, "beta"),
])
def test_bad_parameters_are_rejected(params, message):
    with pytest.raises(ValueError, match=message):
        ZhuDPCollapsedGibbsLDA(3, **params)
