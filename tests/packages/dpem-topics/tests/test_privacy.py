"""Our privacy tests: the conformance suite, and the audit that holds DPEMTopics to its claim."""
import pytest

from dpem_topics import DPEMTopics
from dpem_topics.planted import HalvedNoise, RecordMismatch, SkippedCap
from topicaudit.testing import check_learner, parametrize_with_checks


@parametrize_with_checks([DPEMTopics(k=3, epsilon=1.0, n_iter=5)])
def test_conformance(learner, check):
    check(learner)


def test_a_model_not_built_from_its_record_fails_conformance():
    with pytest.raises(AssertionError, match="fails the 'record used' check"):
        check_learner(RecordMismatch(k=3, epsilon=1.0, n_iter=5))


def test_the_claim_holds(assert_privacy):
    assert_privacy("privacy/audit.toml")


@pytest.mark.parametrize("bug", [HalvedNoise, SkippedCap])
def test_the_audit_catches_a_planted_bug(assert_privacy, bug):
    with pytest.raises(AssertionError, match="VIOLATED"):
        assert_privacy("privacy/audit.toml", learner=bug(k=5, epsilon=3.0))
