"""The public recording API (topicaudit.mechanisms): typed releases, the recorder, scorers registered by class,
the record checked against the claim, and the neighbouring relation as one typed field."""
import dataclasses
import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.attacks.canaries import make_canaries, resolve_kind
from topicaudit.attacks.mechanism import SCORERS, mechanism_scores, register, scorer_for, simulate_score_sets
from topicaudit.errors import UserError
from topicaudit.learner_checks import check_learner, check_record_used, check_release_constants
from topicaudit.mechanisms import (MECHANISMS, GaussianNoise, GeometricNoise, LaplaceNoise, Mechanism,
                                   RandomisedResponse, Recorder, SetUnion, Transcript, mechanism_from_json)
from topicaudit.targets import build_target
from topicaudit.targets.base import Guarantee, Neighbours, document_cap
from topicaudit.targets.bug_variants import BrokenLearner
from topicaudit.targets.learners.dp_cgs import ZhuDPCollapsedGibbsLDA
from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA
from topicaudit.targets.learners.hdp_lda import ZhaoHDPLDA
from topicaudit.targets.learners.lp_lda import LocallyPrivateLDA
from topicaudit.targets.learners.poisson_factorization import LocallyPrivatePoissonFactorization
from topicaudit.targets.privacy.composition import compose
from topicaudit.targets.privacy.events import guarantee_from_json
from topicaudit.targets.privacy.release_check import disagreements


def _counts(seed=0, n_docs=40, n_words=30):
    rng = np.random.default_rng(seed)
    X = rng.poisson(0.5, (n_docs, n_words)).astype(float)
    X[np.arange(n_docs), rng.integers(0, n_words, n_docs)] += 1.0
    return sp.csr_matrix(X)


# -- the classes ---------------------------------------------------------------------------------------------
def test_every_kind_round_trips_through_json_and_names_a_bad_constant():
    kinds = [RandomisedResponse(0.8), GeometricNoise(0.4), LaplaceNoise(2.0, 8, releases=3),
             GaussianNoise(5.0, 20, sampling_rate=0.1, clip_norm=4.0, steps=50),
             SetUnion("gaussian", 1.5, rho=3.0, gamma=4.0, epsilon=1.0, delta=1e-5, policy="l2", delta0=64)]
    for release in kinds:
        assert MECHANISMS[release.kind] is type(release)
        assert mechanism_from_json(release.kind, json.loads(json.dumps(release.parameters()))) == release
    for bad, field_name in ((lambda: GaussianNoise(-1.0, 5), "noise_std"), (lambda: LaplaceNoise(1.0, 2.5), "document_tokens"),
                            (lambda: RandomisedResponse(0.4), "keep_probability"), (lambda: GeometricNoise(1.0), "alpha"),
                            (lambda: GaussianNoise(1.0, 5, sampling_rate=0.0), "sampling_rate"),
                            (lambda: SetUnion("uniform", 1.0, 1.0, 1.0, 1.0, 0.0), "noise")):
        with pytest.raises(ValueError, match=field_name):
            bad()
    with pytest.raises(ValueError, match="unknown release kind 'mine'"):
        mechanism_from_json("mine", {})


def test_the_kinds_earlier_versions_wrote_read_as_todays():
    assert mechanism_from_json("laplace-count-releases", {"scale": 2.0, "document_tokens": 1, "releases": 5}) == \
        LaplaceNoise(2.0, 1, releases=5)
    # DP-CGS's record before the field: its single release followed a noisy sweep
    assert mechanism_from_json("laplace-counts", {"scale": 4.0, "document_tokens": 8}).noisy_sweep
    # DP-SVI's extra constants are ignored
    assert mechanism_from_json("subsampled-gaussian-steps", {"noise_std": 3.0, "document_tokens": 9, "steps": 2,
                                                            "sampling_rate": 0.5, "clip_norm": None,
                                                            "doc_topic_prior": 0.3}) == GaussianNoise(3.0, 9, 0.5, None, 2)


# -- the recorder ----------------------------------------------------------------------------------------------
def test_the_recorder_keeps_the_observed_columns_of_each_release_and_copies_nothing_else():
    noisy = np.arange(12.0).reshape(3, 4)
    record = Recorder(np.array([3, 1]))
    assert record.laplace(noisy, scale=1.0, document_tokens=2, releases=2) is noisy
    record.laplace(noisy + 100, scale=1.0, document_tokens=2, releases=2)
    t = record.transcript()
    assert t.mechanism == LaplaceNoise(1.0, 2, releases=2) and np.array_equal(t.columns, [3, 1])
    assert t.arrays["noisy_counts"].dtype == np.float32
    assert np.array_equal(t.arrays["noisy_counts"], np.stack([noisy[:, [3, 1]], noisy[:, [3, 1]] + 100]))
    assert Recorder().laplace(noisy, scale=1.0, document_tokens=2) is noisy and Recorder().transcript() is None
    with pytest.raises(ValueError, match="one kind of release"):
        record.laplace(noisy, scale=2.0, document_tokens=2, releases=2)   # other constants in the same fit
    with pytest.raises(ValueError, match="last axis"):
        Recorder(np.array([9])).laplace(noisy, scale=1.0, document_tokens=2)


def test_local_reports_may_be_recorded_in_blocks_of_columns():
    reports = np.random.default_rng(0).random((5, 10)) < 0.5
    record = Recorder(np.array([7, 2, 8]))
    for start in (0, 4, 8):
        block = reports[:, start:start + 4]
        assert record.randomised_response(block, keep_probability=0.75,
                                          columns=np.arange(start, start + block.shape[1])) is block
    assert np.array_equal(record.transcript().arrays["reports"], reports[:, [7, 2, 8]])


def test_a_substitution_is_returned_and_recorded_and_a_restatement_changes_only_the_constants():
    noisy = np.zeros((2, 5))
    record = Recorder(np.array([4]), substitute=lambda m, v: v + 7.0,
                      restate=lambda m: dataclasses.replace(m, noise_std=3.0))
    used = record.gaussian(noisy, noise_std=1.0, document_tokens=4, topic_affinity=np.array([[0, 0, 0, 0, 1.0],
                                                                                             [0, 0, 0, 0, 2.0]]))
    assert used is not noisy and noisy.sum() == 0 and np.array_equal(used[:, 4], [7.0, 7.0]) and used[:, :4].sum() == 0
    t = record.transcript()
    assert t.mechanism.noise_std == 3.0 and np.array_equal(t.arrays["noisy_sums"], [[[7.0], [7.0]]])
    assert np.array_equal(t.arrays["top_topics"], [[1]])


def test_a_set_union_record_derives_the_released_words_from_the_returned_weights():
    weights, candidate = np.array([5.0, 0.5, 9.0, 7.0]), np.array([True, True, False, True])
    record = Recorder(np.array([0, 1, 2]))
    record.set_union(weights, candidate=candidate, noise="laplace", scale=1.0, rho=4.0, gamma=6.0, epsilon=1.0,
                     delta=1e-6)
    a = record.transcript().arrays
    assert np.array_equal(a["released"], [True, False, False]) and np.array_equal(a["candidate"], candidate[:3])


# -- the scorers, registered by class ----------------------------------------------------------------------------
def test_a_gaussian_release_without_top_topics_is_scored_over_every_topic():
    X = sp.csr_matrix(np.ones((20, 10)))
    c = make_canaries(X, 2, "unique-word", 30, seed=1)
    y = np.array([[[40.0, -5.0], [10.0, 60.0]]])            # (T=1, k=2, 2 canaries)
    sigma, q, size = 20.0, 0.5, 8.0                          # clip 8 < 30 tokens
    t = Transcript(GaussianNoise(sigma, 30, q, clip_norm=size), c.words, {"noisy_sums": y})

    def by_hand(column):
        lr = np.mean([math.exp((size * v - size**2 / 2) / sigma**2) for v in column])
        return math.log(1 - q + q * lr)
    assert np.allclose(mechanism_scores(t, c)["mechanism"], [by_hand(y[0, :, 0]), by_hand(y[0, :, 1])])


def test_a_new_kind_needs_a_class_and_a_scorer_and_nothing_else():
    @dataclasses.dataclass(frozen=True)
    class Exponential(Mechanism):
        kind = "test-exponential"
        arrays = ("values",)
        values = "values"
        rate: float = 1.0

    release = Exponential(2.0)
    with pytest.raises(ValueError, match="no scorer reads a Exponential release"):
        scorer_for(release)

    class ExponentialScorer:
        def supports(self, mechanism):
            return isinstance(mechanism, Exponential)

        def scores(self, transcript, canaries):
            return {"mechanism": np.full(canaries.count, transcript.mechanism.rate)}

        def simulate(self, mechanism, coins, tokens, factor, rng, paired, k, form, anchors, arrays):
            return {"mechanism": np.where(coins, factor, 0.0)}
    scorer = register(ExponentialScorer())
    try:
        c = make_canaries(_counts(), 3, "unique-word", 5, seed=0)
        assert np.array_equal(mechanism_scores(Transcript(release, c.words, {"values": np.zeros(3)}), c)["mechanism"],
                              [2.0, 2.0, 2.0])
        assert np.array_equal(simulate_score_sets(release, np.array([True, False]), 5, 3.0,
                                                  np.random.default_rng(0))["mechanism"], [3.0, 0.0])
    finally:
        SCORERS.remove(scorer)
        MECHANISMS.pop("test-exponential")


# -- the record against the claim ---------------------------------------------------------------------------------
BUILT_INS = [ZhuDPCollapsedGibbsLDA(3, n_iter=20), ZhaoHDPLDA(3, n_iter=10),
             DPStochasticVariationalLDA(3, epsilon=2.0, n_iter=20, sampling_rate=0.5, max_doc_tokens=30),
             LocallyPrivateLDA(3, epsilon=1.0, n_iter=10), LocallyPrivatePoissonFactorization(3, epsilon=1.0, n_iter=5)]


@pytest.mark.parametrize("learner", BUILT_INS, ids=lambda l: type(l).__name__)
def test_every_built_in_learner_records_what_its_claim_describes_and_builds_phi_from_it(learner):
    check_release_constants(learner)
    check_record_used(learner)
    for step in ("dpsu-laplace", "dpsu-gaussian", "dpsu-gw"):
        built = build_target("lda", 3, step, {}, {"epsilon": 2.0}).vocabulary_step
        assert disagreements(built.mechanism(), built.guarantee()) == []


@pytest.mark.parametrize("learner", BUILT_INS, ids=lambda l: type(l).__name__)
def test_a_learner_that_records_one_array_and_builds_phi_from_another_fails_by_name(learner):
    broken = BrokenLearner(learner, "record-mismatch-halved")
    with pytest.raises(AssertionError, match=rf"Φ did not follow the recorded {learner.mechanism().kind} release"):
        check_record_used(broken)


def test_a_record_whose_constants_are_not_the_claims_is_reported():
    learner = ZhuDPCollapsedGibbsLDA(3, epsilon=2.0, max_doc_length=16)
    halved = dataclasses.replace(learner.mechanism(), scale=learner.noise_scale / 2)
    found = disagreements(halved, learner.guarantee())
    assert len(found) == 1 and "noise multiplier 0.25" in found[0] and "0.5" in found[0]
    svi = DPStochasticVariationalLDA(3, epsilon=2.0, n_iter=30, sampling_rate=0.2)
    wrong = dataclasses.replace(svi.mechanism(), sampling_rate=0.4, steps=3)
    assert [s.split(",")[0] for s in disagreements(wrong, svi.guarantee())] == [
        "the release records sampling rate 0.4", "the release records 3 Gaussian steps"]

    class Misdescribed(ZhuDPCollapsedGibbsLDA):
        def mechanism(self):
            return dataclasses.replace(super().mechanism(), scale=self.noise_scale / 2)
    with pytest.raises(AssertionError, match="describe different mechanisms"):
        check_learner(Misdescribed(3, n_iter=5), checks=["release constants"])


# -- neighbours: one typed field --------------------------------------------------------------------------------
def test_the_neighbouring_relation_is_one_field_the_accountant_and_the_canaries_read():
    g = ZhuDPCollapsedGibbsLDA(3).guarantee()
    assert g.neighbours is Neighbours.REPLACE_ONE and g.relation is Neighbours.REPLACE_ONE
    assert resolve_kind("auto", g.adjacency, g.relation) == "paired"
    assert guarantee_from_json(json.loads(json.dumps(g.to_json()))).neighbours is Neighbours.REPLACE_ONE
    # a results.json written before the field stated it in the parameters
    old = {**g.to_json(), "neighbours": None, "parameters": {"neighbours": "replace-one"}}
    assert guarantee_from_json(old).relation is Neighbours.REPLACE_ONE
    document = Guarantee(epsilon=1.0, adjacency="document", basis="theorem")
    assert document.relation is Neighbours.ADD_REMOVE and resolve_kind("auto", "document", document.relation) == \
        "unique-word"
    assert Guarantee(epsilon=1.0, adjacency="word", basis="theorem").relation is Neighbours.REPLACE_ONE
    # an add/remove part composed with a replace-one claim is restated for replace-one: (2ε, (1 + e^ε)δ)
    mixed = compose(g, dataclasses.replace(document, delta=1e-6))
    assert mixed.relation is Neighbours.REPLACE_ONE and mixed.epsilon == pytest.approx(g.epsilon + 2.0)
    assert mixed.delta == pytest.approx((1 + math.e) * 1e-6) and "group privacy" in mixed.accountant
    assert compose(g, Guarantee(epsilon=0.0, adjacency="document", basis="theorem")).neighbours is \
        Neighbours.REPLACE_ONE


def test_the_cap_canaries_outgrow_is_the_declared_release_s():
    assert document_cap(ZhuDPCollapsedGibbsLDA(3, max_doc_length=12)) == 12
    assert document_cap(DPStochasticVariationalLDA(3, epsilon=1.0, max_doc_tokens=40)) == 40
    assert document_cap(ZhaoHDPLDA(3)) is None            # word-level: a release's one token is no document cap
    assert document_cap(LocallyPrivateLDA(3, epsilon=1.0)) is None


def test_a_release_whose_noise_overflows_is_refused_not_audited(tmp_path):
    """N2 (pass XIX-z): dp-cgs claiming ε = 1e-300 stored noise beyond float32's range, and the run recorded
    CONSISTENT from NaN scores that `check` then refused as an edit; the release is refused when recorded."""
    from topicaudit.cli.main import main
    config = tmp_path / "c.toml"
    config.write_text('[synthetic]\nn_docs = 60\nn_words = 80\n[target]\nk = 2\nlearner = "dp-cgs"\n'
                      '[target.params]\nepsilon = 1e-300\nn_iter = 2\n[attack]\nshadows = 0\n'
                      '[attack.canaries]\ncount = 10\n')
    assert main(["run", str(config), "--output", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()


def test_parameters_whose_release_cannot_be_described_are_a_bad_parameter(tmp_path, capsys):
    """N3 (pass XIX-z): dp-cgs at ε = 5e-324 (its noise scale infinite) was exit 3, an internal error."""
    from topicaudit.cli.main import main
    config = tmp_path / "c.toml"
    config.write_text('[synthetic]\nn_docs = 60\nn_words = 80\n[target]\nk = 2\nlearner = "dp-cgs"\n'
                      '[target.params]\nepsilon = 5e-324\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 10\n')
    assert main(["run", str(config), "--output", str(tmp_path / "run")]) == 2
    assert "[target.params]" in capsys.readouterr().err and not (tmp_path / "run").exists()
