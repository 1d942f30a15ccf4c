"""topicaudit.attacks.utility: UMass coherence (paper Eq. 4), held-out perplexity, and their place in results.json."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma

from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.engine.run import execute_run
from topicaudit.inputs.synthetic import synthetic_corpus
from topicaudit.attacks.utility import heldout_perplexity, infer_theta, release_utility, umass_coherence
from topicaudit.targets.base import Release

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")


def _brute_coherence(phi, X, M):
    dense = X.toarray() > 0
    out = []
    for t in range(phi.shape[0]):
        top = sorted(range(phi.shape[1]), key=lambda v: (-phi[t, v], v))[:M]
        total = 0.0
        for m in range(1, M):
            for l in range(m):
                d_l = dense[:, top[l]].sum()
                if d_l == 0:
                    continue
                d_ml = (dense[:, top[m]] & dense[:, top[l]]).sum()
                total += math.log((d_ml + 1) / d_l)
        out.append(total)
    return np.array(out)


def test_coherence_matches_brute_force_on_a_tiny_matrix():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.4, (30, 12)).astype(float))
    phi = rng.dirichlet(np.full(12, 0.3), 3)
    phi[1, 4] = phi[1, 7] = phi[1].max() + 0.1  # a tie: lower column id ranks first
    result = umass_coherence(phi, X, top_n=5)
    np.testing.assert_allclose(result.per_topic, _brute_coherence(phi, X, 5), rtol=1e-12)
    assert result.mean == pytest.approx(result.per_topic.mean())
    assert list(result.top_words[1, :2]) == [4, 7]
    assert result.skipped_pairs == 0


def test_coherence_by_hand_and_its_denominator_is_the_higher_ranked_word():
    # words 0, 1, 2 ranked in that order; D(0) = 3, D(1) = 2, D(0,1) = 1, D(0,2) = 0, D(1,2) = 1
    X = sp.csr_matrix(np.array([[1, 0, 0], [1, 1, 0], [1, 0, 0], [0, 1, 1]], dtype=float))
    phi = np.array([[0.5, 0.3, 0.2]])
    expected = math.log(2 / 3) + math.log(1 / 3) + math.log(2 / 2)
    assert umass_coherence(phi, X, top_n=3).mean == pytest.approx(expected, rel=1e-14)


def test_pairs_with_an_absent_higher_ranked_word_are_skipped():
    X = sp.csr_matrix(np.array([[0, 1, 1], [0, 1, 0]], dtype=float))
    phi = np.array([[0.6, 0.3, 0.1]])  # word 0 never occurs
    result = umass_coherence(phi, X, top_n=3)
    assert result.skipped_pairs == 2
    assert result.mean == pytest.approx(math.log(2 / 2))


def test_true_topics_have_lower_perplexity_than_uniform_ones():
    corpus, topics = synthetic_corpus(400, 300, 4, 40, seed=3)
    X = corpus.X
    true = heldout_perplexity(topics, X)
    uniform = heldout_perplexity(np.full((4, 300), 1 / 300), X)
    assert uniform == pytest.approx(300, rel=1e-12)  # uniform Φ: every token has probability 1/V
    assert true < 0.5 * uniform
    shuffled = topics[:, np.random.default_rng(0).permutation(300)]
    assert true < heldout_perplexity(shuffled, X)


def test_e_step_matches_a_reference_implementation():
    corpus, topics = synthetic_corpus(20, 50, 3, 30, seed=1)
    X = corpus.X
    alpha = 1 / 3
    theta, loglik = infer_theta(topics, X, alpha=alpha, tol=1e-12, max_iter=5000)
    for d in range(5):
        row = X[d]
        ids, cnt = row.indices, row.data
        gamma = np.full(3, alpha + cnt.sum() / 3)
        for _ in range(5000):
            e = np.exp(digamma(gamma) - digamma(gamma.sum()))
            norm = e @ topics[:, ids]
            new = alpha + e * (topics[:, ids] @ (cnt / norm))
            if np.abs(new - gamma).mean() < 1e-13:
                gamma = new
                break
            gamma = new
        np.testing.assert_allclose(theta[d], gamma / gamma.sum(), rtol=1e-8)
        assert loglik[d] == pytest.approx(np.sum(cnt * np.log(theta[d] @ topics[:, ids])), rel=1e-10)


def test_release_utility_uses_members_for_coherence_and_non_members_for_perplexity():
    corpus, topics = synthetic_corpus(100, 80, 3, 20, seed=2)
    vocabulary = np.arange(10, 70)
    phi = topics[:, vocabulary] / topics[:, vocabulary].sum(axis=1, keepdims=True)
    release = Release(phi=phi.astype(np.float32), vocabulary=vocabulary)
    members = np.arange(100) % 2 == 0
    out = release_utility(corpus.X, release, members)
    Xv = corpus.X[:, vocabulary]
    assert out["umass_coherence"] == pytest.approx(umass_coherence(phi, Xv[members]).mean, rel=1e-6)
    assert out["heldout_perplexity"] == pytest.approx(heldout_perplexity(phi, Xv[~members]), rel=1e-6)
    assert out["heldout_tokens"] == int(Xv[~members].sum())


def test_model_info_round_trips_and_old_model_files_still_load(tmp_path):
    run = RunDirectory(tmp_path)
    run.models.mkdir(parents=True)
    info = {"monitor": {"epsilon_word": [1.5, 3.0], "note": "ε ≥ 0"}}
    release = Release(phi=np.full((2, 3), 1 / 3, dtype=np.float32), vocabulary=np.arange(3), info=info)
    run.save_model(0, release, "abc", 1.0)
    loaded, seconds = run.load_model(0, "abc")
    assert loaded.info == info and seconds == 1.0
    # a file written before releases had info
    with open(run.model_path(1), "wb") as handle:
        np.savez(handle, phi=release.phi, vocabulary=release.vocabulary, config_hash=np.str_("abc"),
                 fit_seconds=np.float64(2.0))
    run.record(run.model_path(1).relative_to(tmp_path).as_posix())  # listed, as a run's own files are
    old, _ = run.load_model(1, "abc")
    assert old.info == {}
    np.testing.assert_array_equal(old.phi, release.phi)


def test_results_json_holds_utility_and_monitor_after_a_tiny_audit(tmp_path):
    config = config_from_dict({
        "synthetic": {"n_docs": 120, "n_words": 200, "mean_length": 20, "k": 3},
        "target": {"learner": "cgs-monitor", "k": 3, "params": {"n_iter": 20}},
        "attack": {"shadows": 4}, "ray": {"num_cpus": 1}, "output": str(tmp_path / "run"),
    })
    results = execute_run(config, quiet=True)
    assert json.loads((tmp_path / "run" / "results.json").read_text()) == results
    utility = results["utility"]
    assert set(utility) >= {"umass_coherence", "umass_coherence_per_topic", "top_n", "heldout_perplexity",
                            "heldout_documents", "coherence_documents"}
    assert utility["top_n"] == 10 and len(utility["umass_coherence_per_topic"]) == 3
    assert utility["umass_coherence"] < 0 and utility["heldout_perplexity"] > 1
    assert utility["heldout_documents"] == "target non-members"
    monitor = results["target"]["monitor"]
    assert len(monitor["epsilon_word"]) == 20 and monitor["epsilon_word"][-1] <= monitor["epsilon_document"][-1]
    assert results["target"]["guarantee"]["epsilon"] is None


def test_release_utility_checks_phi_and_counts_once_and_agrees_with_the_public_functions(monkeypatch):
    from topicaudit.attacks import utility

    rng = np.random.default_rng(5)
    phi = rng.dirichlet(np.ones(12), size=3)
    X = sp.csr_matrix(rng.integers(0, 3, size=(40, 12)))
    is_member = rng.random(40) < 0.5
    release = Release(phi=phi, vocabulary=np.arange(12))
    calls = {"phi": 0, "counts": 0}
    real_phi, real_counts = utility.check_phi, utility.check_counts

    def counted(kind, real):
        def check(*args, **kwargs):
            calls[kind] += 1
            return real(*args, **kwargs)
        return check

    monkeypatch.setattr(utility, "check_phi", counted("phi", real_phi))
    monkeypatch.setattr(utility, "check_counts", counted("counts", real_counts))
    result = release_utility(X, release, is_member)
    assert calls == {"phi": 1, "counts": 1}
    monkeypatch.undo()
    assert result["umass_coherence"] == umass_coherence(phi, X[is_member]).mean
    assert result["heldout_perplexity"] == heldout_perplexity(phi, X[~is_member])
