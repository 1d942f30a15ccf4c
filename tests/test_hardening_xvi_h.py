"""Hardening XVI, helper h (issue 32, hostile pass XVI: user files and folders). Every case it ran is in
tests/hostile_xvi_h_cases.md.

Critical (a user's folder touched):
- CD1–CD3: a plug-in learner whose ``fit`` called ``os.chdir`` (as libraries that work in a folder of their own
  do) made the rest of ``check --output out`` use the ``out`` of the new directory: the run's files written into
  a user's ``out/`` there, and, when the run then failed, that folder emptied (the user's notes.txt deleted) and
  removed. A command names its folders relative to where it started (``--output out``, a relative cache), so
  code that is not topicaudit's (a plug-in's import, constructor, fit) now runs with the working directory put
  back after it (``topicaudit.process_state``), with a note.
- FF2–FF4: on a full disk, ``run --output P`` (P the user's empty folder) left an empty ``.lock`` in P (the PID's
  write failed outside the block that undoes the lock), and ``check --json P/o.json`` left P a new mtime.
- IM7, IM8, AP1: a user's append-only folder (``chattr +a``: new names, but no removal or rename) was given a
  probe file (``check --json P/o.json``, ``report -o P/rep``) or a ``.lock`` (``run --output D``) that could not
  be removed again, on the way to a refusal. Such a folder (and an immutable one) is refused before anything is
  made in it.
- SW1: ``check CONFIG --output P/x/out`` (x new) whose learner, before failing, had P moved away and a link to
  the user's V (holding an empty ``x/``) put in its place: the failed run's clean-up removed ``V/x``. The
  folders a command makes above its output were removed by path; they are now removed only while they are
  still the folders made (their identities, reached from the held folder's descriptor by ``..``).
- CC5: ``check CONFIG`` with ``HOME=/nonexistent`` (Debian's ``nobody``; CI containers) made ``/nonexistent``
  itself, then ``.cache/topicaudit/runs/…`` in it: the default cache's anchor was made with ``mkdir -p``. With no
  home directory the default cache is now off (a note says so; ``TOPICAUDIT_CACHE_DIR`` keeps one).
- MP1: ``report -o P/rep``, rep a mount point (an empty file system's root): the old report could not be moved
  aside (EBUSY), and the folder made for it, ``.rep.old-PID-…``, was left in P (exit 3, P's times changed). It is
  removed again, and a mount point is exit 2 naming it.
- OD7, OD9 (not critical: the user named the file): ``check my.toml --json my.toml`` replaced the configuration
  the check had read, ``--json docs.json`` its corpus. Refused.
- KR: one SIGTERM sent to the process group (``kill -- -PGID``, a CI runner cancelling a job) reaches the command
  twice, directly and passed on by the supervisor; the child took the copy for a second "stop now" and exited in
  the middle of undoing the first: ``report -o P/rep`` left an empty staging folder in P and P's times changed.
  The supervisor now counts the stops it passes on (shared with the child), and the child takes one copy of a
  stop passed on once as the same stop.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from topicaudit import owned_folders
from topicaudit.cli.main import main

from linked_cache import run_dir, snapshot  # noqa: F401 — run_dir: a fixture

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
    assert code == (2 if fails else 0)  # a failing fit: the learner's own exception, named
    assert snapshot(users) == before
    assert Path.cwd() == users.parent
    if not fails:
        assert (users.parent / "out" / "results.json").is_file()
        assert "working directory" in capsys.readouterr().err


def _users_folder(tmp_path: Path) -> Path:
    users = tmp_path / "P"
    users.mkdir()
    (users / "o.json").write_text('{"mine": 1}')
    for path in (users / "o.json", users):
        os.utime(path, (1577836800, 1577836800))
    return users


def test_a_check_whose_json_meets_a_full_disk_leaves_the_users_folder_as_found(run_dir, tmp_path, monkeypatch):
    """FF2: ``check RUN --json P/o.json`` on a full disk: exit 2, o.json kept, and P's times as found (its staged
    file was removed, but P kept the new mtime of that create and remove)."""
    users = _users_folder(tmp_path)
    before = snapshot(users)
    real = os.fsync

    def full(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(28, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", full)
    assert main(["check", "RUN", "--epsilon", "0.01", "--json", "P/o.json"]) == 2
    assert snapshot(users) == before


@pytest.mark.parametrize("output", ["P", "P/new"], ids=["users-empty-folder", "new-folder"])
def test_a_run_whose_lock_cannot_be_written_leaves_the_users_folder_as_found(tmp_path, monkeypatch, capsys,
                                                                             output):
    """FF3, FF4: the holder's PID could not be written into ``.lock`` (a full disk): exit 2 with the ``.lock``
    (and the folder made for the run) left in the user's folder, and its times changed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    users = tmp_path / "P"
    users.mkdir()
    os.utime(users, (1577836800, 1577836800))
    before = snapshot(users)
    real = os.pwrite

    def full(fd, data, offset):
        if data == f"{os.getpid()}\n".encode():
            raise OSError(28, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", full)
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", output]) == 2
    assert ".lock" in capsys.readouterr().err
    assert snapshot(users) == before


GROUP_SIGTERM = """
import os, signal, sys, time
sys.argv = ["topicaudit", "report", "RUN", "-o", "P/rep"]
from topicaudit.reports import output_folder
from topicaudit.cli import console

def stopped(report):  # one SIGTERM to the whole process group, while the report is being built
    os.killpg(0, signal.SIGTERM)
    time.sleep(5)

output_folder.render_html = stopped
sys.exit(console.main())
"""


def test_one_sigterm_to_the_process_group_leaves_the_users_folder_as_found(run_dir, tmp_path):
    """KR: ``report RUN -o P/rep`` stopped by one SIGTERM to its process group: exit 130, and P (holding the
    user's thesis.tex and an older report) exactly as found: no staging folder left, no new times."""
    assert main(["report", "RUN", "-o", "P/rep"]) == 0
    (tmp_path / "P" / "thesis.tex").write_text("mine")
    os.utime(tmp_path / "P", (1577836800, 1577836800))
    before = snapshot(tmp_path / "P")
    process = subprocess.run([sys.executable, "-c", GROUP_SIGTERM], cwd=tmp_path, capture_output=True, text=True,
                             start_new_session=True, timeout=120)
    assert process.returncode == 130, process.stderr
    assert process.stderr.count("interrupted") == 1, process.stderr
    assert snapshot(tmp_path / "P") == before


def test_a_json_file_named_near_the_longest_name_is_written(run_dir, tmp_path, capsys):
    """N1: ``--json`` named with 250 characters (the file system takes 255) was refused "File name too long":
    its temporary, ``.NAME.XXXXXXXX.tmp``, was 14 characters longer."""
    name = "a" * 250
    assert main(["check", "RUN", "--epsilon", "0.01", "--json", name]) == 1
    assert (tmp_path / name).read_text().startswith("{")
    assert [entry for entry in os.listdir(tmp_path) if entry.endswith(".tmp")] == []


@pytest.fixture
def append_only(tmp_path):
    """A user's folder P holding thesis.tex, and P/D, both made append-only (root and chattr needed)."""
    users = tmp_path / "P"
    (users / "D").mkdir(parents=True)
    (users / "thesis.tex").write_text("mine")
    made = []
    try:
        for folder in (users / "D", users):
            if subprocess.run(["chattr", "+a", str(folder)], capture_output=True).returncode != 0:
                pytest.skip("chattr +a is not available here (root and a file system with attributes needed)")
            made.append(folder)
        yield users
    finally:
        for folder in made:
            subprocess.run(["chattr", "-a", str(folder)], capture_output=True)


@pytest.mark.parametrize("command", [["check", "RUN", "--epsilon", "0.01", "--json", "P/o.json"],
                                     ["report", "RUN", "-o", "P/rep"],
                                     ["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "P/D"]],
                         ids=["json", "report", "run"])
def test_an_append_only_folder_is_refused_with_nothing_made_in_it(run_dir, append_only, capsys, command):
    """IM7, IM8, AP1: exit 2 naming the folder as append-only, and nothing left in it."""
    before = snapshot(append_only)
    assert main(command) == 2
    assert "append-only" in capsys.readouterr().err
    assert snapshot(append_only) == before


SWAPS = ("import os\nfrom topicaudit.targets.learners.lda import VariationalLDA\n\n\n"
         "class Swaps(VariationalLDA):\n"
         "    def fit(self, X, seed):\n"
         "        folder, users = os.environ['XVI_SWAP'], os.environ['XVI_TO']\n"
         "        os.rename(folder, folder + '-moved')\n        os.symlink(users, folder)\n"
         "        raise RuntimeError('the learner failed')\n")


def test_a_failed_run_removes_no_folder_put_where_it_made_one(tmp_path, monkeypatch, capsys):
    """SW1: the folder made above the run (P/x) is removed after the failure only while it is still that folder:
    here P was moved away and P now names the user's V, whose empty x/ was removed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    module = f"swapping_learner_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(SWAPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "P").mkdir()
    users = tmp_path / "V"
    (users / "x").mkdir(parents=True)
    for path in (users / "x", users):
        os.utime(path, (1577836800, 1577836800))
    before = snapshot(users)
    monkeypatch.setenv("XVI_SWAP", str(tmp_path / "P"))
    monkeypatch.setenv("XVI_TO", str(users))
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--learner", f"{module}:Swaps",
                 "--output", "P/x/out"]) == 2
    assert snapshot(users) == before
    assert os.listdir(tmp_path / "P-moved") == ["x"]  # what the run made stays where it went, emptied


def test_a_missing_home_directory_is_never_made_for_the_default_cache(tmp_path, monkeypatch, capsys):
    """CC5: HOME names a folder that does not exist: the check runs (cache off, said), and HOME is not made."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    monkeypatch.delenv("TOPICAUDIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nonexistent"))
    Path("c.toml").write_text('[synthetic]\nn_docs = 120\nn_words = 200\nk = 2\n[target]\nk = 2\nlearner = "lda"\n'
                              '[attack]\nshadows = 0\n[attack.canaries]\ncount = 20\n')
    assert main(["check", "c.toml", "--epsilon", "0.01"]) == 1
    assert not (tmp_path / "nonexistent").exists()
    assert "does not exist" in capsys.readouterr().err


def test_a_report_that_cannot_move_the_old_one_aside_leaves_nothing_beside_it(run_dir, tmp_path, monkeypatch,
                                                                               capsys):
    """MP1: the old report's rename fails (EBUSY: a mount point): exit 2, and P exactly as found."""
    assert main(["report", "RUN", "-o", "P/rep"]) == 0
    os.utime(tmp_path / "P", (1577836800, 1577836800))
    before = snapshot(tmp_path / "P")
    real = owned_folders.Folder.move

    def busy(self, name, into, new_name):
        if new_name == "report":
            raise OSError(16, "Device or resource busy", name)
        return real(self, name, into, new_name)

    monkeypatch.setattr(owned_folders.Folder, "move", busy)
    assert main(["report", "RUN", "-o", "P/rep"]) == 2
    assert "mount point" in capsys.readouterr().err
    assert snapshot(tmp_path / "P") == before


NO_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search,-fowner",
          "--bounding-set=-dac_override,-dac_read_search,-fowner"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv, to drop the capabilities that ignore permission bits")
@pytest.mark.parametrize("command", [["check", "RUN", "--epsilon", "0.01", "--json", "P/nox/o.json"],
                                     ["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "P/nox/x"]],
                         ids=["json", "run"])
def test_a_folder_that_cannot_be_searched_is_a_refusal_not_an_internal_error(run_dir, tmp_path, command):
    """NX2, NX6: a folder without search rights (``chmod a-x``) on the way to an output: exit 3 with a
    PermissionError traceback; now exit 2 naming the path."""
    (tmp_path / "P" / "nox").mkdir(parents=True)
    (tmp_path / "P" / "nox").chmod(0o666)
    before = snapshot(tmp_path / "P")
    code = ("import sys; from topicaudit.cli.main import main; sys.exit(main(sys.argv[1:]))")
    process = subprocess.run([*NO_DAC, sys.executable, "-c", code, *command], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300, env={**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off"})
    (tmp_path / "P" / "nox").chmod(0o755)
    assert process.returncode == 2, process.stderr
    assert "permission denied" in process.stderr and "P/nox" in process.stderr
    (tmp_path / "P" / "nox").chmod(0o666)
    assert snapshot(tmp_path / "P") == before
    (tmp_path / "P" / "nox").chmod(0o755)


@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_a_check_never_writes_its_document_over_the_configuration_it_reads(tmp_path, monkeypatch, capsys, flag):
    """OD7: ``check my.toml --json my.toml`` replaced the user's configuration with the check's JSON document."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    text = '[synthetic]\nn_docs = 120\nn_words = 200\nk = 2\n[target]\nk = 2\nlearner = "lda"\n' \
           '[attack]\nshadows = 0\n[attack.canaries]\ncount = 20\n'
    Path("my.toml").write_text(text)
    assert main(["check", "my.toml", "--epsilon", "0.01", "--output", "r", flag, "./my.toml"]) == 2
    assert "configuration file" in capsys.readouterr().err
    assert Path("my.toml").read_text() == text


def test_a_check_never_writes_its_document_over_the_corpus_it_reads(tmp_path, monkeypatch, capsys):
    """OD9: ``check c.toml --json docs.json``, docs.json the configuration's corpus: the corpus was replaced."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    corpus = '{"text": ' + str(["dogs bark at cats", "cats sleep all day", "mice run from cats"] * 40) \
        .replace("'", '"') + "}"
    Path("docs.json").write_text(corpus)
    Path("c.toml").write_text('[corpus]\npath = "docs.json"\npreprocess = false\n[target]\nk = 2\n'
                              'learner = "lda"\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 10\n')
    assert main(["check", "c.toml", "--epsilon", "0.01", "--output", "r", "--json", "docs.json"]) == 2
    assert "the corpus ([corpus] path)" in capsys.readouterr().err
    assert Path("docs.json").read_text() == corpus


def test_the_phase_trace_is_never_appended_to_a_file_that_is_not_one(tmp_path, monkeypatch, capsys):
    """OD10: ``TOPICAUDIT_PHASE_TRACE=c.toml run c.toml``: the configuration was appended to before it was read,
    and the run then refused it as invalid TOML. A file that is not empty and not a trace is left alone (a note)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    text = '[synthetic]\nn_docs = 120\nn_words = 200\nk = 2\n[target]\nk = 2\nlearner = "lda"\n' \
           '[attack]\nshadows = 0\n[attack.canaries]\ncount = 20\n'
    Path("c.toml").write_text(text)
    monkeypatch.setenv("TOPICAUDIT_PHASE_TRACE", str(tmp_path / "c.toml"))
    assert main(["run", "c.toml", "--output", "r"]) == 0
    assert Path("c.toml").read_text() == text
    assert "phase trace" in capsys.readouterr().err
    monkeypatch.setenv("TOPICAUDIT_PHASE_TRACE", str(tmp_path / "t.txt"))
    assert main(["run", "c.toml", "--output", "r2"]) == 0
    assert main(["run", "c.toml", "--output", "r3"]) == 0  # a trace already: appended to
    lines = Path("t.txt").read_text().splitlines()
    assert len(lines) > 2 and all('"phase"' in line for line in lines)
