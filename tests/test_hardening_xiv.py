"""Hardening XIV (issue 32, hostile pass XIV): what it found. Every case it ran is in tests/hostile_xiv_cases.md.

Critical (a user file touched), each race made deterministic with a plug-in learner or a patched step:
- T1/T2: a run that failed inside a cached entry (``check CONFIG`` with the run cache) removed the entry it had
  made by *path* — ``os.rmdir`` in the writer lock, ``shutil.rmtree`` when the entry held nothing, not even
  ``.lock`` — after the cache's ``runs/`` had been swapped for a link to a user's folder: the user's folder of the
  entry's name was removed there, with what it held. Now removed by its parent's descriptor
  (``owned_folders.remove_empty``) and only while it is still the folder the lock held.
- RP2/RP3: a hard link of a user's file placed in a report's staging folder (as report.html, or a figure) was
  opened with ``O_TRUNC`` and overwritten with the page: ``Folder.put`` now renames a new file over the name.
- PR1: the writability probe of a cached run was made and removed by path, through a swapped ``runs/``.
- PT1: the phase trace appended to a hard link of a run's results.json (the run was then refused as edited).
- LX1, RX1: ``--output L/../out`` (L a link elsewhere) was opened by ``abspath``, which drops ``L/..`` by the text:
  the run was written into the user's ./out, over its config.toml; and a report of RUN and L/../RUN showed
  RUN's verdict twice (a forged verdict: the read-once snapshot keyed files by ``abspath`` too).
Non-critical, fixed: a relative cache anchor read after a chdir (G1), link loops (exit 3), a report's staging
folder swapped for a link renamed into place (RP1), a crashed start removing a user's empty ``models/`` (MD1).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from topicaudit import folder_anchors, owned_folders
from topicaudit.cli.main import main

from linked_cache import snapshot

# An lda whose fit swaps the cache's runs/ for a link to the user's folder (which holds a folder of the entry's
# name), then fails: the race between the run and its clean-up, made deterministic.
LEARNER = textwrap.dedent("""
    import os, pathlib
    from topicaudit.targets.learners.lda import VariationalLDA

    class Swaps(VariationalLDA):
        def fit(self, X, seed):
            cache, users = pathlib.Path(os.environ["TOPICAUDIT_CACHE_DIR"]), pathlib.Path(os.environ["USERS"])
            entry = next((cache / "runs").iterdir())
            (users / entry.name).mkdir()
            if os.environ.get("DROP_LOCK"):  # the entry then holds nothing at all once emptied: rmtree
                (entry / ".lock").unlink()
                (users / entry.name / "thesis.tex").write_text("mine")
            (cache / "runs").rename(cache / "runs-moved")
            (cache / "runs").symlink_to(users)
            raise RuntimeError("the learner failed")

    class Fails(VariationalLDA):
        def fit(self, X, seed):
            raise RuntimeError("the learner failed")
""")
CONFIG = ('[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nk = 3\nlearner = "swapping_learner:Swaps"\n'
          '[attack]\nshadows = 0\n[attack.canaries]\ncount = 40\n')


@pytest.mark.parametrize("drop_lock", [False, True], ids=["rmdir", "rmtree"])
def test_a_failed_cached_run_never_removes_the_users_folder_its_runs_link_names(tmp_path, monkeypatch, capsys,
                                                                                  drop_lock):
    (tmp_path / "swapping_learner.py").write_text(LEARNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    users = tmp_path / "users"
    users.mkdir()
    (users / "keep.txt").write_text("mine")
    monkeypatch.setenv("USERS", str(users))
    monkeypatch.setenv("TOPICAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    if drop_lock:
        monkeypatch.setenv("DROP_LOCK", "1")
    config = tmp_path / "swaps.toml"
    config.write_text(CONFIG)
    code = main(["check", str(config), "--epsilon", "1"])
    assert code == 2, capsys.readouterr().err  # the learner's own exception, named: no verdict
    entries = [p for p in users.iterdir() if p.name != "keep.txt"]
    assert len(entries) == 1 and entries[0].is_dir()  # was removed (rmdir; rmtree: with the thesis in it)
    assert not drop_lock or (entries[0] / "thesis.tex").read_text() == "mine"
    assert (tmp_path / "cache" / "runs").is_symlink()


def test_the_phase_trace_never_appends_to_a_hard_link_of_a_runs_evidence(tmp_path, monkeypatch, capsys):
    config = tmp_path / "small.toml"
    config.write_text(CONFIG.replace('learner = "swapping_learner:Swaps"\n', ""))
    run = tmp_path / "run"
    assert main(["run", str(config), "--output", str(run)]) == 0
    evidence = hashlib.sha256((run / "results.json").read_bytes()).hexdigest()
    os.link(run / "results.json", tmp_path / "trace.txt")  # a name outside the run for the run's evidence
    monkeypatch.setenv("TOPICAUDIT_PHASE_TRACE", str(tmp_path / "trace.txt"))
    capsys.readouterr()
    assert main(["check", str(run), "--epsilon", "1000"]) == 0
    assert "hard link" in capsys.readouterr().err
    assert hashlib.sha256((run / "results.json").read_bytes()).hexdigest() == evidence  # was appended to
    monkeypatch.delenv("TOPICAUDIT_PHASE_TRACE")
    assert main(["check", str(run), "--epsilon", "1000"]) == 0  # still verifies (was refused as edited)


def test_a_relative_cache_anchor_declared_before_a_chdir_is_still_the_folder_it_named(tmp_path, monkeypatch):
    """``$TOPICAUDIT_CACHE_DIR=relcache`` used, then ``os.chdir`` in the same Python session: the declared anchor
    was kept relative, read against the new working directory, and every later path below the old cache was a
    ValueError (a crash in the caller's script) instead of the cache's own folder."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    monkeypatch.chdir(tmp_path / "one")
    folder_anchors.declare(Path("relcache") / "runs", Path("relcache"))
    monkeypatch.chdir(tmp_path / "two")
    with owned_folders.open_folder(tmp_path / "one" / "relcache" / "runs" / "entry", create=True) as folder:
        folder.write("x.json", lambda handle: handle.write(b"{}"))
    assert (tmp_path / "one" / "relcache" / "runs" / "entry" / "x.json").read_bytes() == b"{}"
    assert not (tmp_path / "two" / "relcache").exists()


@pytest.mark.parametrize("command", [["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output"],
                                     ["report", "PA", "-o"]], ids=["run", "report"])
def test_an_output_through_a_link_loop_is_one_message_not_a_crash(tmp_path, monkeypatch, capsys, command):
    """``--output loop1/out`` with loop1 → loop2 → loop1 was exit 3 (RuntimeError "Symlink loop" from
    ``Path.resolve``), a traceback for bad input."""
    monkeypatch.chdir(tmp_path)
    if "report" in command:
        assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "PA"]) == 0
    Path("loop1").symlink_to("loop2")
    Path("loop2").symlink_to("loop1")
    before = sorted(os.listdir(tmp_path))
    code = main(command + ["loop1/out"])
    assert code == 2 and "loop" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == before


def test_a_report_whose_staging_folder_is_swapped_for_a_link_puts_nothing_in_place(tmp_path, monkeypatch):
    """The staging folder renamed away and a link to a user's folder put in its place while the report was
    written: the link was renamed into -o's place and the report said written (-o then named the user's folder,
    and the report's own file list was read through the link)."""
    from topicaudit.reports import build, output_folder

    run = tmp_path / "run"
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", str(run)]) == 0
    users = tmp_path / "users"
    users.mkdir()
    (users / "keep.txt").write_text("mine")
    before = snapshot(users)
    render = output_folder.render_html

    def swapping(*args, **kwargs):
        staging = next(p for p in tmp_path.iterdir() if ".tmp-" in p.name)
        staging.rename(tmp_path / "moved")
        staging.symlink_to(users)
        return render(*args, **kwargs)

    monkeypatch.setattr(output_folder, "render_html", swapping)
    with pytest.raises(owned_folders.LinkedFolder):
        build.build_report([run], tmp_path / "rep")
    assert not os.path.lexists(tmp_path / "rep") and snapshot(users) == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


@pytest.mark.parametrize("where", ["report.html", "figures"])
def test_a_hard_link_put_in_a_reports_staging_folder_is_replaced_not_written_into(tmp_path, monkeypatch, where):
    """A hard link of a user's file placed in the staging folder under a name the report then wrote
    (report.html, a figure's PNG) was opened with O_TRUNC and overwritten: the user's file held the page."""
    from topicaudit.reports import build, figures, output_folder

    run = tmp_path / "run"
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", str(run)]) == 0
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("my thesis")

    def plant(name: str) -> None:
        staging = next(p for p in tmp_path.iterdir() if ".tmp-" in p.name)
        target = staging / name
        target.parent.mkdir(exist_ok=True)
        if not target.exists():
            os.link(thesis, target)

    if where == "report.html":
        render = output_folder.render_html
        monkeypatch.setattr(output_folder, "render_html", lambda *a, **k: (plant("report.html"), render(*a, **k))[1])
    else:
        save = figures.save_figure
        monkeypatch.setattr(figures, "save_figure", lambda fig, directory, stem: (
            plant(f"figures/{stem}.png"), save(fig, directory, stem))[1])
    build.build_report([run], tmp_path / "rep")
    assert thesis.read_text() == "my thesis"  # was the report's page (or PNG)
    assert (tmp_path / "rep" / "report.html").stat().st_size > 1000


def test_the_writability_probe_of_a_cached_run_never_goes_through_a_runs_link(tmp_path, monkeypatch):
    """The probe file of ``check_output_directory`` was made and removed by path in the cached entry: with the
    cache's runs/ swapped for a link after the lock was taken, in the user's folder of the entry's name (its
    times put back, its change time not)."""
    from topicaudit.engine import run as engine_run
    from topicaudit.engine.check import assert_privacy

    config = tmp_path / "small.toml"
    config.write_text(CONFIG.replace('learner = "swapping_learner:Swaps"\n', ""))
    monkeypatch.setenv("TOPICAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    assert_privacy(str(config), epsilon=1000)
    runs = tmp_path / "cache" / "runs"
    entry = next(runs.iterdir()).name
    users = tmp_path / "users"
    (users / entry).mkdir(parents=True)
    (users / entry / "keep.txt").write_text("mine")
    changed = os.stat(users / entry).st_ctime_ns
    validate = engine_run.validate

    def swapping(*args, **kwargs):
        runs.rename(tmp_path / "cache" / "runs-moved")
        runs.symlink_to(users)
        return validate(*args, **kwargs)

    monkeypatch.setattr(engine_run, "validate", swapping)
    with pytest.raises(Exception):
        assert_privacy(str(config), epsilon=1000)  # (refused: what the link names is no run)
    assert os.stat(users / entry).st_ctime_ns == changed and sorted(os.listdir(users / entry)) == ["keep.txt"]


def test_a_crashed_start_leaves_the_users_output_holding_an_empty_models_folder_as_found(tmp_path, monkeypatch,
                                                                                         capsys):
    """``--output D``, D the user's folder holding only an empty ``models/``: a start that crashed in the
    learner's fit removed that folder (and D's times changed) as if an earlier interrupted start had left it."""
    (tmp_path / "swapping_learner.py").write_text(LEARNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "fails.toml"
    config.write_text(CONFIG.replace("swapping_learner:Swaps", "swapping_learner:Fails"))
    output = tmp_path / "D"
    (output / "models").mkdir(parents=True)
    os.utime(output / "models", ns=(10**18, 10**18))
    os.utime(output, ns=(10**18, 10**18))
    before = snapshot(output)
    assert main(["check", str(config), "--epsilon", "1", "--output", str(output)]) == 2
    assert "the learner failed" in capsys.readouterr().err
    assert snapshot(output) == before


def test_an_output_through_a_link_and_dotdot_is_the_folder_the_system_names(tmp_path, monkeypatch):
    """``--output L/../out``, L a link to deep/dir: the system names deep/out, and every check before the run
    looked there (nothing, so nothing refused); the folders were opened by ``abspath``, which drops ``L/..`` by the
    text, so the run was written into the user's ./out, over its config.toml."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deep" / "dir").mkdir(parents=True)
    users = tmp_path / "out"
    users.mkdir()
    (users / "config.toml").write_text("# mine\n")
    (users / "thesis.tex").write_text("mine")
    Path("L").symlink_to("deep/dir")
    before = snapshot(users)
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "L/../out"]) == 0
    assert snapshot(users) == before
    assert (tmp_path / "deep" / "out" / "results.json").is_file()


def test_a_report_of_a_run_named_through_a_link_and_dotdot_shows_that_runs_own_verdict(tmp_path, monkeypatch):
    """``report RUN L/../RUN``: two runs (./RUN checked at ε = 1, VIOLATED; deep/RUN at ε = 1000, CONSISTENT).
    The read-once snapshot keyed files by ``abspath``, which takes L/../RUN for ./RUN: both cards showed
    ./RUN's VIOLATED, the second under deep/RUN's name."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "RUN"]) == 0
    (tmp_path / "deep" / "dir").mkdir(parents=True)
    shutil.copytree(tmp_path / "RUN", tmp_path / "deep" / "RUN")
    Path("L").symlink_to("deep/dir")
    main(["check", "RUN", "--epsilon", "0.001"])
    assert main(["check", "deep/RUN", "--epsilon", "1000"]) == 0
    assert main(["report", "RUN", "L/../RUN", "-o", "rep"]) == 0
    page = (tmp_path / "rep" / "report.md").read_text()
    assert "CONSISTENT: not refuted" in page and "VIOLATED: the claim" in page  # was VIOLATED twice


def test_a_killed_reports_staging_holding_a_page_being_put_is_still_removed(tmp_path):
    """Pages are now put as ``.NAME.XXXXXXXX.tmp`` renamed into place: a report killed in between leaves one, and
    its staging folder must still read as a report's (removed by the next report), not as a user's (kept)."""
    run = tmp_path / "run"
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", str(run)]) == 0
    stale = tmp_path / ".rep.tmp-999999999-ab12cd34"
    (stale / "figures").mkdir(parents=True)
    (stale / "figures" / "01-x.png").write_bytes(b"png")
    (stale / ".report.html.0a1b2c3d.tmp").write_text("<html")
    kept = tmp_path / ".rep.tmp-999999999-mine"
    kept.mkdir()
    (kept / ".report.html.0a1b2c3d.tmp.bak").write_text("mine")
    assert main(["report", str(run), "-o", str(tmp_path / "rep")]) == 0
    assert not stale.exists() and (kept / ".report.html.0a1b2c3d.tmp.bak").read_text() == "mine"
