"""Few-model attacks (shrunk-variance LiRA, RMIA) against values computed by hand on small arrays."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.special import digamma
from small_shadows import IN, SHADOW

from topicaudit.attacks.features import document_features
from topicaudit.attacks.metrics import summarize
from topicaudit.attacks.registry import attack_scores, bounded_attacks, recommended_attack
from topicaudit.attacks.rmia import fit_offline_a, offline_log_ratio, population_scores, rmia_scores
from topicaudit.attacks.variance import (
    MIN_REGRESSION_DOCUMENTS,
    pooled_prior,
    posterior_variance,
    prior_strength,
    regressed_prior,
    shrunk_moments,
    shrunk_offline_scores,
    shrunk_online_scores,
    side_moments,
)

OBS = np.array([-10.5, -5.5, -19.5])
N_TOKENS = np.array([4.0, 2.0, 8.0])


def _side(d, inside):
    values = SHADOW[IN[:, d] == inside, d]
    return values.mean(), ((values - values.mean()) ** 2).sum(), values.size


# -- shrunk variance -------------------------------------------------------------------------------
def test_pooled_prior_is_the_pooled_variance_with_the_marginal_likelihood_strength():
    count = np.array([2, 2, 2])
    ss = np.array([_side(d, False)[1] for d in range(3)])
    prior, nu = pooled_prior(count, ss)
    assert prior == pytest.approx(ss.sum() / 3)  # Σ S / Σ (c − 1), c − 1 = 1 each
    grid = np.exp(np.linspace(np.log(0.5), np.log(1e4), 4000))
    loglik = [stats.f.logpdf(ss / prior, 1, g).sum() for g in grid]
    assert np.log(nu) == pytest.approx(np.log(grid[int(np.argmax(loglik))]), abs=0.01)


def test_posterior_variance_moves_from_the_prior_to_the_sample_variance():
    # (ν₀ s₀² + S) / (ν₀ + c − 1) by hand: ν₀ = 3, s₀² = 2, S = 10, c = 5 → (6 + 10) / 7
    assert posterior_variance(np.array([5]), np.array([10.0]), 2.0, 3.0)[0] == pytest.approx(16 / 7)
    assert posterior_variance(np.array([1]), np.array([0.0]), 2.0, 3.0)[0] == pytest.approx(2.0)  # c = 1: prior
    assert posterior_variance(np.array([10001]), np.array([5e4]), 2.0, 3.0)[0] == pytest.approx(5.0, rel=1e-3)


def test_shrunk_online_and_offline_scores_match_hand_computation():
    moments = {side: [_side(d, side) for d in range(3)] for side in (True, False)}
    expected_on, expected_off = [], []
    priors = {}
    for side in (True, False):
        ss = np.array([m[1] for m in moments[side]])
        s0 = ss.sum() / 3
        dof = np.ones(3)
        priors[side] = (s0, prior_strength(ss / dof, dof, s0))
    for d in range(3):
        var = {}
        for side in (True, False):
            mean, ss, c = moments[side][d]
            s0, nu = priors[side]
            var[side] = (nu * s0 + ss) / (nu + c - 1)
        mu_in, mu_out = moments[True][d][0], moments[False][d][0]
        expected_on.append(stats.norm.logpdf(OBS[d], mu_in, np.sqrt(var[True]))
                           - stats.norm.logpdf(OBS[d], mu_out, np.sqrt(var[False])))
        expected_off.append((OBS[d] - mu_out) / np.sqrt(var[False]))
    np.testing.assert_allclose(shrunk_online_scores(OBS, SHADOW, IN), expected_on, rtol=1e-9)
    np.testing.assert_allclose(shrunk_offline_scores(OBS, SHADOW, IN), expected_off, rtol=1e-9)


def test_one_shadow_per_side_uses_half_the_variance_of_in_minus_out():
    shadow, inside = SHADOW[:2], IN[:2]  # one complementary pair
    mu_in = np.where(inside[0], shadow[0], shadow[1])
    mu_out = np.where(inside[0], shadow[1], shadow[0])
    var = np.var(mu_in - mu_out) / 2
    expected = (OBS - mu_out) / np.sqrt(var)
    np.testing.assert_allclose(shrunk_offline_scores(OBS, shadow, inside), expected, rtol=1e-12)
    on = stats.norm.logpdf(OBS, mu_in, np.sqrt(var)) - stats.norm.logpdf(OBS, mu_out, np.sqrt(var))
    np.testing.assert_allclose(shrunk_online_scores(OBS, shadow, inside), on, rtol=1e-12)


def _two_kinds_of_documents(seed=0, n_docs=400, per_side=4):
    """Half the documents vary with σ² = 1 between fits, half with σ² = 100; a feature tells them apart."""
    rng = np.random.default_rng(seed)
    sigma = np.where(np.arange(n_docs) < n_docs // 2, 1.0, 10.0)
    inside = np.tile(np.array([True, False])[:, None], (per_side, n_docs))
    inside[:, ::2] = ~inside[:, ::2]  # complementary pairs, documents on both sides
    shadow = rng.normal(0.0, sigma, size=(2 * per_side, n_docs)) + 3.0 * inside
    feature = np.log(sigma)[:, None] + 0.01 * rng.normal(size=(n_docs, 1))
    return shadow, inside, feature, sigma


def test_regressed_prior_is_the_bias_corrected_log_variance_regression_at_the_pooled_level():
    shadow, inside, feature, _ = _two_kinds_of_documents()
    count, _, ss = side_moments(shadow, ~inside)
    dof = count - 1.0
    design = np.column_stack([np.ones(len(feature)), feature])
    target = np.log(ss / dof) - (digamma(dof / 2) - np.log(dof / 2))
    beta = np.linalg.lstsq(design, target, rcond=None)[0]
    expected = np.exp(design @ beta)
    expected *= ss.sum() / (dof * expected).sum()
    prior = regressed_prior(count, ss, feature)
    np.testing.assert_allclose(prior, expected, rtol=1e-10)
    assert (dof * prior).sum() == pytest.approx(ss.sum())  # the pooled level is kept


def test_the_pooled_prior_stays_where_documents_vary_alike_or_are_too_few():
    shadow, inside, feature, _ = _two_kinds_of_documents()
    count, _, ss = side_moments(shadow, ~inside)
    flat = np.random.default_rng(1).normal(size=feature.shape)  # explains nothing: predictions barely spread
    assert regressed_prior(count, ss, flat) is None
    few = MIN_REGRESSION_DOCUMENTS - 1
    assert regressed_prior(count[:few], ss[:few], feature[:few]) is None
    observed = shadow[0] + 1.0
    np.testing.assert_array_equal(shrunk_offline_scores(observed, shadow, inside, flat),
                                  shrunk_offline_scores(observed, shadow, inside))


def test_shrunk_scores_with_a_regressed_prior_match_hand_computation():
    shadow, inside, feature, _ = _two_kinds_of_documents()
    observed = shadow[0] + 1.0
    count, mu_out, ss = side_moments(shadow, ~inside)
    prior = regressed_prior(count, ss, feature)
    dof = count - 1.0
    nu = prior_strength(ss / dof, dof, prior)
    expected = (observed - mu_out) / np.sqrt((nu * prior + ss) / (nu + dof))
    np.testing.assert_allclose(shrunk_offline_scores(observed, shadow, inside, feature), expected, rtol=1e-12)


def test_a_prior_that_follows_the_document_recovers_both_kinds_of_variance():
    shadow, inside, feature, sigma = _two_kinds_of_documents()
    with_features = shrunk_moments(shadow, inside, feature)["var_out"]
    pooled = shrunk_moments(shadow, inside)["var_out"]
    quiet = sigma == 1.0
    # The pooled prior (about 50) swamps the quiet documents' own variance; the regressed one does not.
    assert np.median(pooled[quiet]) > 10
    assert 0.5 < np.median(with_features[quiet]) < 2
    assert 50 < np.median(with_features[~quiet]) < 200


def _as_statistics(zeta):
    return {"zeta": zeta, "neg_entropy": zeta, "logit_max": zeta, "std": zeta, "max": zeta}


def test_runs_give_the_shrunk_attacks_the_documents_word_counts():
    shadow, inside, _, sigma = _two_kinds_of_documents()
    # Long documents vary more between fits: 3 tokens against 60, over 50 words.
    rng = np.random.default_rng(2)
    lengths = np.where(sigma > 1, 60, 3)
    counts = sp.csr_matrix(np.array([np.bincount(rng.integers(0, 50, n), minlength=50) for n in lengths]))
    observed = shadow[0] + 1.0
    scores = attack_scores(_as_statistics(observed), _as_statistics(shadow), inside, lengths.astype(float),
                           counts=counts)
    features = document_features(counts)
    np.testing.assert_array_equal(scores["lira_offline_shrunk"],
                                  shrunk_offline_scores(observed, shadow, inside, features))
    np.testing.assert_array_equal(scores["lira_online_shrunk"],
                                  shrunk_online_scores(observed, shadow, inside, features))
    assert not np.allclose(scores["lira_offline_shrunk"], shrunk_offline_scores(observed, shadow, inside))


# -- RMIA ------------------------------------------------------------------------------------------
def test_rmia_online_is_the_target_likelihood_over_the_mean_of_both_sides_per_token():
    got, a = rmia_scores(OBS, SHADOW, IN, N_TOKENS, online=True)
    assert a is None
    for d in range(3):
        p = np.exp(SHADOW[:, d] / N_TOKENS[d])
        pr = 0.5 * (p[IN[:, d]].mean() + p[~IN[:, d]].mean())
        assert got[d] == pytest.approx(np.log(np.exp(OBS[d] / N_TOKENS[d]) / pr), rel=1e-12)
    document, _ = rmia_scores(OBS, SHADOW, IN, N_TOKENS, online=True, scale="document")
    p = np.exp(SHADOW[:, 0])
    assert document[0] == pytest.approx(OBS[0] - np.log(0.5 * (p[IN[:, 0]].mean() + p[~IN[:, 0]].mean())))


def test_rmia_offline_uses_the_papers_a_approximation():
    log_p = SHADOW / N_TOKENS
    got = offline_log_ratio(OBS / N_TOKENS, log_p, IN, a=0.3)
    for d in range(3):
        p_out = np.exp(log_p[~IN[:, d], d]).mean()
        pr = 0.5 * ((1 + 0.3) * p_out + (1 - 0.3))
        assert got[d] == pytest.approx(OBS[d] / N_TOKENS[d] - np.log(pr), rel=1e-12)


def test_offline_a_is_the_least_squares_fit_of_in_losses_on_out_losses():
    log_p = SHADOW / N_TOKENS
    p_in = np.array([np.exp(log_p[IN[:, d], d]).mean() for d in range(3)])
    p_out = np.array([np.exp(log_p[~IN[:, d], d]).mean() for d in range(3)])
    expected = ((1 - p_out) * (1 - p_in)).sum() / ((1 - p_out) ** 2).sum()
    assert fit_offline_a(log_p, IN) == pytest.approx(min(expected, 1.0), rel=1e-12)
    # It reads the shadows only: the target's ζ does not enter (same a whatever is observed).
    _, a1 = rmia_scores(OBS, SHADOW, IN, N_TOKENS, online=False)
    _, a2 = rmia_scores(OBS + 100, SHADOW, IN, N_TOKENS, online=False)
    assert a1 == a2 == fit_offline_a(log_p, IN)


def test_offline_a_pulls_pr_in_towards_one():
    # IN losses exactly half the OUT losses: a = 0.5.
    p_out = np.array([0.2, 0.4, 0.6])
    p_in = 1 - 0.5 * (1 - p_out)
    shadow = np.log(np.vstack([p_in, p_out]))
    inside = np.array([[True] * 3, [False] * 3])
    assert fit_offline_a(shadow, inside) == pytest.approx(0.5)


def test_one_reference_model():
    shadow, inside = SHADOW[:1], IN[:1]
    on, _ = rmia_scores(OBS, shadow, inside, N_TOKENS, online=True)
    np.testing.assert_allclose(on, (OBS - shadow[0]) / N_TOKENS)  # Pr(x) is the only model's
    off, a = rmia_scores(OBS, shadow, inside, N_TOKENS, online=False)
    assert a == 1.0  # nothing to fit a on
    np.testing.assert_allclose(off, on)
    assert "lira_online_shrunk" not in attack_scores(
        {"zeta": OBS, "neg_entropy": OBS, "logit_max": OBS, "std": OBS, "max": OBS},
        {"zeta": shadow, "neg_entropy": shadow, "logit_max": shadow, "std": shadow, "max": shadow},
        inside, N_TOKENS)


def test_population_score_is_the_fraction_of_z_beaten_and_ranks_like_the_ratio():
    ratio_z = np.array([0.0, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(population_scores(np.array([-1.0, 1.0, 1.5, 5.0]), ratio_z), [0, 0.5, 0.5, 1.0])
    np.testing.assert_allclose(population_scores(np.array([1.5]), ratio_z, gamma=np.e), [0.25])  # 1.5 − 1 ≥ 0 only
    rng = np.random.default_rng(0)
    member = rng.random(4000) < 0.5
    ratio = rng.normal(size=4000) + member
    population = rng.normal(size=2000)  # non-members' ratios
    score = population_scores(ratio, population)
    order = np.argsort(ratio)
    assert np.all(np.diff(score[order]) >= 0)  # a non-decreasing function of the ratio: the same ranking...
    by_ratio, by_score = summarize(ratio, member)["auc"], summarize(score, member)["auc"]
    assert by_score == pytest.approx(by_ratio, abs=0.002)  # ...up to ties


# -- selection -------------------------------------------------------------------------------------
def test_recommended_attack_rule():
    assert recommended_attack(1) == "rmia_online"
    assert [recommended_attack(n) for n in (2, 4, 8, 16, 64, 128, 1000)] == ["lira_offline_shrunk"] * 7
    with pytest.raises(ValueError):
        recommended_attack(0)
    from topicaudit.attacks.ranking import resolve_ranking
    assert resolve_ranking("recommended", 4) == ("lira_offline_shrunk", True)
    assert resolve_ranking("recommended", 128) == ("lira_offline_shrunk", True)
    assert resolve_ranking("recommended", 1) == ("rmia_online", True)
    assert resolve_ranking("lira_online_global", 4) == ("lira_online_global", False)


def test_attack_scores_has_stable_names_and_filters():
    target = {name: OBS for name in ("zeta", "neg_entropy", "logit_max", "std", "max")}
    shadow = {name: SHADOW for name in target}
    every = attack_scores(target, shadow, IN, N_TOKENS)
    assert {"lira_online_shrunk", "lira_offline_shrunk", "rmia_online", "rmia_offline", "lira_online"} <= set(every)
    assert "rmia_online" not in attack_scores(target, shadow, IN)  # no lengths, no RMIA
    chosen = attack_scores(target, shadow, IN, N_TOKENS, ["rmia_offline", "lira_offline_shrunk"])
    assert sorted(chosen) == ["lira_offline_shrunk", "rmia_offline"]
    assert bounded_attacks(list(chosen)) == list(chosen)  # no usual bounded attack: bound the chosen ones
    assert bounded_attacks(list(every)) == ["lira_online", "lira_offline"]


def test_config_lists_attacks_and_rejects_unknown_names():
    from topicaudit.engine.configuration.config import config_hash
    from topicaudit.engine.configuration.config_checks import validate
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.errors import UserError

    config = config_from_dict({"attack": {"attacks": ["rmia_online", "lira_offline_shrunk"]}})
    assert config.attack.attacks == ["rmia_online", "lira_offline_shrunk"]
    assert config_hash(config, "x") == config_hash(config_from_dict({}), "x")  # reporting choice, same models
    with pytest.raises(UserError, match="unknown attack 'rmia'"):
        validate(config_from_dict({"attack": {"attacks": ["rmia"]}}))
    with pytest.raises(UserError, match="list of strings"):
        config_from_dict({"attack": {"attacks": "rmia_online"}})


def test_check_bounds_the_attacks_it_is_told_and_names_missing_ones(tmp_path):
    import json

    from topicaudit.engine.check import check_run
    from topicaudit.errors import UserError

    rng = np.random.default_rng(0)
    member = rng.random(2000) < 0.5
    strong = member * 3.0 + rng.normal(size=2000)
    np.savez(tmp_path / "scores.npz", is_member=member, doc_index=np.arange(2000), lira_online=rng.normal(size=2000),
             lira_offline=rng.normal(size=2000), lira_offline_shrunk=strong)
    (tmp_path / "results.json").write_text(json.dumps({"schema": "topicaudit.results/1", "target": {
        "learner": "lda", "guarantee": {"epsilon": None, "delta": 0.0, "adjacency": None}},
        "epsilon_lower_bounds": {"delta": 1e-5}}))
    default = check_run(tmp_path, epsilon=1.0)
    assert sorted({name.split(":")[0] for name in default.bounds}) == ["natural/lira_offline", "natural/lira_online"]
    chosen = check_run(tmp_path, epsilon=1.0, attacks=["lira_offline_shrunk"])
    assert {name.split(":")[0] for name in chosen.bounds} == {"natural/lira_offline_shrunk"}
    assert chosen.violated  # the separable scores prove ε > 1
    with pytest.raises(UserError, match="no scores of that attack; it has: lira_online, lira_offline"):
        check_run(tmp_path, epsilon=1.0, attacks=["rmia_online"])
