"""Hardening XVII, helper j (issue 32, hostile pass XVII: user files and folders). Every case it ran is in
tests/hostile_xvii_j_cases.md.

Critical (a user's folder touched):
- RY4: another user's link ``$TMPDIR/ray`` (or ``/tmp/ray``) to a folder of the user's, in a shared sticky folder:
  the local Ray a run starts made that folder writable by everyone (``chmod 777``) and wrote its session there.
  Such a link is refused before Ray starts.
- S20–S22: a new sweep refused at its start (exit 2: a bad corpus, nothing at --ray-address, RY4's link) left
  ``P/sw/sweep.json`` in the user's folder P. A new sweep that fails before any run finished leaves nothing.

Not critical, fixed:
- P1, P2: a ``check`` replaces the run's manifest (a new file renamed over it), and the new file took the
  permissions of the umask: under ``umask 000`` a run's manifest became writable by everyone, under ``umask 077``
  readable by no one else (a team's shared run closed to the team); ``--json o.json`` over the user's private
  (600) o.json made it readable by all. A file of the user's keeps its permissions when it is replaced; one of
  another owner gives none (planted in ``/tmp``, it would make the output writable by others).
- NB1: a package installed where its user cannot write, run with no writable home directory (CI containers,
  Debian's ``nobody``), stopped at import with numba's "cannot cache function …: no locator available": exit 3
  for every command. Kernels are compiled in the process then.
- S6: a file where a sweep puts one of its runs was called "a symbolic link".
- K9, K10: ``check --json`` (or ``--junit``) over the integrity key file replaced the key, then the check was
  refused by its own document. I21: over the plug-in learner's code the check audits, replaced it. I23: inside the
  folder corpus the check reads, the JSON became a document of the next check. All three refused.
- RY3, RY6: ``RAY_TMPDIR`` naming a file was a Ray failure (exit 4); an empty one made Ray create ``./ray`` in the
  working directory and time out. Both are the user's settings: exit 2 before Ray starts.
- R14: ``report SW SW/k=3/rep-0`` reported that run twice. Refused.
- MPL3, MPL4: matplotlib's temporary config folder (no writable one of the user's) was left in ``$TMPDIR`` by every
  report: matplotlib removes it with ``atexit``, which the command's ``os._exit`` never runs.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import numba.core.caching
import pytest

from topicaudit.cli.main import main
from topicaudit.engine.execution.ray_local import check_temp_root
from topicaudit.errors import UserError
from topicaudit.jit import njit

from linked_cache import run_dir, snapshot  # noqa: F401 — run_dir: a fixture


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_a_check_keeps_the_permissions_of_the_manifest_it_replaces(run_dir, capsys, umask):
    """P1, P2: the manifest a check rewrites keeps its mode (644), whatever the umask of the check."""
    manifest = run_dir / "manifest.json"
    manifest.chmod(0o644)
    old = os.umask(umask)
    try:
        assert main(["check", "RUN", "--epsilon", "0.01"]) == 1
    finally:
        os.umask(old)
    assert "VIOLATED" in capsys.readouterr().out
    assert _mode(manifest) == 0o644


def test_a_json_file_of_the_users_keeps_its_permissions(run_dir, tmp_path, capsys):
    """P3': the user's private --json file stays private when the check replaces it."""
    users = tmp_path / "o.json"
    users.write_text("{}")
    users.chmod(0o600)
    assert main(["check", "RUN", "--epsilon", "0.01", "--json", "o.json"]) == 1
    assert "VIOLATED" in capsys.readouterr().out
    assert _mode(users) == 0o600 and "claimed_epsilon" in users.read_text()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs a file of another owner")
def test_a_file_of_another_owner_gives_its_permissions_to_nothing(run_dir, tmp_path, capsys):
    """A file planted by another user (mode 666) where the check writes: the output is the command's own, with the
    umask's permissions, not writable by that user."""
    planted = tmp_path / "o.json"
    planted.write_text("{}")
    os.chown(planted, 65534, 65534)
    planted.chmod(0o666)
    old = os.umask(0o022)
    try:
        assert main(["check", "RUN", "--epsilon", "0.01", "--json", "o.json"]) == 1
    finally:
        os.umask(old)
    capsys.readouterr()
    assert _mode(planted) == 0o644 and os.lstat(planted).st_uid == os.geteuid()


def test_kernels_compile_when_numba_has_no_place_for_its_cache(monkeypatch):
    """NB1: numba finds no folder for its cache (none of its locators applies): the kernel still compiles and
    runs, uncached, rather than the import failing."""
    monkeypatch.setattr(numba.core.caching.CacheImpl, "_locator_classes", [])

    def add_one(x):
        return x + 1

    with pytest.raises(RuntimeError, match="no locator"):  # what numba itself does
        numba.njit(cache=True)(add_one)
    assert njit(cache=True)(add_one)(1) == 2


def test_a_file_where_a_sweep_puts_a_run_is_not_called_a_link(tmp_path, monkeypatch, capsys):
    """S6: a sweep resumed with a file at the place of one of its runs: refused, named as a file, left as found."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    config = tmp_path / "c.toml"
    config.write_text("[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nk = 3\n[attack]\nshadows = 0\n"
                      "[attack.canaries]\ncount = 20\n")
    assert main(["sweep", "c.toml", "--param", "target.k", "--values", "2", "--output", "SW"]) == 0
    (tmp_path / "SW" / "k=3").write_text("mine\n")
    capsys.readouterr()
    assert main(["sweep", "c.toml", "--param", "target.k", "--values", "2,3", "--output", "SW"]) == 2
    err = capsys.readouterr().err
    assert "k=3 is not a directory" in err and "symbolic link" not in err
    assert (tmp_path / "SW" / "k=3").read_text() == "mine\n"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="plants a link of another user")
def test_a_local_ray_never_follows_another_users_link_for_its_temporary_folder(tmp_path, monkeypatch, capsys,
                                                                               own_ray):
    """RY4 (critical): another user's link ``$TMPDIR/ray`` → the user's folder V, in a shared sticky folder: the
    run's local Ray made V writable by everyone (0777) and wrote its session there. Refused before Ray starts,
    V as found."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    shared, users = tmp_path / "tmp", tmp_path / "V"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    users.mkdir(mode=0o755)
    (users / "keep.txt").write_text("keep\n")
    (shared / "ray").symlink_to(users)
    os.lchown(shared / "ray", 65534, 65534)
    monkeypatch.setenv("TMPDIR", str(shared))
    before = snapshot(users)
    code = main(["run", "--shadows", "2", "--canaries", "20", "--k", "2", "--output", "out"])
    assert _mode(users) == 0o755 and snapshot(users) == before
    err = capsys.readouterr().err
    assert code == 2 and f"{shared / 'ray'} is a symbolic link of another user" in err and "RAY_TMPDIR" in err


@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_a_check_never_writes_its_document_over_the_integrity_key(tmp_path, monkeypatch, capsys, flag):
    """K9, K10: ``check RUN --json ~/.config/topicaudit/integrity.key`` replaced the key with the check's JSON, and
    the check was then refused by its own document ("larger than 4096 bytes"): the key, and every run written with
    it, lost. Refused before anything is written; the key file as found."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOPICAUDIT_INTEGRITY_KEY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    key = tmp_path / "config" / "topicaudit" / "integrity.key"
    key.parent.mkdir(parents=True)
    key.write_text("0123456789abcdef" * 3 + "\n")
    key.chmod(0o600)
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "RUN"]) == 0
    capsys.readouterr()
    before = snapshot(key.parent)
    assert main(["check", "RUN", "--epsilon", "0.01", flag, str(key)]) == 2
    assert "integrity key file" in capsys.readouterr().err
    assert snapshot(key.parent) == before
    assert main(["check", "RUN", "--epsilon", "0.01"]) == 1
    assert "authenticated" in capsys.readouterr().out


@pytest.mark.parametrize("variables", [{"RAY_TMPDIR": ""}, {"TMPDIR": "tmp"}], ids=["empty-ray-tmpdir", "relative-tmpdir"])
def test_a_local_ray_is_never_started_in_a_folder_below_the_working_directory(monkeypatch, variables):
    """RY6: ``RAY_TMPDIR=`` (an empty CI variable) made Ray create ``./ray`` (mode 777) in the user's working
    directory, then time out starting (exit 4, the folder left). Refused before Ray starts, naming the variable."""
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UserError, match=f"{next(iter(variables))}=.*not an absolute path"):
        check_temp_root()


@pytest.mark.parametrize("name", ["mylearner.py", "helper.py"], ids=["its-module", "a-module-beside-it"])
def test_a_check_never_writes_its_document_over_the_plugin_code_it_audits(tmp_path, monkeypatch, capsys, name):
    """I21: ``check c.toml --json mylearner.py`` (the plug-in learner the configuration names, or a module beside
    it, which its digest reads) replaced the user's source code with the check's JSON. Refused, the code as found."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    monkeypatch.setenv("TOPICAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    code = tmp_path / "code"
    code.mkdir()
    (code / "mylearner.py").write_text("from topicaudit.targets.learners.lda import VariationalLDA\n\n\n"
                                       "class Mine(VariationalLDA):\n    pass\n")
    (code / "helper.py").write_text("HELP = 1\n")
    monkeypatch.syspath_prepend(str(code))
    (tmp_path / "c.toml").write_text('[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\n'
                                     'learner = "mylearner:Mine"\nk = 3\n[attack]\nshadows = 0\n'
                                     '[attack.canaries]\ncount = 20\n')
    before = snapshot(code)
    assert main(["check", "c.toml", "--epsilon", "0.01", "--json", f"code/{name}"]) == 2
    assert "plug-in code" in capsys.readouterr().err
    assert snapshot(code) == before


def test_a_checks_document_is_never_put_inside_the_corpus_folder_it_reads(tmp_path, monkeypatch, capsys):
    """I23: ``check c.toml --json TX/o.json``, TX the configuration's folder of documents: the JSON became the
    corpus's 61st document, and the next check of c.toml audited it (61 documents, 59 words). Refused."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    corpus = tmp_path / "TX"
    corpus.mkdir()
    for i in range(60):
        (corpus / f"d{i}.txt").write_text(f"alpha beta gamma delta w{i % 9} v{i % 5}\n")
    (tmp_path / "c.toml").write_text('[corpus]\npath = "TX"\nformat = "folder"\n[target]\nk = 3\n[attack]\n'
                                     'shadows = 0\n[attack.canaries]\ncount = 20\n')
    before = snapshot(corpus)
    assert main(["check", "c.toml", "--epsilon", "0.01", "--junit", "TX/./o.xml", "--cache", "cache"]) == 2
    err = capsys.readouterr().err
    assert "inside the corpus" in err and "a folder this check reads" in err, err
    assert snapshot(corpus) == before


def test_a_ray_temporary_folder_that_is_a_file_is_bad_input(tmp_path, monkeypatch):
    """RY3: ``RAY_TMPDIR`` naming a file: Ray failed to start ("Not a directory"), exit 4 as a Ray failure. It is
    the user's setting: exit 2 naming it, before Ray starts."""
    (tmp_path / "thesis.tex").write_text("tex\n")
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "thesis.tex"))
    with pytest.raises(UserError, match="RAY_TMPDIR=.*thesis.tex is not a directory"):
        check_temp_root()
    assert (tmp_path / "thesis.tex").read_text() == "tex\n"


@pytest.mark.parametrize("order", ["sweep-first", "run-first"])
def test_a_sweep_and_one_of_its_runs_are_not_reported_twice(tmp_path, monkeypatch, capsys, order):
    """R14: ``report SW SW/k=3/rep-0`` reported that run twice (two cards, two figures, twice in the ledger): the
    "given twice" test compared the paths given, not the runs a sweep expands to. Refused, nothing written."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    (tmp_path / "c.toml").write_text("[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nk = 3\n[attack]\n"
                                     "shadows = 0\n[attack.canaries]\ncount = 20\n")
    assert main(["sweep", "c.toml", "--param", "target.k", "--values", "2,3", "--output", "SW"]) == 0
    capsys.readouterr()
    paths = ["SW", "SW/k=3/rep-0"] if order == "sweep-first" else ["SW/k=3/rep-0", "SW"]
    assert main(["report", *paths, "-o", "rep"]) == 2
    assert "given twice" in capsys.readouterr().err and not (tmp_path / "rep").exists()


def test_matplotlibs_temporary_config_folder_is_not_left_behind(run_dir, tmp_path):
    """MPL3, MPL4: with no writable config folder, matplotlib makes ``$TMPDIR/matplotlib-XXXXXXXX`` and removes it
    with ``atexit``, which the command's ``os._exit`` never ran: every report left one in the temporary folder."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    (tmp_path / "notes.txt").write_text("mine\n")
    env = {**os.environ, "TMPDIR": str(temporary), "MPLCONFIGDIR": str(tmp_path / "notes.txt"),
           "TOPICAUDIT_INTEGRITY_KEY": "off"}
    done = subprocess.run([str(Path(sys.executable).parent / "topicaudit"), "report", "RUN", "-o", "rep"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    # The case this is about: since hostile pass XIX-q matplotlib is given topicaudit's own temporary folder where it
    # would make one itself (its own went through TMPDIR's link), so it no longer says it made one.
    assert "Matplotlib created a temporary" not in done.stderr
    assert list(temporary.iterdir()) == [] and (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("how", ["bad-corpus", "nothing-at-the-address"])
def test_a_new_sweep_refused_before_any_run_finished_leaves_nothing(tmp_path, monkeypatch, capsys, how, own_ray):
    """S21, S22 (critical): a new sweep refused at its start — exit 2, "nothing left behind" — left ``P/sw`` and
    its sweep.json in the user's folder P (P's times changed): the index was written before the first run (a bad
    corpus) or before Ray's start (nothing listening at --ray-address), and kept."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "bad.json").write_text('{"nottext": []}')
    corpus = '[corpus]\npath = "bad.json"\npreprocess = false\n' if how == "bad-corpus" else \
        "[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n"
    (tmp_path / "c.toml").write_text(corpus + "[target]\nk = 3\n[attack]\nshadows = 0\n[attack.canaries]\n"
                                     "count = 20\n")
    users = tmp_path / "P"
    users.mkdir()
    (users / "notes.txt").write_text("mine\n")
    for path in (users / "notes.txt", users):
        os.utime(path, (1577836800, 1577836800))
    before = snapshot(users)
    args = ["--param", "target.k", "--values", "2,3"] if how == "bad-corpus" else \
        ["--param", "attack.shadows", "--values", "0,2", "--ray-address", "127.0.0.1:1"]
    assert main(["sweep", "c.toml", *args, "--output", "P/sw"]) == 2
    capsys.readouterr()
    assert snapshot(users) == before
