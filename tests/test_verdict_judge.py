"""The verdict's one computation: every test of every experiment at one share of α."""
import numpy as np

from topicaudit.bounds.epsilon import Method
from topicaudit.bounds.verdict import Evidence, bound_tests, guess_family, judge


def _coins(m=400, seed=0):
    return np.random.default_rng(seed).random(m) < 0.5


def test_alpha_is_split_once_over_every_test_of_every_experiment():
    coins = _coins()
    rng = np.random.default_rng(1)
    a = Evidence("canaries/", {"s": coins + rng.normal(0, 1, coins.size), "t": rng.normal(size=coins.size)}, coins,
                 (Method.ONE_RUN, Method.FDP_PURE), "canaries")
    b = Evidence("natural/", {"u": coins + rng.normal(0, 2, coins.size)}, coins, (Method.ONE_RUN,), "natural",
                 family=None)
    j = judge([a, b], delta=0.0, alpha=0.05)
    assert j.alpha_each == 0.05 / 5 and len(j.bounds) == 5
    alone = bound_tests({"s": a.scores["s"]}, coins, 0.0, 0.05 / 5, a.methods, guess_family)
    assert j.bounds["canaries/s:one-run"] == alone["s:one-run"]   # each bound exactly at its share
    assert j.signal and not j.tied


def test_a_score_that_ranks_members_below_non_members_is_named():
    coins = _coins()
    e = Evidence("canaries/", {"good": coins + 0.0, "backwards": -(coins + 0.0)}, coins, (Method.ONE_RUN,), "c")
    j = judge([e], delta=0.0, alpha=0.05)
    assert j.reversed == ("canaries/backwards",)
    assert j.bounds["canaries/backwards:one-run"].epsilon == 0.0 < j.bounds["canaries/good:one-run"].epsilon


def test_shaped_tests_share_the_same_alpha():
    coins = _coins()
    seen = []

    def shaped(scores, labels, alpha_each):
        seen.append(alpha_each)
        return {}
    e = Evidence("canaries/", {"s": coins + 0.0}, coins, (Method.ONE_RUN,), "c", shaped=shaped, shaped_count=1)
    assert judge([e], 0.0, 0.05).alpha_each == seen[0] == 0.05 / 2

