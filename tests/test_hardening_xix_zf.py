"""Hostile pass XIX-zf (tests/hostile_xix_zf_cases.md): the code Python runs at start, in the run cache's key, must be
found as every process of this one starts: from its working directory."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

SITECUSTOMIZE = """
import numpy as np
import topicaudit.targets.learners.lda as lda


def uniform(self, X, seed, *args, **kwargs):
    phi = np.ones((self.k, X.shape[1]), np.float32)
    return phi / phi.sum(axis=1, keepdims=True)


lda.VariationalLDA.fit = uniform
"""

CONFIG = ('[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nk = 3\nvocabulary = "all"\n'
          "[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")


@pytest.mark.parametrize("entry", ["shim", ""], ids=["relative", "empty-entry"])
def test_a_start_up_shim_on_a_relative_pythonpath_is_in_the_key(tmp_path, entry):
    """S2: `PYTHONPATH=sc` (or the empty entry of `PYTHONPATH=$PYTHONPATH:/x`, the working directory) named a
    sitecustomize.py replacing the built-in learner's fit; the bare start that keys start-up code was asked from `/`,
    where the relative entry names nothing: the shim's NO SIGNAL was kept under the key of the code without it, and
    `check` without the shim reused it where the learner gives VIOLATED."""
    folder = tmp_path / entry if entry else tmp_path
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "audit.toml").write_text(CONFIG)
    command = [sys.executable, "-m", "topicaudit", "check", "audit.toml", "--epsilon", "0.01", "--cache", "cache"]
    others = os.environ.get("PYTHONPATH")
    shim = {**os.environ, "PYTHONPATH": os.pathsep.join([entry, *filter(None, [others or (None if entry else
                                                                                         "/nonexistent")])])}
    shimmed = subprocess.run(command, env=shim, capture_output=True, text=True, cwd=tmp_path)
    assert shimmed.returncode == 0 and "NO SIGNAL" in shimmed.stdout, shimmed.stderr[-2000:]
    (folder / "sitecustomize.py").unlink()
    fresh = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert fresh.returncode == 1 and fresh.stdout.startswith("VIOLATED"), (fresh.stdout, fresh.stderr[-2000:])
    assert "reusing" not in fresh.stderr
