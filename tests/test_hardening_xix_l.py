"""Hostile pass XIX, helper l (tests/hostile_xix_l_cases.md): forged and crash-born verdicts."""
from __future__ import annotations

import os

import numpy as np
import pytest

from topicaudit.errors import UserError
from topicaudit.process_state import FORKED_CHILD_EXIT, kept_process_state
from topicaudit.targets import learner_settings
from topicaudit.targets.learners.lda import VariationalLDA


def test_a_fit_that_forks_and_returns_in_both_processes_goes_on_in_one_only(tmp_path):
    # The forked child carried on as the command: it scored its own Φ, printed NO SIGNAL and, after the command
    # had exited 1 with VIOLATED, rewrote results.json and check.json (and their manifest) as NO SIGNAL.
    marker = tmp_path / "after-the-fit"
    parent = os.getpid()
    with kept_process_state("the fit of Forking"):
        child = os.fork()
    marker.with_suffix(f".{os.getpid()}").write_text("carried on")  # the command's code after the fit
    assert os.getpid() == parent
    _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) == FORKED_CHILD_EXIT
    assert [p.name for p in tmp_path.iterdir()] == [f"after-the-fit.{parent}"]


def test_a_learner_object_with_state_its_parameters_do_not_rebuild_is_refused():
    # Audited as the rebuild from its parameters: NO SIGNAL for an object whose switch made it release its Φ
    # unnoised (check_learner on the same object: VIOLATED, ε ≥ 3.5).
    leaky = VariationalLDA(k=3, max_iter=5)
    leaky._release_unnoised = True
    with pytest.raises(UserError, match="_release_unnoised") as raised:
        learner_settings(leaky)
    assert "constructor parameter" in str(raised.value)
    replaced = VariationalLDA(k=3, max_iter=5)
    del replaced.batch_size  # an attribute the rebuild has and the object lacks
    with pytest.raises(UserError, match="other state|does not store"):
        learner_settings(replaced)


def test_a_learner_object_as_constructed_or_fitted_is_accepted():
    fresh = VariationalLDA(k=3, max_iter=5, doc_topic_prior=0.5)
    assert learner_settings(fresh) == ("lda", 3, {"max_iter": 5, "doc_topic_prior": 0.5})
    fitted = VariationalLDA(k=3, max_iter=5)
    fitted.components_ = np.ones((3, 4))  # scikit-learn's fitted attributes: set by a fit, not compared
    assert learner_settings(fitted)[0] == "lda"
