import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve as sk_roc_curve

from topicaudit.attacks.metrics import auc, roc_curve, summarize, tpr_at_fpr


@pytest.mark.parametrize("seed", range(3))
def test_roc_and_auc_match_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    labels = rng.random(2000) < 0.5
    scores = np.round(rng.normal(labels * 0.5, 1.0), 1)  # many ties
    fpr, tpr, thr = roc_curve(scores, labels)
    sk_fpr, sk_tpr, sk_thr = sk_roc_curve(labels, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr)
    np.testing.assert_allclose(tpr, sk_tpr)
    np.testing.assert_allclose(thr[1:], sk_thr[1:])
    assert auc(fpr, tpr) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_tpr_at_fpr_takes_the_best_threshold_within_the_budget():
    # 4 members, 1000 non-members: three members on top, then one non-member,
    # then the 4th member tied with the other 999 non-members.
    labels = np.r_[np.ones(4, bool), np.zeros(1000, bool)]
    scores = np.r_[10, 9, 8, 0, 7, np.zeros(999)]
    fpr, tpr, _ = roc_curve(scores, labels)
    assert tpr_at_fpr(fpr, tpr, 0.0) == 0.75
    assert tpr_at_fpr(fpr, tpr, 0.001) == 0.75   # one false positive allowed; the next threshold costs 1000
    assert tpr_at_fpr(fpr, tpr, 1.0) == 1.0
    assert summarize(scores, labels)["tpr_at_fpr_0.001"] == 0.75


def test_summary_keys_are_stable():
    rng = np.random.default_rng(0)
    labels = rng.random(100) < 0.5
    assert set(summarize(rng.random(100), labels)) == {
        "auc", "tpr_at_fpr_0.001", "tpr_at_fpr_0.01", "balanced_accuracy"}


def test_nan_scores_rank_lowest_and_one_class_is_refused():
    fpr, tpr, _ = roc_curve(np.array([np.nan, 1.0]), np.array([False, True]))
    assert auc(fpr, tpr) == 1.0
    with pytest.raises(ValueError):
        roc_curve(np.ones(3), np.ones(3, bool))
