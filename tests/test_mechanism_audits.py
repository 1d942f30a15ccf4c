"""Mechanism audits: transcripts are what the model consumed, scores match hand computation, paired
canaries, the claimed curve's bound, "no signal", and the gate's verdict on correct and buggy learners."""
import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma, ndtr

from topicaudit.attacks.canaries import ANCHORS, make_canaries, resolve_kind
from topicaudit.attacks.mechanism import (
    dpsu_scores,
    fresh_document_weights,
    released_documents,
    released_fresh_canaries,
    laplace_column_llr,
    laplace_llr,
    mechanism_scores,
    simulate_scores,
    subsampled_gaussian_step_scores,
)
from topicaudit.bounds.epsilon import Method, gdp_epsilon
from topicaudit.bounds.fdp import eps_lb_fdp_one_run, eps_lb_profile_one_run
from topicaudit.bounds.one_run import delta_tail_bound
from topicaudit.cli.main import main
from topicaudit.engine.claim_tests import ClaimShape
from topicaudit.engine.power import simulated_power
from topicaudit.engine.storage.model_file import transcript_from_arrays
from topicaudit.engine.storage.results import MechanismInfo
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.targets import build_target
from topicaudit.mechanisms import (GaussianNoise, GeometricNoise, LaplaceNoise, RandomisedResponse, Recorder,
                                   SetUnion, Transcript)
from topicaudit.targets.privacy.guarantee import Adjacency
from topicaudit.targets.bug_variants import BUGS, BrokenLearner, BrokenVocabulary
from topicaudit.targets.learners.dp_cgs import ZhuDPCollapsedGibbsLDA
from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA
from topicaudit.targets.learners.dpsu import GreedyWeightedDPSU, PolicyLaplaceDPSU
from topicaudit.targets.privacy.analytic_gaussian import gaussian_delta, gaussian_step_profile
from topicaudit.targets.privacy.analytic_gaussian import analytic_gaussian_sigma
from topicaudit.targets.learners.lp_lda import LocallyPrivateLDA, estimate_counts
from topicaudit.targets.learners.poisson_factorization import (
    LocallyPrivatePoissonFactorization,
    _released_phi,
    _streams,
    lppf_samples,
)

SMALL_CORPUS = {"synthetic": {"n_docs": 300, "n_words": 400, "mean_length": 30}}


def _fit_recorded(learner, X, seed, columns):
    """Φ and the transcript of the releases a learner records of ``columns``."""
    record = Recorder(columns)
    return learner.fit(X, seed, record=record), record.transcript()


def _select_recorded(step, X, seed, columns):
    record = Recorder(columns)
    return step.select(X, seed, record=record), record.transcript()


def _counts(seed=0, n_docs=60, n_words=40):
    rng = np.random.default_rng(seed)
    X = rng.poisson(0.4, (n_docs, n_words)).astype(float)
    X[np.arange(n_docs), rng.integers(0, n_words, n_docs)] += 1.0  # no empty document
    return sp.csr_matrix(X)


# -- the transcript is what the model consumed ----------------------------------------------------
def test_dp_svi_records_the_very_noisy_sums_and_top_topics_its_updates_used():
    X = _counts()
    learner = DPStochasticVariationalLDA(3, epsilon=2.0, n_iter=6, sampling_rate=0.5)
    columns = np.arange(X.shape[1])
    phi, transcript = _fit_recorded(learner, X, 11, columns)
    y, top = transcript.arrays["noisy_sums"].astype(np.float64), transcript.arrays["top_topics"]
    # Replay the stochastic M-step from the data-independent start using only the recorded sums.
    lam = np.random.default_rng(11).gamma(100.0, 1.0 / 100.0, (3, X.shape[1]))
    for t in range(1, 7):
        assert np.array_equal(top[t - 1], np.argmax(digamma(lam) - digamma(lam.sum(axis=1))[:, None], axis=0))
        rho = (learner.tau0 + t) ** (-learner.kappa)
        lam = (1 - rho) * lam + rho * (1.0 / 3 + np.maximum(y[t - 1], 0.0) / 0.5)
    assert np.allclose(lam / lam.sum(axis=1, keepdims=True), phi, rtol=1e-4)
    assert np.array_equal(phi, learner.fit(X, 11))  # observing does not change the model


def test_lp_lda_records_the_reports_the_server_reconstructed_from():
    X = _counts()
    learner = LocallyPrivateLDA(3, epsilon=1.0, n_iter=5)
    columns = np.array([2, 5, 17])
    randomize, server, _ = np.random.SeedSequence(4).spawn(3)
    record = Recorder(columns)
    recon = learner.privatize_and_reconstruct(X, np.random.default_rng(randomize), np.random.default_rng(server),
                                              record)
    reports = record.transcript().arrays["reports"]
    target = np.clip(np.rint(estimate_counts(reports.sum(axis=0), X.shape[0], learner.keep_probability)), 0,
                     X.shape[0])
    assert np.array_equal(np.asarray(recon[:, columns].sum(axis=0)).ravel(), target)
    phi, transcript = _fit_recorded(learner, X, 4, columns)
    assert np.array_equal(transcript.arrays["reports"], reports) and np.array_equal(phi, learner.fit(X, 4))


def test_lppf_records_the_noisy_counts_its_sampler_saw():
    X = _counts()
    learner = LocallyPrivatePoissonFactorization(3, epsilon=1.0, n_iter=4)
    phi, transcript = _fit_recorded(learner, X, 9, np.arange(X.shape[1]))
    _, rng = _streams(9)
    samples = lppf_samples(transcript.arrays["reports"], learner.mechanism_alpha, 3, rng, 4, learner.a0, learner.b0)
    assert np.array_equal(_released_phi(samples, 4, 1), phi)


def test_dp_cgs_records_the_noisy_counts_phi_is_made_of():
    X = _counts()
    learner = ZhuDPCollapsedGibbsLDA(3, epsilon=1.0, n_iter=5)
    phi, transcript = _fit_recorded(learner, X, 2, np.array([3, 8]))
    weights = np.maximum(transcript.arrays["noisy_counts"][0].astype(np.float64), 0) + learner.beta
    assert transcript.arrays["noisy_counts"].shape == (1, 3, 2) and np.array_equal(phi, learner.fit(X, 2))
    assert np.allclose(phi[:, 3] / phi[:, 8], weights[:, 0] / weights[:, 1], rtol=1e-5)


def test_hdp_lda_records_every_release_and_phi_is_made_of_the_last():
    from topicaudit.targets.learners.hdp_lda import ZhaoHDPLDA
    X = _counts()
    learner = ZhaoHDPLDA(3, n_iter=6)
    phi, transcript = _fit_recorded(learner, X, 3, np.array([1, 4]))
    releases = transcript.arrays["noisy_counts"]
    assert releases.shape == (6, 3, 2) and np.array_equal(phi, learner.fit(X, 3))
    weights = np.maximum(releases[-1].astype(np.float64), 0) + learner.beta
    assert np.allclose(phi[:, 1] / phi[:, 4], weights[:, 0] / weights[:, 1], rtol=1e-4)
    c = make_canaries(X, 2, "word", 1, seed=0)
    moved = Transcript(learner.mechanism(), c.words, {"noisy_counts": releases})
    by_hand = sum(laplace_column_llr(step.astype(np.float64), 1, 2.0 / learner.epsilon_l) for step in releases)
    assert np.allclose(mechanism_scores(moved, c)["mechanism"], by_hand)


# -- scores against hand computation ----------------------------------------------------------------
def _word_canaries(hosts, n_words=10):
    c = make_canaries(_counts(n_docs=20, n_words=n_words), len(hosts), "word", 1, seed=0)
    object.__setattr__(c, "hosts", np.asarray(hosts, dtype=np.int64))
    return c


def test_randomized_response_and_geometric_scores_are_the_likelihood_ratio_of_the_host_report():
    c = _word_canaries([0, 3, 5])
    reports = np.zeros((20, 3), dtype=bool)
    reports[0, 0] = reports[5, 2] = True
    reports[3, 0] = True  # another user's bit in canary 0's column: no evidence about canary 0
    rr = Transcript(RandomisedResponse(0.75), c.words, {"reports": reports})
    assert np.allclose(mechanism_scores(rr, c)["mechanism"], [math.log(3), -math.log(3), math.log(3)])
    counts = np.zeros((20, 3), dtype=np.int64)
    counts[0, 0], counts[3, 1], counts[5, 2] = 2, 0, -1
    geo = Transcript(GeometricNoise(0.5), c.words, {"reports": counts})
    assert np.allclose(mechanism_scores(geo, c)["mechanism"], [math.log(2), -math.log(2), -math.log(2)])
    # a column the transcript lacks (a vocabulary step dropped it) gives no evidence
    partial = Transcript(GeometricNoise(0.5), c.words[:2], {"reports": counts[:, :2]})
    assert mechanism_scores(partial, c)["mechanism"][2] == 0.0


def test_laplace_scores_match_hand_computation():
    y = np.array([[10.0, -3.0], [2.0, 50.0]])
    L, b = 8, 4.0
    by_hand = [math.log(0.5 * (math.exp((10 - 2) / b) + math.exp((2 - 6) / b))),
               math.log(0.5 * (math.exp((3 - 11) / b) + math.exp((50 - 42) / b)))]
    assert np.allclose(laplace_column_llr(y, L, b), by_hand)


def test_saturated_laplace_ratios_tie_exactly_so_rounding_cannot_give_the_coins_away():
    # count + noise in float64 rounds differently from noise alone; the textbook |y| − |y − 1| carried those
    # bits into the saturated scores, and the guesses' tie-breaking turned them into "evidence" (ε_LB 3.1 for a
    # 0.98-DP paired Laplace canary).
    rng = np.random.default_rng(0)
    coins = rng.random(10000) < 0.5
    y = rng.laplace(0.0, 2.0, 10000) + coins
    ratio = laplace_column_llr(y[None, :], 1, 2.0)
    assert set(np.unique(ratio[(y >= 1) | (y <= 0)])) == {-0.5, 0.5}
    # DPSU's anchored weights are scored unclipped (a wrong budget moves them past the window): no saturated
    # value exists whose last bits could differ, and inside the window the score is the same ratio.
    weights = dpsu_scores(y + 3.0, np.zeros(10000, bool), np.full(10000, 3),
                          SetUnion("laplace", 2.0, rho=5.0, gamma=10.0, epsilon=1.0, delta=1e-5))
    inside = (y > 0) & (y < 1)
    assert np.allclose(weights[inside], laplace_llr(y[inside] + 3.0, 3.0, 4.0, 2.0))
    assert np.array_equal(np.argsort(weights, kind="stable"), np.argsort(y + 3.0, kind="stable"))
    scores = simulate_scores(LaplaceNoise(2.0, 1), coins, 1, 1.0, np.random.default_rng(1), paired=True, k=1)
    assert eps_lb_fdp_one_run(scores, coins, 0.0, 0.05, family="pure").epsilon <= 1.0  # the claim: ε = 2/b = 1


def test_a_dp_svi_step_scores_n_tokens_in_the_columns_top_topic_clipped_as_claimed():
    y = np.array([[[30.0, 5.0], [-10.0, 40.0]], [[0.0, -20.0], [25.0, 10.0]]])    # (T=2, k=2, 2 canaries)
    top = np.array([[0, 1], [1, 0]], dtype=np.int16)                              # (T=2, 2 canaries)
    sigma, q = 20.0, 0.1

    def by_hand(size, picks):
        return sum(math.log(1 - q + q * math.exp((size * v - size**2 / 2) / sigma**2)) for v in picks)
    # canary 0 sits in topic 0, then topic 1; canary 1 in topic 1, then topic 0
    picks = ([30.0, 25.0], [40.0, -20.0])
    assert np.allclose(subsampled_gaussian_step_scores(y, top, 50, None, sigma, q), [by_hand(50, p) for p in picks])
    assert np.allclose(subsampled_gaussian_step_scores(y, top, 50, 10.0, sigma, q), [by_hand(10, p) for p in picks])
    assert np.allclose(subsampled_gaussian_step_scores(y, top, 50, None, sigma, 1.0),
                       [sum((50 * v - 1250) / 400 for v in p) for p in picks])


def test_a_one_word_documents_e_step_puts_its_tokens_in_its_top_topic():
    """Why the DP-SVI score places the canary's N tokens in its column's top topic: the E-step ends there."""
    elog = np.log(np.array([0.35, 0.33, 0.32]))
    gamma = np.ones(3)
    for _ in range(1000):
        phi = np.exp(digamma(gamma) - digamma(gamma.sum()) + elog)
        gamma = 0.2 + 200 * phi / phi.sum()
    assert np.argmax(gamma) == 0 and gamma[0] > 199


# -- paired canaries -----------------------------------------------------------------------------------
def test_paired_canaries_train_exactly_one_document_of_each_pair():
    X = _counts()
    c = make_canaries(X, 30, "paired", 6, seed=1)
    train = c.training_matrix(X)
    fresh = train[X.shape[0]:, X.shape[1]:].toarray()
    assert train.shape == (X.shape[0] + 30, X.shape[1] + 60)
    heads = fresh[:, :30].sum(axis=0) > 0
    tails = fresh[:, 30:].sum(axis=0) > 0
    assert np.array_equal(heads, c.coins) and np.array_equal(tails, ~c.coins)
    assert np.all(fresh.sum(axis=1) == 6)
    assert np.array_equal(c.observed_columns, np.r_[c.words, c.alternate_words])
    noisy = np.zeros((2, 60))
    noisy[0, np.r_[c.words[c.coins], c.alternate_words[~c.coins]] - X.shape[1]] = 6.0
    release = LaplaceNoise(1.0, 6, noisy_sweep=True)  # DP-CGS's: one release after a noisy sweep
    scores = mechanism_scores(Transcript(release, c.observed_columns, {"noisy_counts": noisy[None]}), c)
    assert set(scores) == {"mechanism", "mechanism_mass"}
    for values in scores.values():
        assert np.all((values > 0) == c.coins)  # heads word's evidence minus tails word's
    assert np.allclose(np.abs(scores["mechanism_mass"]), math.log(6 + 1e-3) - math.log(1e-3))


def test_paired_word_canaries_put_the_heads_or_the_tails_word_in_the_same_host():
    X = _counts()
    c = make_canaries(X, 30, "paired-word", 1, seed=2)
    train = c.training_matrix(X)
    assert train.shape == (X.shape[0], X.shape[1] + 60) and c.word_level
    assert np.array_equal(train[:, : X.shape[1]].toarray(), X.toarray())  # only the one token is added
    fresh = train[:, X.shape[1]:].toarray()
    assert fresh.sum() == 30
    heads, tails = fresh[:, :30], fresh[:, 30:]
    assert np.array_equal(heads.sum(axis=0) > 0, c.coins) and np.array_equal(tails.sum(axis=0) > 0, ~c.coins)
    assert np.array_equal((heads + tails).argmax(axis=0), c.hosts)  # the same place either way
    assert np.array_equal(c.observed_columns, np.r_[c.words, c.alternate_words])


def test_a_paired_word_canary_scores_every_release_of_its_heads_word_minus_its_tails_word():
    X = _counts()
    c = make_canaries(X, 4, "paired-word", 1, seed=3)
    releases = np.random.default_rng(0).laplace(0.0, 2.0, (3, 2, 8))  # T = 3 releases, k = 2, 8 columns
    t = Transcript(LaplaceNoise(2.0, 1, releases=3), c.observed_columns, {"noisy_counts": releases})

    def llr(y):  # log mean over the 2 topics of exp((|y_t| − |y_t − 1|)/b), summed over the releases
        return sum(math.log(np.mean(np.exp((np.abs(r) - np.abs(r - 1)) / 2.0))) for r in y)
    by_hand = [llr(releases[:, :, i]) - llr(releases[:, :, 4 + i]) for i in range(4)]
    assert np.allclose(mechanism_scores(t, c)["mechanism"], by_hand)


def test_central_word_claims_get_paired_word_canaries_and_local_word_claims_word_canaries(tmp_path):
    assert resolve_kind("auto", Adjacency.WORD) == "paired-word"
    assert resolve_kind("auto", Adjacency.LOCAL_WORD) == "word"
    results = execute_run(config_from_dict({
        **SMALL_CORPUS, "output": str(tmp_path / "h"),
        "target": {"learner": "hdp-lda", "k": 3, "vocabulary": "all", "params": {"n_iter": 2}},
        "attack": {"shadows": 0, "canaries": {"count": 40}}}), quiet=True)
    c = results["canaries"]
    assert (c["kind"], c["adjacency"], c["observe"], c["paired"]) == ("paired-word", "word", "mechanism", True)
    assert c["mechanism"]["paired"] and c["mechanism"]["parameters"]["releases"] == 2


def test_replace_one_claims_get_paired_canaries_longer_than_the_cap(tmp_path):
    results = execute_run(config_from_dict({
        **SMALL_CORPUS, "output": str(tmp_path / "r"),
        "target": {"learner": "dp-cgs", "k": 3, "vocabulary": "all", "params": {"epsilon": 2.0, "n_iter": 10,
                                                                                  "max_doc_length": 8}},
        "attack": {"shadows": 0, "canaries": {"count": 40}}}), quiet=True)
    c = results["canaries"]
    assert c["kind"] == "paired" and c["length"] == 32 and c["observe"] == "mechanism"
    assert c["threat_model"].startswith("everything the mechanism releases")


# -- bounds ---------------------------------------------------------------------------------------------
def test_the_curve_bound_of_a_pure_profile_is_the_pure_f_dp_bound():
    rng = np.random.default_rng(0)
    labels = rng.random(400) < 0.5
    scores = labels + rng.normal(0, 0.6, 400)
    pure = eps_lb_fdp_one_run(scores, labels, 0.0, 0.05, family="pure", k_plus=[50], k_minus=[50])
    curve = eps_lb_profile_one_run(scores, labels, ([2.0], [0.0]), 2.0, 0.05, k_plus=[50], k_minus=[50])
    assert pure.epsilon > 0 and curve.epsilon == pytest.approx(pure.epsilon, abs=1e-5)


def test_tied_scores_give_no_signal_and_never_a_ceiling(tmp_path, capsys):
    # A DP vocabulary step releases no canary's fresh word, so every score of the release ties.
    execute_run(config_from_dict({**SMALL_CORPUS, "output": str(tmp_path / "t"),
                                "target": {"learner": "lda", "k": 3, "vocabulary": "dpsu-laplace"},
                                "attack": {"shadows": 0, "canaries": {"count": 60, "kind": "unique-word",
                                                                       "observe": "release"}}}), quiet=True)
    scores = np.load(tmp_path / "t" / "canary_scores.npz")
    assert all(np.unique(scores[name]).size == 1 for name in scores.files if name != "ids")
    assert main(["check", str(tmp_path / "t"), "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NO SIGNAL") and "could refute" not in out
    verdict = json.loads((tmp_path / "t" / "check.json").read_text())
    assert verdict["no_signal"] and verdict["verdict"] == "NO SIGNAL"
    assert "<skipped" in (tmp_path / "t" / "check.junit.xml").read_text()


def test_power_simulation_scores_like_the_audit_and_grows_with_the_factor():
    coins = np.random.default_rng(0).random(2000) < 0.5
    mechanism = RandomisedResponse(1 / (1 + math.exp(-1.0)))
    auc = []
    for factor in (1.0, 3.0):
        s = simulate_scores(mechanism, coins, 1, factor, np.random.default_rng(1))
        assert set(np.unique(s)) <= {-1.0, 1.0}
        auc.append(np.mean(s[coins] > 0) - np.mean(s[~coins] > 0))
    # P(bit | in) − P(bit | out) = tanh(fε/2)
    assert auc[0] == pytest.approx(math.tanh(0.5), abs=0.05) and auc[1] == pytest.approx(math.tanh(1.5), abs=0.05)


# -- the gate: correct learners pass, planted bugs are caught --------------------------------------
def _gate(tmp_path, name, learner, params, bug="", count=400, k=3):
    execute_run(config_from_dict({
        **SMALL_CORPUS, "output": str(tmp_path / name),
        "target": {"learner": learner, "k": k, "vocabulary": "all", "params": params, "test_bug": bug},
        "attack": {"shadows": 0, "canaries": {"count": count}}}), quiet=True)
    return main(["check", str(tmp_path / name)])


@pytest.mark.parametrize("learner, params, bugs", [
    ("lp-lda", {"epsilon": 1.0, "n_iter": 5}, ["noise-halved", "randomiser-dropped"]),
    ("lppf", {"epsilon": 1.0, "n_iter": 5}, ["noise-halved", "randomiser-dropped"]),
    ("dp-cgs", {"epsilon": 3.0, "n_iter": 10, "max_doc_length": 8}, ["no-noise", "cap-skipped"]),
    ("dp-svi", {"epsilon": 3.0, "n_iter": 100, "sampling_rate": 0.3, "max_doc_tokens": 20},
     ["composition-forgotten", "cap-skipped"]),
    ("dp-svi", {"epsilon": 3.0, "n_iter": 100, "sampling_rate": 0.3, "max_doc_tokens": 20, "clip_norm": 5.0},
     ["clipping-skipped"]),
    # One release whose Laplace noise carries almost all of the claim ε_g = 3.02 (C/β small).
    ("hdp-lda", {"epsilon_l": 3.0, "n_iter": 1, "clip": 0.01, "beta": 1.0}, ["no-noise"]),
])
def test_the_gate_passes_correct_learners_and_catches_planted_bugs(tmp_path, capsys, learner, params, bugs,
                                                                   short_power_search):
    assert _gate(tmp_path, "ok", learner, params) == 0
    for bug in bugs:
        assert _gate(tmp_path, bug, learner, params, bug) == 1, bug
        assert capsys.readouterr().out.splitlines()[-1].startswith("VIOLATED")
    planted = json.loads((tmp_path / bugs[0] / "results.json").read_text())["target"]
    assert planted["test_bug"] == bugs[0] and f'"test_bug": "{bugs[0]}"' in json.dumps(planted["guarantee"])


def test_bugs_keep_the_claim_and_refuse_learners_they_do_not_apply_to():
    learner = DPStochasticVariationalLDA(3, epsilon=2.0, clip_norm=5.0)
    for bug in ("composition-forgotten", "steps-20x", "cap-skipped", "clipping-skipped", "noise-halved"):
        broken = BrokenLearner(learner, bug)
        assert broken.guarantee().epsilon == learner.guarantee().epsilon
        assert broken.buggy is not learner and broken.mechanism() == learner.mechanism()
    assert BrokenLearner(learner, "cap-skipped").buggy.noise_std == pytest.approx(learner.noise_std)
    with pytest.raises(ValueError, match="does not apply"):
        BrokenLearner(LocallyPrivateLDA(3, epsilon=1.0), "cap-skipped")
    with pytest.raises(ValueError, match="unknown bug"):
        BrokenLearner(learner, "typo")
    assert set(BUGS) >= {"no-noise", "noise-halved", "composition-forgotten", "cap-skipped", "randomiser-dropped"}
    assert build_target("dp-svi", 3, "all", {"epsilon": 2.0}, bug="steps-20x").learner.buggy.n_iter == 4000


# -- DP vocabulary steps ---------------------------------------------------------------------------------
def test_threshold_canaries_anchor_half_their_words_in_fixed_one_word_documents():
    X = _counts()
    c = make_canaries(X, 20, "threshold", 1, seed=2, anchors=4)
    assert np.array_equal(c.anchors, np.tile([4, 0], 10))
    train = c.training_matrix(X)
    fresh = np.asarray(train[:, X.shape[1]:].sum(axis=0)).ravel()
    assert np.array_equal(fresh, c.anchors + c.coins)  # anchors always, the canary's own token by its coin
    assert train.shape[0] == X.shape[0] + 40 + c.coins.sum()


def test_fresh_threshold_canaries_hold_several_words_of_their_own_and_count_as_released_by_any():
    X = _counts()
    c = make_canaries(X, 6, "threshold", 3, seed=2, anchors=4)
    V = X.shape[1]
    assert c.n_columns == V + 6 + 3 * 2 and np.array_equal(c.observed_columns, np.arange(V, c.n_columns))
    lengths = np.diff(c.documents.indptr)
    assert np.array_equal(lengths, [1, 3, 1, 3, 1, 3])
    owners = np.bincount(c.documents.indices - V, minlength=c.n_columns - V)
    assert np.all(owners == 1)  # every fresh column belongs to one canary alone
    # The step released canary 3's last extra word and canary 4's own (anchored) word.
    columns = c.observed_columns
    released = np.isin(columns, [c.documents[3].indices.max(), V + 4])
    transcript = Transcript(SetUnion("laplace", 1.0, rho=5.0, gamma=6.0, epsilon=1.0, delta=1e-5), columns,
                            {"candidate": released, "noisy_weights": np.zeros(columns.size), "released": released})
    assert np.array_equal(released_documents(transcript, c), [False, False, False, True, True, False])
    assert released_fresh_canaries(transcript, c) == (1, 3)


def test_the_gaussian_steps_curve_is_the_gaussian_mechanisms_plus_the_thresholds_half_delta():
    sigma, epsilon, delta = 1.7, 3.0, 1e-5
    epsilons, deltas = gaussian_step_profile(sigma, epsilon, delta)
    assert epsilons[-1] == epsilon and deltas[-1] == delta and np.all(deltas >= delta / 2)
    assert deltas[5] == pytest.approx(gaussian_delta(sigma, epsilons[5]) + delta / 2, rel=1e-12)
    # δ(0) is the total variation 2Φ(1/2σ) − 1 (plus δ/2), and δ falls as ε grows.
    assert deltas[0] == pytest.approx(2 * ndtr(1 / (2 * sigma)) - 1 + delta / 2) and np.all(np.diff(deltas[:-1]) <= 0)


def test_dpsu_records_the_noisy_weights_it_selected_by_and_scores_them_by_their_likelihood_ratio():
    X = _counts()
    step = PolicyLaplaceDPSU(epsilon=2.0, delta0=8)
    columns = np.arange(X.shape[1])
    selected, transcript = _select_recorded(step, X, 5, columns)
    a = transcript.arrays
    assert np.array_equal(selected, np.flatnonzero(a["candidate"] & (a["noisy_weights"] > step.rho)))
    assert np.array_equal(selected, step.select(X, 5)) and a["released"][selected].all()
    p = SetUnion("laplace", 0.5, rho=4.5, gamma=5.0, epsilon=1.0, delta=1e-5)
    scores = dpsu_scores(np.array([4.2, 6.0, 0.0, 9.0]), np.array([False, True, False, True]),
                         np.array([4, 4, 0, 0]), p)
    # H: 4 without, min(5, Γ) = 5 with; the Laplace ratio continued linearly beyond [4, 5]
    assert np.allclose(scores[:2], [(0.2 - 0.8) / 0.5, (2.0 + 1.0) / 0.5])
    # A fresh word: only its release says anything; unreleased, it sits at the anchored scores' median.
    assert scores[2] == pytest.approx(np.median(scores[:2])) and scores[3] > 1e5


def test_dpsu_is_held_to_its_own_claim_and_its_bugs_are_caught(tmp_path, capsys):
    def audit(name, bug=""):
        execute_run(config_from_dict({
            **SMALL_CORPUS, "output": str(tmp_path / name),
            "target": {"learner": "lda", "k": 3, "vocabulary": "dpsu-laplace", "vocabulary_params": {"epsilon": 2.0},
                       "test_bug": bug},
            "attack": {"shadows": 0, "canaries": {"count": 600, "kind": "threshold"}}}), quiet=True)
        return main(["check", str(tmp_path / name)]), capsys.readouterr().out
    code, out = audit("ok")
    assert code == 0 and "claimed ε = 2" in out
    assert np.load(tmp_path / "ok" / "canaries.npz")["anchors"].max() == ANCHORS == 1
    assert audit("noise", "dpsu-noise-tenth")[0] == 1
    # Every document spending a budget of 2 (issue 30): with ρ − ½ anchors the anchored words sat at Γ either
    # way and the audit proved ε ≥ 0; one anchor and the unclipped ratio catch it (ε_LB 2.4-2.8 on seeds 0-2).
    assert audit("budget", "dpsu-budget-2")[0] == 1
    code, out = audit("threshold", "dpsu-threshold-halved")
    assert code == 1 and "that no other document holds were released" in out


def test_the_delta_tail_needs_two_releases_a_single_delta_event_is_what_the_claim_allows():
    once, twice = delta_tail_bound(1, 500, 1e-5, 0.01), delta_tail_bound(2, 500, 1e-5, 0.01)
    assert once.epsilon == 0.0 and once.details["p_value"] == pytest.approx(500 * 1e-5 / 2)
    assert twice.epsilon == math.inf and twice.details["p_value"] == pytest.approx(500 * 1e-5 / 4)
    assert delta_tail_bound(2, 500, 1e-2, 0.01).epsilon == 0.0  # Markov: 500·δ/4 = 1.25 > α


def test_a_gaussian_vocabulary_step_is_tested_as_the_gaussian_mechanism_on_its_anchored_canaries(tmp_path, capsys,
                                                                                                short_power_search):
    execute_run(config_from_dict({
        **SMALL_CORPUS, "output": str(tmp_path / "g"),
        "target": {"learner": "lda", "k": 3, "vocabulary": "dpsu-gaussian", "vocabulary_params": {"epsilon": 2.0}},
        "attack": {"shadows": 0, "canaries": {"count": 400, "kind": "threshold"}}}), quiet=True)
    assert main(["check", str(tmp_path / "g"), "--json", str(tmp_path / "g.json")]) == 0
    verdict = json.loads((tmp_path / "g.json").read_text())
    gdp = verdict["bounds"]["canaries/mechanism:fdp-one-run-gdp"]
    assert gdp["details"]["canaries"] == "anchored" and gdp["details"]["scored"] == 200   # the even canaries
    assert gdp["delta"] == pytest.approx(1e-5 / 2)
    assert "canaries/mechanism:delta-tail" in verdict["bounds"]   # the fresh ones hold the threshold's δ


def test_the_anchored_gaussian_test_refutes_exactly_above_the_steps_own_mu():
    """Read at δ/2, μ-GDP's ε is the claimed ε exactly at μ = 1/σ: the test refutes iff μ_LB > 1/σ."""
    epsilon, delta = 3.0, 1e-5
    sigma = analytic_gaussian_sigma(epsilon, delta / 2)
    assert gdp_epsilon(1 / sigma, delta / 2) == pytest.approx(epsilon, rel=1e-6)
    rng = np.random.default_rng(3)
    m = 20_000
    anchored, coins = np.arange(m) % 2 == 0, rng.random(m) < 0.5
    shape = ClaimShape(Method.FDP_GDP, gaussian_delta=delta / 2, anchored=anchored)

    def audit(noise):   # the anchored word's weight moves by 1 when its canary trains; fresh canaries score 0
        weight = coins + rng.normal(0.0, noise, m)
        scores = np.where(anchored, (weight ** 2 - (weight - 1) ** 2) / (2 * sigma**2), 0.0)
        return shape.tests({"mechanism": scores}, coins, epsilon, 0.05)["mechanism:fdp-one-run-gdp"]
    correct, halved = audit(sigma), audit(sigma / 2)
    assert correct.details["scored"] == m // 2
    assert 0 < correct.epsilon < epsilon < halved.epsilon
    assert (correct.details["mu_lb"] < 1 / sigma) and (halved.details["mu_lb"] > 1 / sigma)


def test_a_dp_svi_transcript_written_before_top_topics_scores_the_same():
    """Model files from before the transcript kept only each step's top topic still resume (E[log β] kept)."""
    X = sp.csr_matrix(np.ones((20, 10)))
    c = make_canaries(X, 6, "unique-word", 40, seed=1)
    rng = np.random.default_rng(0)
    y, elog = rng.normal(0, 30, (4, 3, 6)).astype(np.float32), rng.normal(size=(4, 3, 6)).astype(np.float32)
    p = {"noise_std": 30.0, "sampling_rate": 0.1, "document_tokens": 20, "clip_norm": None}
    old = transcript_from_arrays({"transcript.kind": np.str_("subsampled-gaussian-steps"),
                                  "transcript.columns": c.words, "transcript.parameters": np.str_(json.dumps(p)),
                                  "transcript.array.noisy_sums": y, "transcript.array.expected_log_beta": elog})
    new = Transcript(GaussianNoise(30.0, 20, 0.1), c.words,
                     {"noisy_sums": y, "top_topics": elog.argmax(axis=1).astype(np.int16)})
    assert np.array_equal(mechanism_scores(old, c)["mechanism"], mechanism_scores(new, c)["mechanism"])


@pytest.mark.parametrize("bug", ["record-mismatch-no-noise", None])
def test_a_model_built_from_other_than_its_record_is_refuted_by_its_own_release(tmp_path, bug, short_power_search):
    """The record shows a correctly noised draw while Φ comes from a noiseless one: the mechanism's test sees
    nothing wrong, the released Φ's test (α split with it) refutes the claim and the verdict says why; a correct
    learner's Φ stays within its claim."""
    from topicaudit.engine.check import check_run
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.run import execute_run

    settings = {"synthetic": {"n_docs": 300, "n_words": 400, "mean_length": 30},
                "target": {"learner": "dp-cgs", "k": 3, "vocabulary": "all",
                           "params": {"epsilon": 3.0, "n_iter": 30}, **({"test_bug": bug} if bug else {})},
                "attack": {"shadows": 0, "canaries": {"count": 600, "kind": "unique-word"}},
                "output": str(tmp_path / "run")}
    results = execute_run(config_from_dict(settings), quiet=True)
    result = check_run(tmp_path / "run")
    assert results.verdict["verdict"] == result.verdict and results.verdict["epsilon_lower_bound"] == \
        result.epsilon_lower_bound
    mechanism = max(b.epsilon for name, b in result.bounds.items() if name.startswith("canaries/"))
    assert mechanism <= 3.0
    if bug:
        assert result.violated and result.strongest_attack.startswith("canaries-release/")
        assert "not built from what the learner recorded" in result.message()
    else:
        assert not result.violated
        assert any("other than what the learner recorded" in family for family in result.unseen)


def test_auto_canaries_see_a_dp_vocabulary_step_and_check_config_agrees_with_check_run_dir(tmp_path, capsys):
    """A pipeline with a DP vocabulary step: `auto` picks threshold canaries (fresh words of any other kind are
    never selected, so a halved noise went unseen), its halved noise is caught, and `check CONFIG` holds a step
    before a non-private learner to the step's own claim, as `check RUN_DIR` does."""
    def config(name, bug=""):
        path = tmp_path / f"{name}.toml"
        path.write_text(
            "[synthetic]\nn_docs = 300\nn_words = 400\nmean_length = 30\n"
            f"[target]\nlearner = \"lda\"\nk = 3\nvocabulary = \"dpsu-laplace\"\ntest_bug = \"{bug}\"\n"
            "vocabulary_params = {epsilon = 1.0}\n"
            f"[attack]\nshadows = 0\n[attack.canaries]\ncount = 600\n")
        return path
    assert main(["check", str(config("ok")), "--output", str(tmp_path / "ok")]) == 0
    by_config = capsys.readouterr().out
    assert json.loads((tmp_path / "ok" / "results.json").read_text())["canaries"]["kind"] == "threshold"
    assert "claimed ε = 1" in by_config
    assert main(["check", str(tmp_path / "ok")]) == 0
    assert capsys.readouterr().out.split(" [")[0] == by_config.split(" [")[0]
    assert main(["check", str(config("halved", "dpsu-noise-halved")), "--output", str(tmp_path / "halved")]) == 1


def test_a_vocabulary_step_audit_says_the_learner_behind_it_went_untested(tmp_path):
    """FDPTM-like: the step is held to its own claim; the verdict names the learner's claim it could not test."""
    from topicaudit.engine.check import check_run
    execute_run(config_from_dict({
        **SMALL_CORPUS, "output": str(tmp_path / "p"),
        "target": {"learner": "dp-cgs", "k": 3, "vocabulary": "dpsu-gw", "vocabulary_params": {"epsilon": 1.5},
                   "params": {"epsilon": 1.5, "n_iter": 20}},
        "attack": {"shadows": 0, "canaries": {"count": 200}}}), quiet=True)
    result = check_run(tmp_path / "p")
    assert result.claimed_epsilon == 1.5
    # the composed claim: DP-CGS's replace-one 1.5 plus the step's add/remove 1.5 restated for replace-one (3)
    assert any("dp-cgs behind the vocabulary step" in family and "ε = 4.5" in family for family in result.unseen)
    assert "cannot see the learner dp-cgs" in result.message()


@pytest.mark.parametrize("name", ["dpsu-laplace", "dpsu-gw", "dpsu-gaussian"])
def test_the_budget_2_bug_doubles_every_documents_weight_and_keeps_the_claim(name):
    """One-word documents each add their budget: F of them put the word at min(2F, Γ) under the planted bug."""
    step = build_target("lda", 3, name, {}, {"epsilon": 3.0}).vocabulary_step
    broken = BrokenVocabulary(step, "dpsu-budget-2")
    X = sp.csr_matrix(np.array([[1.0, 0.0], [1.0, 0.0]] + [[0.0, 1.0]] * 10))  # word 1: 10 documents, 20 > Γ
    columns = np.arange(2)
    clean = _select_recorded(step, X, 4, columns)[1]
    planted = _select_recorded(broken, X, 4, columns)[1]
    noise = clean.arrays["noisy_weights"] - np.array([2.0, min(10.0, step.gamma)])
    assert np.allclose(planted.arrays["noisy_weights"], np.array([4.0, step.gamma]) + noise)   # the same draws
    assert planted.parameters == clean.parameters and broken.guarantee().parameters["test_bug"] == "dpsu-budget-2"


def test_the_power_estimate_simulates_the_anchors_run_and_a_budget_error_as_well_as_less_noise():
    """With one anchor a budget of 2 moves every anchored weight, and the estimate sees it as noise ÷ 2; with the
    former ρ − ½ anchors the budget form saturates at Γ and the estimate says what the audits measured: 0. Fresh
    documents are simulated by the step's own policy."""
    step = PolicyLaplaceDPSU(epsilon=3.0)
    m = 1000
    labels = np.random.default_rng(0).random(m) < 0.5
    methods = [Method.ONE_RUN, Method.FDP_PURE]

    def power(anchors, step=step):
        info = MechanismInfo(kind="dpsu", parameters=step.mechanism().parameters(), tokens=256, topics=3,
                             paired=False, stage="vocabulary", fresh_released=[0, m // 2], anchors=anchors)
        return simulated_power(info, labels, 3.0, 1e-5, 0.05 / 3, None, methods)
    now = power(ANCHORS)
    assert now["2x"] >= 0.8
    assert power(round(step.rho - 0.5))["2x"] == 0.0
    # A budget of 10 saturates even one anchor (10 > Γ = 6.0), and a fresh document spreads it over its Δ0
    # kept words (10/64 each): nothing to see, as the audit measured (RESULTS §23); GW's greedy fill takes a
    # fresh word to Γ, above ρ, and the δ-tail test sees it.
    assert now["10x"] == 0.0
    assert fresh_document_weights("greedy", 4, 10.0, step.gamma) == pytest.approx([step.gamma, 10 - step.gamma, 0, 0])
    assert power(ANCHORS, GreedyWeightedDPSU(epsilon=3.0))["10x"] == 1.0
    rng, anchored = np.random.default_rng(1), np.arange(m) % 2 == 0

    def shift(anchors):   # mean anchored score, trained minus untrained, every document spending 2
        trained, untrained = (simulate_scores(step.mechanism(), np.full(m, c), 256, 2.0, rng, form="budget",
                                              anchors=anchors) for c in (True, False))
        return trained[anchored].mean() - untrained[anchored].mean()
    assert shift(ANCHORS) == pytest.approx(2 * 2 / step.noise_scale, rel=0.1)   # the weight moves by 2, not 1
    assert abs(shift(5)) < 1.0                                                   # both at Γ: nothing moves
