"""Quantile-regression attack: features, training rows and scores against values computed by hand."""
import numpy as np
import pytest
import scipy.sparse as sp
from small_shadows import IN, SHADOW

from topicaudit.attacks.features import document_features
from topicaudit.attacks.quantile import quantile_scores, training_rows
from topicaudit.attacks.registry import ATTACKS, attack_scores

# 3 documents × 4 words
COUNTS = sp.csr_matrix(np.array([[2, 1, 0, 0],
                                 [0, 1, 0, 3],
                                 [1, 1, 1, 0]]))


def test_document_features_by_hand():
    f = document_features(COUNTS)
    # tokens 3, 4, 3; distinct words 2, 2, 3
    np.testing.assert_allclose(f[:, 0], np.log1p([3, 4, 3]))
    np.testing.assert_allclose(f[:, 1], np.log1p([2, 2, 3]))
    # document frequencies of the words: 2, 3, 1, 1 of 3 documents
    log_df = np.log(np.array([2, 3, 1, 1]) / 3)
    np.testing.assert_allclose(f[:, 2], [(log_df[0] + log_df[1]) / 2, (log_df[1] + log_df[3]) / 2, log_df[:3].mean()])
    # Σ n² / word count, word counts 3, 3, 1, 3
    np.testing.assert_allclose(np.exp(f[:, 3]) - 1e-12, [4 / 3 + 1 / 3, 1 / 3 + 9 / 3, 1 / 3 + 1 / 3 + 1])


def test_training_rows_are_the_out_documents_with_a_leave_one_out_reference():
    features = np.arange(6.0).reshape(3, 2)
    n = np.array([2.0, 4.0, 5.0])
    x_train, y, x_target = training_rows(SHADOW, IN, features, n)
    # OUT (shadow, document) pairs in row-major order
    pairs = [(0, 1), (1, 0), (1, 2), (2, 1), (2, 2), (3, 0)]
    per_token = SHADOW / n
    np.testing.assert_allclose(y, [per_token[m, d] for m, d in pairs])
    # every document has exactly two OUT shadows: the other one is the reference
    other = {(0, 1): 2, (2, 1): 0, (1, 0): 3, (3, 0): 1, (1, 2): 2, (2, 2): 1}
    np.testing.assert_allclose(x_train[:, 2], [per_token[other[p], p[1]] for p in pairs])
    np.testing.assert_allclose(x_train[:, :2], features[[d for _, d in pairs]])
    out_mean = [per_token[[1, 3], 0].mean(), per_token[[0, 2], 1].mean(), per_token[[1, 2], 2].mean()]
    np.testing.assert_allclose(x_target, np.column_stack([features, out_mean]))
    # one pair: a single OUT shadow per document, so word-count features only
    x_train, y, x_target = training_rows(SHADOW[:2], IN[:2], features, n)
    assert x_train.shape == (3, 2) and x_target is features


def test_scores_with_identical_documents_use_the_quantiles_of_the_non_members():
    # identical count profiles give identical features; one pair gives no reference feature,
    # so every prediction is the training set's own quantile (linear interpolation).
    counts = sp.csr_matrix(2 * np.eye(3))
    shadow = np.array([[-3.0, -5.0, -4.0], [-6.0, -2.0, -7.0]])
    inside = np.array([[True, False, True], [False, True, False]])
    observed = np.array([-1.0, -9.0, -4.0])
    y = np.array([-5.0, -6.0, -7.0]) / 2  # shadow 0 is OUT on document 1, shadow 1 on 0 and 2
    q50, q90 = np.quantile(y, 0.5), np.quantile(y, 0.9)
    expected = (observed / 2 - q50) / (q90 - q50)
    np.testing.assert_allclose(quantile_scores(observed, shadow, inside, counts), expected, rtol=1e-9)


def test_the_target_never_enters_the_fit():
    rng = np.random.default_rng(0)
    counts = sp.random(60, 30, density=0.2, random_state=1, format="csr", data_rvs=lambda k: rng.integers(1, 4, k))
    counts = sp.csr_matrix(counts + sp.eye(60, 30, format="csr"))  # every document has a word
    shadow = -rng.gamma(5.0, 3.0, size=(4, 60))
    inside = np.zeros((4, 60), dtype=bool)
    inside[0] = rng.random(60) < 0.5
    inside[1] = ~inside[0]
    inside[2] = rng.random(60) < 0.5
    inside[3] = ~inside[2]
    observed = -rng.gamma(5.0, 3.0, size=60)
    # The fit's size does not matter here, only what enters it: 10 boosting rounds instead of the attack's 100.
    before = quantile_scores(observed, shadow, inside, counts, max_iter=10)
    changed = observed.copy()
    changed[7] += 5.0
    after = quantile_scores(changed, shadow, inside, counts, max_iter=10)
    assert after[7] > before[7]
    np.testing.assert_array_equal(np.delete(after, 7), np.delete(before, 7))


def test_registry_adds_quantile_regression_only_with_word_counts():
    assert "quantile_regression" in ATTACKS
    target = {name: SHADOW[0] for name in ("zeta", "neg_entropy", "logit_max", "std", "max")}
    shadow = {name: SHADOW for name in target}
    n_tokens = np.asarray(COUNTS.sum(axis=1)).ravel().astype(float)
    assert "quantile_regression" not in attack_scores(target, shadow, IN, n_tokens)
    scores = attack_scores(target, shadow, IN, n_tokens, counts=COUNTS)
    assert scores["quantile_regression"].shape == (3,)
    assert list(attack_scores(target, shadow, IN, n_tokens, ["rmia_online"], counts=COUNTS)) == ["rmia_online"]
    with pytest.raises(ValueError, match="outside a reference model"):
        quantile_scores(SHADOW[0], SHADOW[:1], np.ones((1, 3), dtype=bool), COUNTS)


def test_run_computes_quantile_regression_with_few_shadows_or_when_named():
    from topicaudit.attacks.registry import requested_attacks

    assert "quantile_regression" in requested_attacks(8, [])
    assert "quantile_regression" not in requested_attacks(64, [])
    assert "quantile_regression" in requested_attacks(64, ["lira_online", "quantile_regression"])
    assert "quantile_regression" not in requested_attacks(8, ["lira_online"])
