import pytest

from topicaudit.errors import UserError
from topicaudit.targets.learners.dpsu import DPSU_STEPS
from topicaudit.targets.registry import LEARNERS, VOCABULARY_STEPS, _load, build_target


def test_every_registered_name_loads_the_class_of_that_name():
    for name, path in VOCABULARY_STEPS.items():
        assert _load(path).name == name
    assert set(DPSU_STEPS) <= set(VOCABULARY_STEPS)
    for name, (path, _) in LEARNERS.items():
        assert callable(_load(path)), name


def test_parameters_reach_the_step_and_the_learner():
    target = build_target("cgs", 4, "dpsu-gw", {"n_iter": 7}, {"epsilon": 2.0, "delta0": 8})
    assert target.learner.k == 4 and target.learner.n_iter == 7
    assert target.vocabulary_step.guarantee().epsilon == 2.0


@pytest.mark.parametrize("args, message", [
    (("bert", 5), "unknown learner 'bert'"),
    (("lda", 5, "dpsu-magic"), "unknown vocabulary step"),
    (("lda", 5, "dpsu-gw", {}, {"gamma": 1}), "unknown parameter"),
])
def test_unknown_names_and_parameters_are_user_errors(args, message):
    with pytest.raises(UserError, match=message):
        build_target(*args)


def test_a_public_vocabulary_spends_nothing_and_keeps_the_learners_claim():
    import math

    word_level = build_target("hdp-lda", 4, "all")
    g = word_level.guarantee()
    learner = word_level.learner.guarantee()
    assert (g.epsilon, g.delta, g.adjacency) == (learner.epsilon, learner.delta, "word")
    assert math.isfinite(g.epsilon)
    assert build_target("dp-cgs", 4, "all", {"epsilon": 2.0}).guarantee().epsilon == 2.0


def test_incoherent_compositions_are_refused_when_the_target_is_built():
    import pytest

    from topicaudit.errors import UserError

    with pytest.raises(UserError, match="cannot be composed"):
        build_target("hdp-lda", 4, "dpsu-gw")


def test_a_vocabulary_step_that_releases_no_word_gives_an_empty_release():
    import numpy as np
    import scipy.sparse as sp

    target = build_target("lda", 3, "dpsu-gaussian", vocabulary_params={"epsilon": 0.01})
    X = sp.csr_matrix(np.ones((5, 4)))
    release = target.fit(X, seed=0)
    assert release.phi.shape == (3, 0) and release.vocabulary.size == 0
    assert release.dense_phi(4).shape == (3, 4) and not release.dense_phi(4).any()
