"""Hardening XVI, helper g (issue 32, hostile pass XVI: forged and crash-born verdicts). Every case it ran is in
tests/hostile_xvi_g_cases.md.

Critical:
- CS1: the run cache identified a plug-in learner kept as one file (not an installed distribution) by that file
  alone. A helper module beside it, which it imports (``noise.py`` holding the noise it adds), was not in the
  digest: after an edit to the helper, ``check CONFIG`` reused the run of the code before the edit ("reusing …
  the same configuration, corpus content and code") and gave its verdict (NO SIGNAL, exit 0, for code whose own
  audit says VIOLATED). The digest now covers the modules and packages beside the plug-in's top-level module or
  package (``targets.plugins._beside``).
- CW1: a plug-in learner whose fit called ``os.chdir`` (into a folder holding another run directory at the same
  relative ``--output``) had the run write its model, scores and results into that other run, and check read its
  coins beside the new scores: NO SIGNAL, exit 0, where the audit says VIOLATED (exit 1); the other run was left
  as a mix of two runs that checks. What a fit changes of the process (working directory, umask, standard streams
  and descriptors 1 and 2, signal handlers, the environment topicaudit reads) is now put back when it returns,
  with a note (``topicaudit.process_state``).
Non-critical, fixed with CW1: a fit that replaced ``sys.stdout`` by a StringIO (or /dev/null, or dup2'd fd 1) had
check exit 1 with no VIOLATED line anywhere but check.json and no note; a fit setting TOPICAUDIT_INTEGRITY_KEY
had the run refused "config.toml is not listed".
"""
from __future__ import annotations

import os
import sys

import pytest

import stale_plugin

from linked_cache import snapshot
from topicaudit.cli.main import main
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
        for name in ("ourlearner", "helper"):  # the next process: one that imported them before the edit runs
            sys.modules.pop(name, None)        # the old code, and has no digest (hostile pass XIX-u, ST1)
        stale_plugin.as_another_process(monkeypatch)
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


STATE_LEARNER = '''
import io
import os
import signal
import sys

from topicaudit.targets.learners.lda import VariationalLDA


class Moves(VariationalLDA):
    """An lda whose fit changes the process as ``HOW`` says, then fits."""

    def fit(self, X, seed):
        how = os.environ.get("HOW", "")
        if how == "chdir":
            os.chdir(os.environ["ELSEWHERE"])
        if how == "stdout":
            sys.stdout = io.StringIO()
        if how == "umask":
            os.umask(0o077)
        if how == "key":
            os.environ["TOPICAUDIT_INTEGRITY_KEY"] = "k" * 40
        if how == "sigint":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        return super().fit(X, seed)
'''


@pytest.fixture
def moves(tmp_path, monkeypatch, capsys):
    """A configuration whose learner is ``Moves``; the working directory tmp_path/work, and another run directory
    at the same relative path ``out`` in tmp_path/elsewhere (a canary audit with other coins: seed 1)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "movers.py").write_text(STATE_LEARNER)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    monkeypatch.setenv("TOPICAUDIT_CACHE_DIR", "off")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--seed", "1", "--output", "out"]) == 0
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    config = tmp_path / "work" / "c.toml"
    config.write_text('seed = 0\n[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nlearner = "movers:Moves"\n'
                      'k = 3\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n')
    monkeypatch.setenv("ELSEWHERE", str(tmp_path / "elsewhere"))
    capsys.readouterr()
    yield config
    sys.modules.pop("movers", None)


def test_a_learner_that_changes_directory_in_its_fit_neither_mixes_runs_nor_writes_the_other(moves, tmp_path,
                                                                                            monkeypatch, capsys):
    """CW1: the fit's ``os.chdir`` made the run write its model, scores and results into ``../elsewhere/out`` and
    check read that run's coins beside the new scores: NO SIGNAL, exit 0, where the audit says VIOLATED."""
    other = snapshot(tmp_path / "elsewhere")
    monkeypatch.setenv("HOW", "chdir")
    code = main(["check", str(moves), "--epsilon", "0.01", "--output", "out"])
    out, err = capsys.readouterr()
    assert code == 1 and out.startswith("VIOLATED") and "working directory" in err
    assert snapshot(tmp_path / "elsewhere") == other
    assert os.getcwd() == str(tmp_path / "work") and (tmp_path / "work" / "out" / "check.json").is_file()


@pytest.mark.parametrize("how, what", [("stdout", "sys.stdout"), ("umask", "umask"),
                                       ("key", "TOPICAUDIT_INTEGRITY_KEY"), ("sigint", "SIGINT")])
def test_what_a_fit_changes_of_the_process_is_put_back_and_said(moves, monkeypatch, capsys, how, what):
    """SO1 (stdout): a fit that swapped sys.stdout for a StringIO had check exit 1 with no VIOLATED anywhere but
    check.json, and no note; a key set in the fit (K-env) had the run refused as unlisted. Each is put back."""
    monkeypatch.setenv("HOW", how)
    umask = os.umask(0o022)
    try:
        code = main(["check", str(moves), "--epsilon", "0.01", "--output", "out"])
        assert os.umask(0o022) == 0o022
    finally:
        os.umask(umask)
    out, err = capsys.readouterr()
    assert code == 1 and out.startswith("VIOLATED") and what in err
    assert os.environ.get("TOPICAUDIT_INTEGRITY_KEY") == "off"
