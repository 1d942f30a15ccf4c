"""Hostile pass XIX, helper r (tests/hostile_xix_r_cases.md): a third closing pass.

- ``TMPDIR`` naming another user's link in a shared sticky folder (``/tmp/L`` → a folder of the user's): nltk's
  path check, run whenever a text corpus is pre-processed (``run``, ``check`` and ``audit`` of JSON or text
  candidates), asks ``tempfile.gettempdir()``, which tests its choice by making and removing a file there: the
  user's folder got a new time, even when the command then refused the corpus
  (``folder_anchors.tempfile_without_planted_links``, in the command line and in every API entry).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from linked_cache import planted_by_another_user, run_on_an_empty_corpus, untouched_since_2020

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_preprocessing_a_corpus_never_tests_tmpdir_through_another_users_link(tmp_path):
    """TR1 (critical (c)): the command's pre-processing (nltk) made and removed a file in V through TMPDIR's link."""
    shared, mine = planted_by_another_user(tmp_path)
    env = {**os.environ, "TMPDIR": str(shared / "L"), "TOPICAUDIT_INTEGRITY_KEY": "off"}
    done = run_on_an_empty_corpus(tmp_path, env, tmp_path)
    assert done.returncode == 2 and "c.json" in done.stderr, done.stderr  # every document empty: refused
    assert untouched_since_2020(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_an_api_call_gives_tempfile_a_folder_beside_the_link_and_leaves_it_as_found(tmp_path, monkeypatch):
    """TR2: inside an API call ``tempfile.gettempdir()`` is a folder no planted link leads to; after it, tempfile
    chooses as before (the process is left as found)."""
    from topicaudit.folder_anchors import command_scope
    shared, mine = planted_by_another_user(tmp_path)
    monkeypatch.setenv("TMPDIR", str(shared / "L"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with command_scope():
        with command_scope():  # nested (a command calling an API entry) keeps it
            inner = tempfile.gettempdir()
        assert tempfile.gettempdir() == inner
    assert "L" not in Path(inner).parts and os.path.isdir(inner)
    assert tempfile.tempdir is None
    assert untouched_since_2020(mine)


PYTEST_PROJECT = '''
def test_claim(assert_privacy):
    assert_privacy({"synthetic": {"n_docs": 60, "n_words": 80, "k": 2}, "target": {"learner": "lda", "k": 2},
                    "attack": {"shadows": 0, "canaries": {"count": 4}}}, epsilon=50)
'''


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_the_fixture_without_a_cache_never_audits_behind_tmpdirs_link(tmp_path):
    """PT1 (critical (c)): with the cache off, the assert_privacy fixture's run went into pytest's temporary folder,
    which pytest made through TMPDIR's link (V/pytest-of-root/…/topicaudit0/run). ``-s``: pytest's own output
    capture tests TMPDIR by making a file there, whoever's fixtures run."""
    shared, mine = planted_by_another_user(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_claim.py").write_text(PYTEST_PROJECT)
    own = tmp_path / "own"
    own.mkdir()
    env = {**os.environ, "TMPDIR": str(shared / "L"), "TEMP": str(own), "TOPICAUDIT_CACHE_DIR": "off",
           "TOPICAUDIT_INTEGRITY_KEY": "off"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_claim.py"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert untouched_since_2020(mine)
    assert list(own.glob("topicaudit-*/run/results.json"))  # the run is in a temporary folder of topicaudit's own
