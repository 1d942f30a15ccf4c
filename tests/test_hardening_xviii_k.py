"""Hostile pass XVIII, helper k (tests/hostile_xviii_k_cases.md): forged and crash-born verdicts."""
from __future__ import annotations

import pytest

from topicaudit.learner_checks import check_learner
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.privacy.guarantee import Guarantee

ONE = Guarantee(epsilon=1.0, delta=0.0, adjacency="document", basis="paper-claim", parameters={"learner": "x"})


class AssertsOnLargeCorpora(VariationalLDA):
    """Claims ε = 1; its fit's own `assert` fails on the canary audit's corpus (more than 150 documents)."""

    def fit(self, X, seed):
        assert X.shape[0] <= 150, "the learner's own assert"
        return super().fit(X, seed)

    def guarantee(self):
        return ONE


def test_a_learners_own_assertion_in_fit_is_no_finding_of_the_canary_audit():
    # It read "fails the 'canary audit' check: the learner's own assert": a refuted claim where no audit finished.
    with pytest.raises(AssertionError, match="canary audit") as raised:
        check_learner(AssertsOnLargeCorpora(k=3, max_iter=5), checks=("canary audit",))
    assert "not this check" in str(raised.value) and "no finding" in str(raised.value)


def test_the_canary_audits_own_finding_still_reads_as_one():
    with pytest.raises(AssertionError, match="prove") as raised:  # noiseless, claims ε = 1: refuted
        check_learner(type("Noiseless", (VariationalLDA,), {"guarantee": lambda self: ONE})(k=3, max_iter=20),
                      checks=("canary audit",))
    assert "not this check" not in str(raised.value)
