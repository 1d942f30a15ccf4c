"""topicaudit.targets.learners.dp_svi: Park et al.'s DP stochastic variational LDA.

* the per-document sensitivity bound (‖x_d‖₂ ≤ N_d ≤ N, attained in the limit;
  ≤ C with clipping) and the E-step being vb_lda's, unchanged;
* the token cap draws tokens uniformly without replacement;
* the noise actually added has std z·Δ, negatives are clamped, minibatches are
  Poisson samples of rate q;
* the non-private counterpart recovers planted topics; guarantees and the
  registry.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.synthetic import synthetic_corpus
from topicaudit.targets import build_target
from topicaudit.targets.privacy.dp_svi_accounting import compute_epsilon
from topicaudit.targets.base import NO_GUARANTEE
from topicaudit.targets.learners.dp_svi import (
    DPStochasticVariationalLDA,
    _cap_counts,
    cap_tokens,
    minibatch_statistics,
)
from topicaudit.targets.learners.vb_lda import _EPS, _dirichlet_expectation_2d, _e_step

from planted import matched_topic_errors

INF = math.inf


def _random_counts(seed=0, n_docs=30, n_words=40, lam=0.8):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.poisson(lam, (n_docs, n_words)).astype(np.float64))


def _zero_corpus(n_docs=200, n_words=2000):
    return sp.csr_matrix((n_docs, n_words), dtype=np.float64)


# -- sensitivity and the E-step -----------------------------------------------------------


def test_statistics_are_vb_ldas_e_step_and_each_document_sums_to_its_length():
    X = _random_counts()
    k = 4
    lam = np.random.default_rng(1).gamma(100.0, 0.01, (k, X.shape[1]))
    s, norms = minibatch_statistics(X, lam, np.random.default_rng(2), doc_topic_prior=0.25)
    # the same E-step on the whole batch at once, as topicaudit.targets.learners.vb_lda runs it
    rng = np.random.default_rng(2)
    doc_topic = rng.gamma(100.0, 0.01, (X.shape[0], k))
    exp_doc_topic = np.exp(_dirichlet_expectation_2d(doc_topic))
    exp_component = np.exp(_dirichlet_expectation_2d(lam))
    sstats_t = np.zeros((X.shape[1], k))
    _e_step(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data,
            np.ascontiguousarray(exp_component.T), doc_topic, exp_doc_topic, 0.25, 100, 1e-3, _EPS,
            sstats_t, np.zeros(X.shape[0], dtype=np.int32))
    np.testing.assert_allclose(s, sstats_t.T * exp_component, rtol=1e-12, atol=1e-12)
    # expected counts: every document contributes exactly its tokens, so ‖x_d‖₂ ≤ ‖x_d‖₁ = N_d
    assert s.sum() == pytest.approx(X.sum(), rel=1e-12)
    lengths = np.asarray(X.sum(axis=1)).ravel()
    assert np.all(norms <= lengths + 1e-9)
    assert np.all(norms >= lengths / math.sqrt(k * X.shape[1]) - 1e-9)


def test_worst_case_document_attains_the_bound_and_clipping_caps_it():
    k, V, N = 3, 20, 50
    lam = np.full((k, V), 1.0)
    lam[0, 0] = 1e6                      # topic 0 is (almost) all word 0
    X = sp.csr_matrix(([float(N)], ([0], [0])), shape=(1, V))   # word 0 repeated N times
    _, norms = minibatch_statistics(X, lam, np.random.default_rng(0), doc_topic_prior=0.1)
    assert N * 0.999 < norms[0] <= N
    s, norms = minibatch_statistics(X, lam, np.random.default_rng(0), doc_topic_prior=0.1, clip_norm=7.0)
    assert norms[0] > 7 and np.linalg.norm(s) == pytest.approx(7.0)
    model = DPStochasticVariationalLDA(3, noise_multiplier=1.0, max_doc_tokens=N, clip_norm=7.0)
    assert model.sensitivity == 7.0
    assert DPStochasticVariationalLDA(3, noise_multiplier=1.0, max_doc_tokens=N).sensitivity == N
    assert DPStochasticVariationalLDA(3, noise_multiplier=1.0, max_doc_tokens=5, clip_norm=7.0).sensitivity == 5


def test_clipped_documents_have_norm_at_most_c():
    X = _random_counts(n_docs=40, lam=2.0)
    lam = np.random.default_rng(3).gamma(100.0, 0.01, (5, X.shape[1]))
    for d in range(5):
        s, norms = minibatch_statistics(X[d], lam, np.random.default_rng(d), doc_topic_prior=0.2, clip_norm=4.0)
        assert np.linalg.norm(s) <= 4.0 + 1e-9 and np.linalg.norm(s) == pytest.approx(min(4.0, norms[0]))


# -- token cap ---------------------------------------------------------------------------------


def test_cap_keeps_exactly_n_tokens_uniformly():
    X = sp.csr_matrix(np.array([[30.0, 10.0, 0.0], [1.0, 0.0, 2.0], [0.0, 0.0, 0.0]]))
    rng = np.random.default_rng(0)
    kept = []
    for _ in range(4000):
        Y = cap_tokens(X, 8, rng)
        rows = np.asarray(Y.sum(axis=1)).ravel()
        assert rows.tolist() == [8.0, 3.0, 0.0]
        assert np.all(Y.toarray() <= X.toarray())
        kept.append(Y.toarray()[0, 0])
    kept = np.array(kept)
    # hypergeometric: draw 8 of 40 tokens, 30 of them word 0: mean 6, variance 8·(30/40)(10/40)(32/39)
    var = 8 * 0.75 * 0.25 * 32 / 39
    assert abs(kept.mean() - 6.0) < 4 * math.sqrt(var / kept.size)
    assert kept.var() == pytest.approx(var, rel=0.1)
    assert cap_tokens(X, 100, rng) is X


def test_capped_one_word_documents_skip_their_uniforms_without_changing_the_stream():
    """A one-word document keeps cap tokens; its uniforms are skipped, not drawn, and every draw stays the same."""
    X = sp.csr_matrix(np.array([[800.0, 0, 0], [30.0, 10.0, 0], [0, 0, 900.0], [0, 3.0, 0], [12.0, 0, 9.0]]))
    rng, reference = np.random.default_rng(5), np.random.default_rng(5)
    lengths = np.asarray(X.sum(axis=1)).ravel()
    uniforms = reference.random(int(lengths[lengths > 8].sum()))   # every uniform drawn, as before the shortcut
    expected = _cap_counts(X.indptr.astype(np.int64), X.data, 8, uniforms)
    Y = cap_tokens(X, 8, rng)
    assert np.array_equal(Y.data, expected)
    assert Y.toarray()[[0, 2]].tolist() == [[8.0, 0, 0], [0, 0, 8.0]]
    assert np.asarray(Y.sum(axis=1)).ravel().tolist() == [8.0, 8.0, 8.0, 3.0, 8.0]
    assert rng.random(3).tolist() == reference.random(3).tolist()


# -- the mechanism: noise, clamping, sampling ---------------------------------------------------


@pytest.mark.parametrize("params", [
    {"noise_multiplier": 1.3, "max_doc_tokens": 50, "clip_norm": 7.0},
    {"epsilon": 2.0, "max_doc_tokens": 20},
])
def test_noise_std_is_multiplier_times_sensitivity_and_negatives_are_clamped(params):
    # An all-empty corpus makes the sum 0, so one step with ρ_1 = 1 (τ0 = 0) gives
    # λ = η + max(Y, 0)/q: (λ − η)·q is half-normal with the noise std σ.
    q, eta = 0.1, 0.5
    model = DPStochasticVariationalLDA(5, sampling_rate=q, n_iter=1, tau0=0.0, eta=eta, **params)
    assert model.noise_std == pytest.approx(model.noise_multiplier_ * model.sensitivity)
    if "noise_multiplier" in params:
        assert model.noise_std == pytest.approx(1.3 * 7.0)
    lam = model.fit_lambda(_zero_corpus(), seed=0)
    released = (lam - eta) * q
    assert released.min() >= 0
    assert abs((released == 0).mean() - 0.5) < 0.02
    sigma_hat = math.sqrt(2 * np.mean(released ** 2))           # E[max(Y,0)²] = σ²/2
    assert sigma_hat == pytest.approx(model.noise_std, rel=0.03)


def test_minibatches_are_poisson_samples():
    D, q, steps = 2000, 0.1, 60
    model = DPStochasticVariationalLDA(3, noise_multiplier=0.0, sampling_rate=q, n_iter=steps)
    model.fit_lambda(_zero_corpus(D, 50), seed=3)
    sizes = model.batch_sizes_
    total_sd = math.sqrt(D * steps * q * (1 - q))
    assert abs(sizes.sum() - D * q * steps) < 4 * total_sd
    assert sizes.var() == pytest.approx(D * q * (1 - q), rel=0.5)   # Binomial(D, q), not fixed S


def test_non_private_counterpart_adds_no_noise_and_claims_nothing():
    X = _random_counts()
    for model in (DPStochasticVariationalLDA(3, epsilon=INF, n_iter=5),
                  DPStochasticVariationalLDA(3, noise_multiplier=0.0, n_iter=5)):
        assert model.noise_std == 0.0
        assert model.guarantee() is NO_GUARANTEE
        phi = model.fit(X, seed=0)
        assert phi.dtype == np.float32 and np.allclose(phi.sum(axis=1), 1, atol=1e-5)


def test_non_private_svi_recovers_planted_topics():
    corpus, truth = synthetic_corpus(n_docs=1000, n_words=500, k=5, seed=0)
    model = DPStochasticVariationalLDA(5, epsilon=INF, sampling_rate=0.1, n_iter=300)
    errors = matched_topic_errors(model.fit(corpus.X, seed=1), truth)
    assert np.all(errors < 0.15), errors


def test_private_fit_is_deterministic_and_on_the_simplex():
    X = _random_counts(n_docs=60)
    model = DPStochasticVariationalLDA(4, epsilon=4.0, sampling_rate=0.2, n_iter=20, clip_norm=3.0)
    a, b = model.fit(X, seed=7), model.fit(X, seed=7)
    assert np.array_equal(a, b) and not np.array_equal(a, model.fit(X, seed=8))
    assert a.shape == (4, X.shape[1]) and a.dtype == np.float32
    assert np.all(a > 0) and np.allclose(a.sum(axis=1), 1, atol=1e-5)


# -- guarantee and configuration ----------------------------------------------------------------


def test_guarantee_names_the_accountant_and_the_mechanism():
    model = DPStochasticVariationalLDA(5, epsilon=2.0, delta=1e-5, sampling_rate=0.05, n_iter=100,
                                       max_doc_tokens=100, clip_norm=5.0)
    g = model.guarantee()
    assert g.epsilon <= 2.0 and g.epsilon == pytest.approx(2.0, abs=1e-3)
    assert g.epsilon == compute_epsilon(model.noise_multiplier_, 0.05, 100, 1e-5).epsilon
    assert (g.delta, g.adjacency, g.basis) == (1e-5, "document", "theorem")
    assert g.accountant == "dp-accounting RDP (Poisson-subsampled Gaussian)"
    p = g.parameters
    assert p["requested_epsilon"] == 2.0 and p["sensitivity"] == 5.0
    assert p["noise_std"] == pytest.approx(5.0 * p["noise_multiplier"])
    assert (p["sampling_rate"], p["steps"]) == (0.05, 100)
    g_json = g.to_json()
    assert g_json["epsilon"] == g.epsilon
    park = DPStochasticVariationalLDA(5, noise_multiplier=1.0, accountant="zcdp-park").guarantee()
    assert park.basis == "paper-claim"
    assert DPStochasticVariationalLDA(5).guarantee().parameters["requested_epsilon"] == 1.0


def test_registry_builds_it_and_reports_bad_parameters():
    pipeline = build_target("dp-svi", 5, params={"epsilon": 4.0, "sampling_rate": 0.2, "n_iter": 10,
                                                 "clip_norm": 3.0})
    # (the pipeline composes this with its vocabulary step's: by default the public one, "all", which spends none)
    assert pipeline.learner.guarantee().accountant.startswith("dp-accounting RDP")
    assert pipeline.learner.guarantee().epsilon <= 4.0
    assert math.isinf(build_target("dp-svi", 5, params={"epsilon": INF}).learner.guarantee().epsilon)
    with pytest.raises(UserError, match="not both"):
        build_target("dp-svi", 5, params={"epsilon": 1.0, "noise_multiplier": 1.0})
    with pytest.raises(UserError, match="unknown parameter"):
        build_target("dp-svi", 5, params={"sigma": 1.0})
    for bad in ({"sampling_rate": 0.0}, {"kappa": 0.4}, {"max_doc_tokens": 0}, {"accountant": "moments"},
                {"clip_norm": -1.0}, {"delta": 0.0}, {"epsilon": 0.0}):
        with pytest.raises(UserError):
            build_target("dp-svi", 5, params=bad)
    with pytest.raises(ValueError, match="integer counts"):
        DPStochasticVariationalLDA(2, epsilon=INF).fit(sp.csr_matrix(np.array([[0.5, 1.0]])), 0)
