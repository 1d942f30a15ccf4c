"""Hardening XVI, helper g (issue 32, hostile pass XVI: forged and crash-born verdicts). Every case it ran is in
tests/hostile_xvi_g_cases.md.

Critical:
- CS1: the run cache identified a plug-in learner kept as one file (not an installed distribution) by that file
  alone. A helper module beside it, which it imports (``noise.py`` holding the noise it adds), was not in the
  digest: after an edit to the helper, ``check CONFIG`` reused the run of the code before the edit ("reusing …
  the same configuration, corpus content and code") and gave its verdict (NO SIGNAL, exit 0, for code whose own
  audit says VIOLATED). The digest now covers the modules and packages beside the plug-in's top-level module or
  package (``targets.plugins._beside``).
"""
from __future__ import annotations

import sys

from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_cache import cached_run_dir
from topicaudit.targets.plugins import LEARNER_GROUP, source

LEARNER = '''
import numpy as np

import helper
from topicaudit.targets.base import NO_GUARANTEE


class Counts:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        counts = np.asarray(X.sum(axis=0)).ravel() + helper.SMOOTHING
        phi = np.vstack([counts] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self):
        return NO_GUARANTEE
'''


def test_an_edit_to_a_helper_module_beside_a_plug_in_is_another_cache_entry(tmp_path, monkeypatch):
    """Its own file unchanged, the helper it imports edited: another digest, another cached run directory."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "ourlearner.py").write_text(LEARNER)
    (site / "helper.py").write_text("SMOOTHING = 0.5\n")
    monkeypatch.syspath_prepend(str(site))
    config = config_from_dict({"synthetic": {"n_docs": 50, "n_words": 60}, "target": {"k": 2,
                               "learner": "ourlearner:Counts"}, "attack": {"shadows": 0, "canaries": {"count": 10}}})
    try:
        before = source("ourlearner:Counts", LEARNER_GROUP)["source_sha256"]
        entry = cached_run_dir(config, tmp_path / "cache")
        assert source("ourlearner:Counts", LEARNER_GROUP)["source_sha256"] == before  # stable while unchanged
        (site / "helper.py").write_text("SMOOTHING = 0.0\n")
        assert source("ourlearner:Counts", LEARNER_GROUP)["source_sha256"] != before
        assert cached_run_dir(config, tmp_path / "cache") != entry
    finally:
        for name in ("ourlearner", "helper"):
            sys.modules.pop(name, None)


def test_a_helper_package_beside_a_plug_in_package_counts_too(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "ours").mkdir(parents=True)
    (site / "ours" / "__init__.py").write_text("")
    (site / "ours" / "topics.py").write_text(LEARNER.replace("import helper", "from tools import helper"))
    (site / "tools").mkdir()
    (site / "tools" / "__init__.py").write_text("")
    (site / "tools" / "helper.py").write_text("SMOOTHING = 0.5\n")
    monkeypatch.syspath_prepend(str(site))
    before = source("ours.topics:Counts", LEARNER_GROUP)["source_sha256"]
    (site / "tools" / "helper.py").write_text("SMOOTHING = 0.0\n")
    assert source("ours.topics:Counts", LEARNER_GROUP)["source_sha256"] != before
