"""Hardening XIX, helper m (issue 32, hostile pass XIX: user files and folders). Every case it ran is in
tests/hostile_xix_m_cases.md.

Critical (a user's folder touched):
- PY1–PY4: importing a plug-in learner (``--learner mod:Class``: the command, its Ray workers, a report of its
  run) wrote ``__pycache__/mod.cpython-311.pyc`` beside the user's module, and gave the user's folder a new mtime.
  No bytecode is written while the user's code is imported or run, nor by any worker.
- ST5–ST11: an output path (``--output``, ``report -o``, ``--json``/``--junit``, ``--cache``,
  ``TOPICAUDIT_CACHE_DIR``, ``XDG_CACHE_HOME``, a sweep) through a link that another user planted in a shared sticky
  folder (``/tmp``, where ``fs.protected_symlinks`` is 0) wrote the run, report or document into the user's folder
  the link pointed at; so did the phase trace (ST13), matplotlib's font list (XL1) and numba's user-wide cache
  (NB3). Such a link is refused (or worked around), by the kernel's own rule; the user's own links are followed.
- TD3: ``TMPDIR=/nonexistent-m`` and a run with shadows: the local Ray made ``/nonexistent-m/ray`` at the root.
  Refused before Ray starts.

Not critical, fixed:
- RO3: a read-only ``TMPDIR`` was exit 4 (Ray failed to start); exit 2 naming it, before Ray starts.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.execution import ray_local
from topicaudit.errors import UserError
from topicaudit.targets.plugins import LEARNER_GROUP, load_class

from linked_cache import run_dir, snapshot  # noqa: F401 — run_dir: a fixture

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

PLUGIN = """
from topicaudit.targets.learners.lda import VariationalLDA


class Learner(VariationalLDA):
    def fit(self, X, seed):
        import xix_m_helper  # a module beside it, imported from the fit
        return super().fit(X, seed)
"""


def test_importing_a_plugin_writes_no_bytecode_beside_it(tmp_path, monkeypatch):
    """PY1 (critical): a plug-in's import left ``__pycache__`` in the user's folder; none now, and the process's
    own setting is put back after."""
    folder = tmp_path / "plug"
    folder.mkdir()
    (folder / "xix_m_plugin.py").write_text(PLUGIN)
    (folder / "xix_m_helper.py").write_text("VALUE = 1\n")
    os.utime(folder, ns=(0, 0))
    before = snapshot(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    try:
        found = load_class("xix_m_plugin:Learner", LEARNER_GROUP, "a test")
        assert found.__name__ == "Learner"
        assert sys.dont_write_bytecode is False
        assert snapshot(folder) == before and not (folder / "__pycache__").exists()
    finally:
        sys.modules.pop("xix_m_plugin", None)


def test_ray_workers_write_no_bytecode():
    """PY2 (critical): a Ray worker imports the plug-in when it unpickles the target, before any fit; its
    environment (local instance and cluster job alike) asks Python for no bytecode."""
    assert ray_local.LOCAL_ENVIRONMENT.get("PYTHONDONTWRITEBYTECODE") == "1"
    assert getattr(ray_local, "WORKER_ENVIRONMENT", {}).get("PYTHONDONTWRITEBYTECODE") == "1"


CONFIG = "[target]\nk = 2\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 20\n"


def _shared_with_planted_link(tmp_path: Path) -> tuple[Path, Path]:
    """A sticky folder writable by all (as /tmp) holding ``L``, another user's link to the user's folder V."""
    shared, users = tmp_path / "T", tmp_path / "V"
    shared.mkdir()
    shared.chmod(0o1777)
    users.mkdir()
    (users / "keep.txt").write_text("keep\n")
    (users / "c").mkdir()
    (shared / "L").symlink_to(users)
    os.lchown(shared / "L", 65534, 65534)
    return shared, users


@pytest.mark.skipif(not ROOT, reason="plants a link of another user")
@pytest.mark.parametrize("command", [
    ["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "T/L/new"],
    ["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "T/L/c"],
    ["report", "RUN", "-o", "T/L/rep"],
    ["check", "RUN", "--epsilon", "0.01", "--json", "T/L/o.json"],
    ["check", "RUN", "--epsilon", "0.01", "--junit", "T/L/o.xml"],
    ["sweep", "c.toml", "--param", "target.k", "--values", "2", "--output", "T/L/sw"],
])
def test_an_output_through_another_users_link_in_a_shared_folder_is_refused(run_dir, tmp_path, capsys, command):
    """ST5–ST10 (critical): the run, report, sweep or document was written into V through the planted link."""
    shared, users = _shared_with_planted_link(tmp_path)
    (tmp_path / "c.toml").write_text(CONFIG)
    before = snapshot(users)
    code = main(command)
    err = capsys.readouterr().err
    assert code == 2 and snapshot(users) == before
    assert f"{shared / 'L'} is a symbolic link of another user (uid 65534)" in err


@pytest.mark.skipif(not ROOT, reason="plants a link of another user")
@pytest.mark.parametrize("where", ["--cache", "TOPICAUDIT_CACHE_DIR", "XDG_CACHE_HOME"])
def test_a_cache_through_another_users_link_in_a_shared_folder_is_refused(tmp_path, monkeypatch, capsys, where):
    """ST4, ST9, ST11 (critical): a cached check wrote its run into V/c through the planted link."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    monkeypatch.delenv("TOPICAUDIT_CACHE_DIR", raising=False)
    shared, users = _shared_with_planted_link(tmp_path)
    config = tmp_path / "c.toml"
    config.write_text(CONFIG)
    before = snapshot(users)
    command = ["check", str(config), "--epsilon", "0.01"]
    if where == "--cache":
        command += ["--cache", "T/L/c"]
    else:
        monkeypatch.setenv(where, str(shared / "L" / "c"))
    assert main(command) == 2 and snapshot(users) == before
    assert "is a symbolic link of another user" in capsys.readouterr().err


@pytest.mark.skipif(not ROOT, reason="needs a second owner")
def test_the_users_own_link_in_a_shared_folder_is_still_followed(run_dir, tmp_path, capsys):
    """The rule is the kernel's: a link of this user (or of the folder's owner) is the user's choice."""
    shared, users = _shared_with_planted_link(tmp_path)
    (shared / "mine").symlink_to(users)
    assert main(["check", "RUN", "--epsilon", "0.01", "--json", "T/mine/o.json"]) == 1
    assert (users / "o.json").is_file()


@pytest.mark.skipif(not ROOT, reason="plants a link of another user")
def test_a_local_rays_folder_below_another_users_link_is_refused(tmp_path, monkeypatch):
    """Ray's temporary root ``$TMPDIR/ray`` with TMPDIR reached through the planted link: refused before Ray."""
    shared, users = _shared_with_planted_link(tmp_path)
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(shared / "L" / "c"))
    with pytest.raises(UserError, match="symbolic link of another user"):
        ray_local.check_temp_root()


@pytest.mark.parametrize("variable", ["TMPDIR", "RAY_TMPDIR"])
def test_a_local_ray_never_creates_a_missing_temporary_folder(tmp_path, monkeypatch, variable):
    """TD3 (critical): ``TMPDIR=/nonexistent-m`` (a stale setting; Python's own tempfile passes over it) and a run
    with shadows: the local Ray made ``/nonexistent-m/ray`` at the root of the file system. Refused before Ray."""
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    missing = tmp_path / "gone" / "deeper"
    monkeypatch.setenv(variable, str(missing))
    with pytest.raises(UserError, match=f"{variable}=.*does not exist"):
        ray_local.check_temp_root()
    assert not (tmp_path / "gone").exists()


@pytest.mark.skipif(not ROOT, reason="plants a link of another user")
def test_a_phase_trace_through_another_users_link_in_a_shared_folder_is_not_written(run_dir, tmp_path, monkeypatch,
                                                                                    capsys):
    """ST13 (critical, ST5's cause): ``TOPICAUDIT_PHASE_TRACE=T/L/trace.txt`` made V/trace.txt. Ignored, said."""
    shared, users = _shared_with_planted_link(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_PHASE_TRACE", str(shared / "L" / "trace.txt"))
    before = snapshot(users)
    assert main(["check", "RUN", "--epsilon", "0.01"]) == 1
    assert snapshot(users) == before
    assert "symbolic link of another user" in capsys.readouterr().err


@pytest.mark.skipif(not ROOT, reason="plants a link of another user")
def test_matplotlib_never_keeps_its_folders_behind_another_users_link(run_dir, tmp_path):
    """XL1 (critical, ST5's cause): ``XDG_CACHE_HOME`` and ``XDG_CONFIG_HOME`` through the planted link, and a
    report: matplotlib wrote ``matplotlib/fontlist-….json`` into V. It gets a temporary folder of its own, gone
    after."""
    shared, users = _shared_with_planted_link(tmp_path)
    (tmp_path / "home").mkdir()
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(shared / "L"),
           "XDG_CONFIG_HOME": str(shared / "L"), "TMPDIR": str(temporary), "TOPICAUDIT_INTEGRITY_KEY": "off"}
    env.pop("MPLCONFIGDIR", None)
    before = snapshot(users)
    done = subprocess.run([sys.executable, "-m", "topicaudit", "report", "RUN", "-o", "rep"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert snapshot(users) == before and list(temporary.iterdir()) == []


@pytest.mark.skipif(not ROOT, reason="mounts a read-only folder")
def test_a_read_only_temporary_folder_is_bad_input_before_ray_starts(tmp_path, monkeypatch):
    """RO3 (not critical): TMPDIR on a read-only file system was exit 4, "the Ray runtime failed … Read-only file
    system"; it is the user's setting, exit 2 naming the variable, before Ray starts."""
    source, mounted = tmp_path / "ro", tmp_path / "mnt"
    source.mkdir()
    mounted.mkdir()
    if subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True, capture_output=True)
        monkeypatch.delenv("RAY_TMPDIR", raising=False)
        monkeypatch.setenv("TMPDIR", str(mounted))
        with pytest.raises(UserError, match="TMPDIR=.*cannot be written"):
            ray_local.check_temp_root()
    finally:
        subprocess.run(["umount", str(mounted)], capture_output=True)


KERNEL = """
from topicaudit.jit import njit


@njit(cache=True)
def plus_one(x):
    return x + 1


print(plus_one(1))
"""


@pytest.mark.skipif(not ROOT or not Path("/usr/bin/setpriv").exists(), reason="runs as nobody, beside a third user")
def test_numbas_cache_never_goes_behind_another_users_link(tmp_path):
    """NB3 (critical, ST5's cause): a user whose package folder is not theirs (numba then caches in
    ``$XDG_CACHE_HOME/numba``), that variable through a third user's link in a shared sticky folder: numba wrote its
    kernels into the folder the link named. Nothing is cached then."""
    tmp_path.chmod(0o755)
    code = tmp_path / "code"  # root's: nobody cannot write a __pycache__ beside the module
    code.mkdir()
    (code / "xix_m_kernel.py").write_text(KERNEL)
    shared, users = tmp_path / "T", tmp_path / "NV"
    shared.mkdir()
    shared.chmod(0o1777)
    users.mkdir()
    os.chown(users, 65534, 65534)
    (shared / "L").symlink_to(users)
    os.lchown(shared / "L", 1234, 1234)
    before = snapshot(users)
    env = {**os.environ, "XDG_CACHE_HOME": str(shared / "L"), "HOME": str(users), "PYTHONPATH": str(code)}
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                           "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
                           sys.executable, "-c", "import xix_m_kernel"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
    assert snapshot(users) == before


@pytest.mark.skipif(not ROOT, reason="plants a link of another user")
def test_the_corpus_cache_note_names_the_planted_link(tmp_path, monkeypatch, capsys):
    """CC2 (not critical): the corpus cache below another user's link was skipped, but the note called the whole
    cache path "a symbolic link"; it names the link and its owner."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    shared, users = _shared_with_planted_link(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_CACHE_DIR", str(shared / "L" / "c"))
    (tmp_path / "d.json").write_text('{"text": ["apple banana cherry dog", "eagle fish grape house", '
                                     '"apple fish kite lemon", "dog eagle mango night"]}')
    before = snapshot(users)
    assert main(["run", "--corpus", "d.json", "--no-preprocess", "--k", "2", "--shadows", "0", "--canaries", "4",
                 "--output", "o", "--quiet"]) == 0
    assert snapshot(users) == before
    assert f"{shared / 'L'} is a symbolic link of another user" in capsys.readouterr().err
