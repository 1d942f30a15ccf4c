"""LiRA scores against values computed by hand with scipy.stats.norm."""
import numpy as np
from scipy.stats import norm

from topicaudit.attacks.lira import offline_scores, online_scores

# 4 shadows × 3 documents
SHADOW = np.array([[-10.0, -5.0, 1.0],
                   [-12.0, -6.0, 1.0],
                   [-11.0, -4.0, 1.0],
                   [-15.0, -7.0, 1.0]])
IN = np.array([[True, False, True],
               [False, True, False],
               [True, True, True],
               [False, False, False]])
OBS = np.array([-10.5, -5.5, 1.0])


def test_online_per_document_variance_matches_hand_computation():
    expected = []
    for d in range(2):
        ins, outs = SHADOW[IN[:, d], d], SHADOW[~IN[:, d], d]
        expected.append(norm.logpdf(OBS[d], ins.mean(), ins.std()) - norm.logpdf(OBS[d], outs.mean(), outs.std()))
    got = online_scores(OBS, SHADOW, IN)
    np.testing.assert_allclose(got[:2], expected, rtol=1e-12)
    # document 2 never varies: neutral score, not NaN
    assert got[2] == 0.0


def test_online_global_variance_pools_centred_values():
    ins = [SHADOW[IN[:, d], d] - SHADOW[IN[:, d], d].mean() for d in range(3)]
    outs = [SHADOW[~IN[:, d], d] - SHADOW[~IN[:, d], d].mean() for d in range(3)]
    sd_in, sd_out = np.concatenate(ins).std(), np.concatenate(outs).std()
    expected = [norm.logpdf(OBS[d], SHADOW[IN[:, d], d].mean(), sd_in)
                - norm.logpdf(OBS[d], SHADOW[~IN[:, d], d].mean(), sd_out) for d in range(3)]
    np.testing.assert_allclose(online_scores(OBS, SHADOW, IN, global_variance=True), expected, rtol=1e-12)


def test_offline_is_one_sided_z_against_out_models():
    outs = SHADOW[~IN[:, 0], 0]
    z = offline_scores(OBS, SHADOW, IN)
    assert np.isclose(z[0], (OBS[0] - outs.mean()) / outs.std())
    # members sit high: a higher observed statistic gives a higher score
    assert offline_scores(OBS + 1, SHADOW, IN)[0] > z[0]
    assert np.isclose(norm.cdf(z[0]), norm.cdf(OBS[0], outs.mean(), outs.std()))


def test_online_score_is_a_log_ratio_that_does_not_overflow():
    shadow = np.array([[0.0], [1e-3], [100.0], [100.001]])
    inside = np.array([[True], [True], [False], [False]])
    score = online_scores(np.array([0.0]), shadow, inside)
    assert np.isfinite(score).all() and score[0] > 700  # exp() of this overflows


def test_pooled_variance_centres_each_document_on_its_own_mean():
    """The pooled variance is the count-weighted mean of per-document variances, not the uncentred spread."""
    from topicaudit.attacks.lira import pooled_within_document_variance

    shadow = np.array([[0.0, 10.0], [2.0, 14.0], [1.0, 12.0], [3.0, 12.0]])
    mask = np.array([[True, True], [True, True], [False, True], [True, False]])
    # document 0: values 0, 2, 3 → mean 5/3, variance (25/9 + 1/9 + 16/9)/3 = 14/9
    # document 1: values 10, 14, 12 → mean 12, variance 8/3
    var = np.array([14 / 9, 8 / 3])
    pooled = pooled_within_document_variance(var, mask)
    np.testing.assert_allclose(pooled, (3 * 14 / 9 + 3 * 8 / 3) / 6)
    assert pooled[0] < np.var(shadow[mask])  # the between-document spread is left out
