"""pytest plugin: the ``assert_privacy`` fixture and ``check_learner``, for a project's own tests.

Installed with topicaudit (entry point ``pytest11``)::

    def test_our_topic_model_keeps_its_promise(assert_privacy):
        assert_privacy("privacy/audit.toml", epsilon=3, canaries=1000)

Each call audits in a fresh temporary run directory unless ``output`` is given.
``from topicaudit.engine.check import assert_privacy`` gives the same function without pytest.

``check_learner`` is the learner conformance suite (``topicaudit.learner_checks``), in
the spirit of scikit-learn's ``check_estimator``; every built-in learner passes it::

    from topicaudit.testing import check_learner

    def test_our_learner_conforms():
        check_learner(OurLearner(k=3, n_iter=20))   # AssertionError naming the failed check

A claim too large for its canary audit to test warns with ``UntestableClaimWarning``.
"""
from __future__ import annotations

import pytest

from topicaudit.engine.check import assert_privacy as _assert_privacy
from topicaudit.learner_checks import UntestableClaimWarning, check_learner

__all__ = ["UntestableClaimWarning", "assert_privacy_fixture", "check_learner"]


@pytest.fixture(name="assert_privacy")
def assert_privacy_fixture(tmp_path_factory):
    def check(config, epsilon=None, delta=None, alpha=None, output=None, canaries=None):
        output = output if output is not None else tmp_path_factory.mktemp("topicaudit") / "run"
        return _assert_privacy(config, epsilon, delta, alpha, output=output, canaries=canaries)

    return check
