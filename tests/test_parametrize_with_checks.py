"""topicaudit.testing as a project's tests use it: parametrize_with_checks, and a plugin that imports nothing heavy."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from topicaudit.targets.base import Guarantee
from topicaudit.targets.learners.cgs import CollapsedGibbsLDA
from topicaudit.targets.params import positive
from topicaudit.learner_checks import CheckFailed
from topicaudit.testing import check_learner, parametrize_with_checks


class OverclaimingCGS(CollapsedGibbsLDA):
    """Collapsed Gibbs sampling, no noise, claiming ε: the canary audit refutes it."""

    def __init__(self, k, n_iter=5, epsilon=1.0):
        super().__init__(k, n_iter=n_iter)
        positive("epsilon", epsilon)
        self.epsilon = epsilon

    def guarantee(self):
        return Guarantee(epsilon=self.epsilon, adjacency="document", basis="paper-claim",
                         parameters={"learner": "overclaiming-cgs"})


def _expected(learner) -> dict[str, str]:
    return {"canary audit": "no noise: the claim is false"} if isinstance(learner, OverclaimingCGS) else {}


@parametrize_with_checks([CollapsedGibbsLDA(3, n_iter=5), OverclaimingCGS(3, epsilon=1.0)], expected_failures=_expected)
def test_each_check_is_a_test(learner, check):
    check(learner)


def test_ids_name_the_learner_and_the_check_and_expected_failures_are_strict_xfails():
    mark = parametrize_with_checks([OverclaimingCGS(3, epsilon=2.0)], {"canary audit": "overclaims"})
    ids = [p.id for p in mark.args[1]]
    assert ids == [f"OverclaimingCGS(k=3,epsilon=2.0)-{name}" for name in
                   ("parameters", "phi", "same seed", "pickle", "short documents", "guarantee", "release constants",
                    "record used", "canary audit",
                    "honest record")]
    xfails = {p.id: p.marks[0].kwargs for p in mark.args[1] if p.marks}
    assert xfails == {"OverclaimingCGS(k=3,epsilon=2.0)-canary audit": {"reason": "overclaims", "strict": True,
                                                                         "raises": CheckFailed}}
    with pytest.raises(ValueError, match="unknown check.*'canary'; the checks: parameters"):
        parametrize_with_checks([OverclaimingCGS(3)], {"canary": "typo"})


def test_one_check_fails_alone_with_the_learners_name():
    with pytest.raises(AssertionError, match=r"OverclaimingCGS\(k=3, epsilon=2.0\) fails the 'canary audit' check"):
        check_learner(OverclaimingCGS(3, epsilon=2.0), checks=("canary audit",))
    assert check_learner(OverclaimingCGS(3, epsilon=1.0), checks=("phi", "pickle")) is None
    assert np.isfinite(OverclaimingCGS(3).guarantee().epsilon)


def test_the_pytest_plugin_imports_nothing_heavy():
    """pytest loads it in every session of every project with topicaudit installed."""
    heavy = ("numba", "dp_accounting", "scipy.stats", "ray", "topicaudit.engine", "topicaudit.learner_checks")
    code = ("import sys, topicaudit.testing; "
            f"print(' '.join(name for name in {heavy!r} if name in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []
    code = "import sys; from topicaudit.testing import check_learner; print('numba' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "True"  # loaded when used
