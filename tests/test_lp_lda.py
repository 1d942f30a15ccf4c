"""topicaudit.targets.learners.lp_lda: randomised response, the server's estimates and reconstruction, the learner.

* flip rates of the randomiser: 1 → 1 with probability p, 0 → 1 with 1 − p
  (exact binomial tests), independently of position;
* f̂_v is unbiased with variance n·p(1 − p)/(2p − 1)² (z and chi-square tests
  over replicates);
* the reconstruction hits round(f̂_v) per column by adding to / removing from
  the received bits only;
* planted topics are recovered at a generous ε; guarantees, contract, registry.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from planted import assert_recovers, matched_topic_errors, planted_corpus
from scipy import stats

from topicaudit.errors import UserError
from topicaudit.targets import build_target
from topicaudit.targets.learners.lp_lda import LocallyPrivateLDA, estimate_counts, randomize_presence, reconstruct


@pytest.mark.parametrize("p", [0.55, 0.75, 0.95])
def test_randomised_response_flip_rates(p):
    rng = np.random.default_rng(0)
    presence = rng.random((400, 500)) < 0.3
    out = randomize_presence(presence, p, rng)
    kept = int(out[presence].sum())
    false_ones = int(out[~presence].sum())
    assert stats.binomtest(kept, int(presence.sum()), p).pvalue > 1e-3
    assert stats.binomtest(false_ones, int((~presence).sum()), 1 - p).pvalue > 1e-3
    # power: a keep probability off by 0.01 is rejected at this size
    assert stats.binomtest(kept, int(presence.sum()), p - 0.01).pvalue < 1e-3
    # the flips are independent of the bit's row and column (chi-square of flips by column group)
    flips = (out != presence).reshape(400, 10, 50).sum(axis=(0, 2))
    assert stats.chisquare(flips).pvalue > 1e-3


@pytest.mark.parametrize("p", [0.6, 0.9])
def test_count_estimates_are_unbiased_with_the_stated_variance(p):
    rng = np.random.default_rng(1)
    n, reps = 300, 4000
    true_counts = np.array([0, 3, 40, 150, 300])
    presence = np.zeros((n, true_counts.size), dtype=bool)
    for v, f in enumerate(true_counts):
        presence[rng.choice(n, f, replace=False), v] = True
    estimates = np.empty((reps, true_counts.size))
    for r in range(reps):
        estimates[r] = estimate_counts(randomize_presence(presence, p, rng).sum(axis=0), n, p)
    var = n * p * (1 - p) / (2 * p - 1) ** 2
    z = (estimates.mean(axis=0) - true_counts) / math.sqrt(var / reps)
    assert np.all(np.abs(z) < 4), z
    chi2 = ((estimates - true_counts) ** 2).sum(axis=0) / var  # ~ χ²(reps) under the stated variance
    pvalues = 2 * np.minimum(stats.chi2.cdf(chi2, reps), stats.chi2.sf(chi2, reps))
    assert np.all(pvalues > 1e-3), pvalues


def test_reconstruction_hits_the_rounded_estimates_by_adjusting_received_bits():
    rng = np.random.default_rng(2)
    p = 0.7
    received = rng.random((200, 60)) < 0.35
    recon = reconstruct(received, p, rng).toarray() > 0
    n = received.shape[0]
    target = np.clip(np.rint(estimate_counts(received.sum(axis=0), n, p)), 0, n)
    assert np.array_equal(recon.sum(axis=0), target)
    for v in range(received.shape[1]):
        if target[v] <= received[:, v].sum():  # ones removed only
            assert not np.any(recon[:, v] & ~received[:, v])
        else:  # ones added only
            assert not np.any(received[:, v] & ~recon[:, v])


def _planted(n=1000):
    """Short documents (10 words, sparse mixtures) over 3 topics of 20 words each."""
    return planted_corpus(block=20, n_docs=n, doc_len=10, doc_alpha=0.1)


def test_recovers_planted_topics_at_generous_epsilon():
    X, truth = _planted()
    phi = LocallyPrivateLDA(3, epsilon=5.0).fit(X, seed=0)
    assert_recovers(phi, truth)


def test_utility_degrades_with_privacy():
    X, truth = _planted()
    errors = [matched_topic_errors(LocallyPrivateLDA(3, epsilon=eps).fit(X, seed=0), truth).mean() for eps in (5.0, 1.0)]
    assert errors[0] < errors[1] - 0.2, errors


def test_fit_is_reproducible_by_seed():
    X, _ = _planted(n=200)
    learner = LocallyPrivateLDA(3, p=0.8, n_iter=20)
    assert np.array_equal(learner.fit(X, 3), learner.fit(X, 3))
    assert not np.array_equal(learner.fit(X, 3), learner.fit(X, 4))


def test_column_blocks_cover_the_vocabulary(monkeypatch):
    import topicaudit.targets.learners.lp_lda as lp

    monkeypatch.setattr(lp, "_BLOCK_CELLS", 7 * 200)  # 7 columns per block, the last one partial
    X, _ = _planted(n=200)
    learner = LocallyPrivateLDA(3, p=0.99)
    recon = learner.privatize_and_reconstruct(X, np.random.default_rng(0), np.random.default_rng(1))
    assert recon.shape == X.shape and set(np.unique(recon.data)) == {1.0}
    # with p = 0.99 the reconstruction keeps most true presences in every column
    truth = X.toarray() > 0
    hits = (recon.toarray() > 0) & truth
    assert np.all(hits.sum(axis=0) >= 0.8 * truth.sum(axis=0))


def test_guarantee_values():
    g = LocallyPrivateLDA(5, p=0.75).guarantee()
    assert g.epsilon == pytest.approx(math.log(3)) and g.delta == 0
    assert g.adjacency == "local-word" and g.basis == "theorem"
    assert g.parameters["epsilon_per_word"] == pytest.approx(math.log(3))
    assert "b·ε_b" in g.parameters["epsilon_per_document"]
    assert "V·ε_b" in g.parameters["epsilon_per_document_worst_case"]
    learner = LocallyPrivateLDA(5, epsilon=2.0)
    assert learner.keep_probability == pytest.approx(math.exp(2) / (1 + math.exp(2)))
    assert learner.guarantee().epsilon == 2.0


@pytest.mark.parametrize("kwargs", [{}, {"p": 0.7, "epsilon": 1.0}, {"p": 0.5}, {"p": 1.0}, {"epsilon": 0.0},
                                    {"epsilon": 1.0, "n_iter": 0}, {"epsilon": 1.0, "beta": 0.0},
                                    {"epsilon": 1.0, "n_iter": 3, "n_avg": 4}])
def test_bad_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError):
        LocallyPrivateLDA(3, **kwargs)


def test_registry_and_pipeline():
    target = build_target("lp-lda", 3, "all", {"epsilon": 3.0, "n_iter": 10})
    X, _ = _planted(n=100)
    release = target.fit(X, 0)
    assert release.phi.shape == (3, 60) and np.array_equal(release.vocabulary, np.arange(60))
    with pytest.raises(UserError, match="exactly one"):
        build_target("lp-lda", 3, "all", {})
