"""Hardening XV (issue 32, hostile pass XV): what it found. Every case it ran is in tests/hostile_xv_cases.md.

Critical (a user's folder touched):
- R10: ``report RUN -o a/gone/../rep`` (``gone`` absent) made the folder ``a/gone`` and left it there after the
  report was written in ``a/rep``: ``Path.mkdir(parents=True)`` of ``a/gone/..`` makes ``a/gone`` first, and the
  folders it made are removed only on failure. ``run --output a/gone/../run`` made no such folder. The report's
  output is now taken as the system names it (``owned_folders.absolute``) whenever it holds ``..``, which also
  makes ``-o L/..`` (L a link into a report) that report rather than the folder holding L.
- G4: ``sweep --output a/gone/../sw`` did the same (``output.mkdir(parents=True)`` by path in ``run_sweep``).
- F5: a failed ``run --output P/y/z/..`` (z absent) left the folder it had made, P/y, and P's times changed: the
  writer lock made it as the system names it and removed it by the text (``..`` cannot be removed).
Non-critical, fixed: ``check CONFIG --output P/gone/../r`` wrote the run in P/r and then read ``P/gone/../r``
(nothing): exit 2 "not a finished run" after the whole run (G3, F10). A plug-in learner that set ``sys.stdout = None`` had check exit 1 with its verdict only in
check.json and no note saying so (``print`` writes nothing to None, silently), and exit 3 with ``--json -``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from topicaudit.cli.main import main

from linked_cache import run_dir, snapshot  # noqa: F401 — run_dir: a fixture


def test_a_report_output_through_an_absent_folder_and_dotdot_makes_no_folder_beside_it(run_dir, capsys):
    """``-o a/gone/../rep``: the report in a/rep, and nothing else made in the user's ``a``."""
    users = run_dir.parent / "a"
    users.mkdir()
    (users / "thesis.tex").write_text("mine")
    assert main(["report", "RUN", "-o", "a/gone/../rep"]) == 0
    assert sorted(os.listdir(users)) == ["rep", "thesis.tex"]
    assert (users / "rep" / "report.html").is_file()


def test_a_report_output_through_a_link_and_dotdot_is_the_report_the_system_names(run_dir, capsys):
    """``-o L/..``, L a link to rep/figures: the system names rep (a finished report, replaced); the folder
    holding L (the user's) is neither refused by mistake nor touched."""
    assert main(["report", "RUN", "-o", "rep"]) == 0
    Path("L").symlink_to("rep/figures")
    (run_dir.parent / "thesis.tex").write_text("mine")
    before = snapshot(run_dir.parent / "RUN")
    assert main(["report", "RUN", "-o", "L/.."]) == 0
    assert snapshot(run_dir.parent / "RUN") == before
    assert (run_dir.parent / "rep" / "report.md").is_file()
    assert (run_dir.parent / "thesis.tex").read_text() == "mine"


SWEEP = ('[synthetic]\nn_docs = 120\nn_words = 200\nk = 2\n[target]\nk = 2\nlearner = "lda"\n'
         '[attack]\nshadows = 0\n[attack.canaries]\ncount = 20\n')


def test_a_sweep_output_through_an_absent_folder_and_dotdot_makes_no_folder_beside_it(tmp_path, monkeypatch,
                                                                                       capsys):
    """G4: ``sweep --output a/gone/../sw`` made ``a/gone`` (``mkdir(parents=True)`` by path) and left it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    Path("c.toml").write_text(SWEEP)
    users = tmp_path / "a"
    users.mkdir()
    (users / "thesis.tex").write_text("mine")
    assert main(["sweep", "c.toml", "--param", "target.k", "--values", "2", "--output", "a/gone/../sw"]) == 0
    assert sorted(os.listdir(users)) == ["sw", "thesis.tex"]
    assert (users / "sw" / "sweep.json").is_file()


@pytest.mark.parametrize("extra", [[], ["--json", "-"]], ids=["line", "json"])
def test_a_verdict_a_learner_left_no_stdout_for_is_said_to_be_unprinted(run_dir, monkeypatch, capsys, extra):
    """X-stdoutnone: a plug-in that set ``sys.stdout = None``: print() wrote nothing and said nothing, exit 1 with
    no VIOLATED anywhere on the streams and no note that it is only in check.json (``--json -``: exit 3)."""
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["check", "RUN", "--epsilon", "0.01", *extra]) == 1
    assert "could not be printed" in capsys.readouterr().err


FAILING = "from topicaudit.targets.learners.lda import VariationalLDA\n\n\nclass Fails(VariationalLDA):\n" \
          "    def fit(self, X, seed):\n        raise RuntimeError('the learner failed')\n"


@pytest.mark.parametrize("output", ["P/y/z/..", "P/x/../../P/y/z/.."])
def test_a_failed_run_whose_output_ends_in_dotdot_leaves_the_users_folder_as_found(tmp_path, monkeypatch, capsys,
                                                                                   output):
    """F5: the run's folder was made as the system names it (P/y) but removed by the text (``P/y/z/..``, whose
    last name ``..`` cannot be removed): P/y was left behind and P's times changed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    (tmp_path / "failing_learner.py").write_text(FAILING)
    monkeypatch.syspath_prepend(str(tmp_path))
    users = tmp_path / "P"
    users.mkdir()
    (users / "thesis.tex").write_text("mine")
    os.utime(users, (1577836800, 1577836800))
    before = snapshot(users)
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--learner", "failing_learner:Fails",
                 "--output", output]) == 2  # the learner's own exception, named
    assert snapshot(users) == before


def test_a_check_whose_output_passes_through_an_absent_folder_gives_the_runs_verdict(tmp_path, monkeypatch, capsys):
    """G3/F10: ``check CONFIG --output P/gone/../r``: the run was written in P/r, then read as ``P/gone/../r``
    (nothing, P/gone absent): exit 2 "not a finished run" after the whole run; and P/r left."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    Path("c.toml").write_text(SWEEP)
    (tmp_path / "P").mkdir()
    assert main(["check", "c.toml", "--epsilon", "0.01", "--output", "P/gone/../r"]) == 1
    assert "VIOLATED" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path / "P")) == ["r"]


def test_the_api_in_a_deleted_working_directory_says_so_as_the_command_line_does(run_dir, tmp_path, monkeypatch):
    """Pass XV's N3: `topicaudit.check("/abs/RUN", …)` from a deleted working directory raised a bare
    FileNotFoundError; the command line says why (exit 2). The API now raises that message as a UserError for a
    relative path; an absolute one needs no working directory and is checked (pass XIX-n, DW4)."""
    import topicaudit
    from topicaudit.errors import UserError

    absolute = Path(run_dir).resolve()
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(UserError, match="working directory was deleted"):
        topicaudit.check(os.path.relpath(absolute, tmp_path), 0.01)
    assert topicaudit.check(absolute, 0.01).violated
    assert main(["check", str(absolute), "--epsilon", "0.01"]) == 1
