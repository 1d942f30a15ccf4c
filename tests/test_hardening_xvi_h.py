"""Hardening XVI, helper h (issue 32, hostile pass XVI: user files and folders). Every case it ran is in
tests/hostile_xvi_h_cases.md.

Critical (a user's folder touched):
- CD1–CD3: a plug-in learner whose ``fit`` called ``os.chdir`` (as libraries that work in a folder of their own
  do) made the rest of ``check --output out`` use the ``out`` of the new directory: the run's files written into
  a user's ``out/`` there, and, when the run then failed, that folder emptied (the user's notes.txt deleted) and
  removed. A command names its folders relative to where it started (``--output out``, a relative cache), so
  code that is not topicaudit's (a plug-in's import, constructor, fit) now runs with the working directory put
  back after it (``owned_folders.working_directory_kept``), with a note.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from topicaudit.cli.main import main

from linked_cache import snapshot

CHDIR = ("import os\nfrom topicaudit.targets.learners.lda import VariationalLDA\n\n\n"
         "if os.environ.get('XVI_IMPORT_TO'):\n    os.chdir(os.environ['XVI_IMPORT_TO'])\n\n\n"
         "class Moves(VariationalLDA):\n"
         "    def __init__(self, k, **params):\n"
         "        if os.environ.get('XVI_INIT_TO'):\n            os.chdir(os.environ['XVI_INIT_TO'])\n"
         "        super().__init__(k, **params)\n\n"
         "    def fit(self, X, seed):\n"
         "        if os.environ.get('XVI_FIT_TO'):\n            os.chdir(os.environ['XVI_FIT_TO'])\n"
         "        if os.environ.get('XVI_RAISE'):\n            raise RuntimeError('the learner failed')\n"
         "        return super().fit(X, seed)\n")


@pytest.fixture
def users_out(tmp_path, monkeypatch):
    """A working directory holding a plug-in learner module, and a user's folder V holding its own ``out/``
    (notes.txt and an empty models/, mtimes 2020): the name ``--output out`` has there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    module = f"moving_learner_{tmp_path.name.replace('-', '_')}"  # each test imports its own
    (tmp_path / f"{module}.py").write_text(CHDIR)
    monkeypatch.syspath_prepend(str(tmp_path))
    users = tmp_path / "V"
    (users / "out" / "models").mkdir(parents=True)
    (users / "out" / "notes.txt").write_text("mine")
    for path in (users / "out" / "notes.txt", users / "out" / "models", users / "out", users):
        os.utime(path, (1577836800, 1577836800))
    return users, f"{module}:Moves"


@pytest.mark.parametrize("when,fails", [("XVI_FIT_TO", False), ("XVI_FIT_TO", True), ("XVI_INIT_TO", False),
                                        ("XVI_IMPORT_TO", False)], ids=["fit", "fit-fails", "init", "import"])
def test_a_learner_that_changes_the_working_directory_writes_and_removes_nothing_there(users_out, monkeypatch,
                                                                                       capsys, when, fails):
    """CD1–CD6: the run is written in the ``out`` of the directory the command started in, never in the user's
    ``V/out`` (files written there, or, after a failure, the user's notes.txt and folder deleted)."""
    users, learner = users_out
    before = snapshot(users)
    monkeypatch.setenv(when, str(users))
    if fails:
        monkeypatch.setenv("XVI_RAISE", "1")
    code = main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--learner", learner, "--output", "out"])
    assert code == (3 if fails else 0)
    assert snapshot(users) == before
    assert Path.cwd() == users.parent
    if not fails:
        assert (users.parent / "out" / "results.json").is_file()
        assert "working directory" in capsys.readouterr().err
