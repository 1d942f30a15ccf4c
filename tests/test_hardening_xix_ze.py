"""Hostile pass XIX-ze (tests/hostile_xix_ze_cases.md): a cached ``assert_privacy`` fits in a new Python process,
which imports the learner's module by this process's ``sys.path``; the verdict it gives must be of the code this
process runs, never of another file of the same module name."""
from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest

from topicaudit.engine.check import assert_privacy

CONFIG = {"synthetic": {"n_docs": 50, "n_words": 60}, "target": {"k": 2, "vocabulary": "all"},
          "attack": {"shadows": 0, "canaries": {"count": 20}}}

LEARNER = '''
import numpy as np

from topicaudit.targets.base import NO_GUARANTEE


class Learner:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        row = {row}
        phi = np.vstack([row] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self):
        return NO_GUARANTEE
'''


def test_a_learner_loaded_from_its_path_is_audited_not_another_file_of_its_name(tmp_path, monkeypatch):
    """C1: a test loaded the working copy of its learner by its path (``spec_from_file_location``) while a release
    of the same module name was on sys.path. The new process imported the release, fitted and kept it under the
    release's key, and the call reported its NO SIGNAL for the working copy, which leaks (VIOLATED without a
    cache)."""
    name = "zl_xix_ze_c1"
    (tmp_path / "work").mkdir()
    (tmp_path / "release").mkdir()
    (tmp_path / "work" / f"{name}.py").write_text(textwrap.dedent(LEARNER.format(
        row="1.0 + 50.0 * np.asarray(X.sum(axis=0)).ravel()")))  # leaks every document's words
    (tmp_path / "release" / f"{name}.py").write_text(textwrap.dedent(LEARNER.format(row="np.ones(X.shape[1])")))
    monkeypatch.syspath_prepend(str(tmp_path / "release"))
    spec = importlib.util.spec_from_file_location(name, tmp_path / "work" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    with pytest.warns(RuntimeWarning, match="imports other code for this audit than this process runs"):
        with pytest.raises(AssertionError, match="VIOLATED"):
            assert_privacy(CONFIG, epsilon=0.01, learner=module.Learner(2), cache=tmp_path / "cache")
