"""Hostile pass XIX, helper t (tests/hostile_xix_t_cases.md): a closing pass on user files and exit codes.

- A *relative* ``TMPDIR`` (``TEMP``, ``TMP``) that reaches another user's link in a shared sticky folder (``cd /tmp;
  TMPDIR=L …``, L a link to a folder of the user's): Python's ``tempfile`` makes it absolute against the working
  directory and tests it by making and removing a file there, and pytest makes its temporary folders there. XIX-r's
  guards looked at absolute values only, so nltk's path check (any pre-processed corpus) changed the user's folder,
  and the ``assert_privacy`` fixture without a cache wrote its run into it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from linked_cache import planted_by_another_user, run_on_an_empty_corpus, untouched_since_2020

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_a_relative_tmpdir_through_another_users_link_is_never_tested_by_preprocessing(tmp_path):
    """R1 (critical (c)): ``cd T; TMPDIR=L run --corpus …``: nltk's ``tempfile.gettempdir()`` made and removed a
    file in V."""
    shared, mine = planted_by_another_user(tmp_path)
    env = {**os.environ, "TMPDIR": "L", "TOPICAUDIT_INTEGRITY_KEY": "off", "TOPICAUDIT_CACHE_DIR": "off"}
    done = run_on_an_empty_corpus(tmp_path, env, shared)
    assert done.returncode == 2 and "c.json" in done.stderr, done.stderr  # every document empty: refused
    assert untouched_since_2020(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
@pytest.mark.parametrize("name", ["TMPDIR", "TEMP"])
def test_an_api_scope_gives_tempfile_a_folder_beside_a_relative_link(tmp_path, monkeypatch, name):
    """R5: the same for ``TEMP=L`` (``TMPDIR`` unset) inside an API call; after it, tempfile chooses as before."""
    from topicaudit.folder_anchors import command_scope
    shared, mine = planted_by_another_user(tmp_path)
    for variable in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv(name, "L")
    monkeypatch.chdir(shared)
    monkeypatch.setattr(tempfile, "tempdir", None)
    with command_scope():
        inner = tempfile.gettempdir()
    assert "L" not in Path(inner).parts and os.path.isabs(inner)
    assert tempfile.tempdir is None
    assert untouched_since_2020(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_the_fixtures_run_never_goes_behind_a_relative_tmpdirs_link(tmp_path, monkeypatch):
    """R7 (critical (c)): ``cd T; TMPDIR=L pytest`` with the cache off: the fixture's run was made in
    V/pytest-of-root/…/topicaudit0/run through pytest's temporary folder."""
    from topicaudit.testing import _temporary_run
    shared, mine = planted_by_another_user(tmp_path)
    own = tmp_path / "own"
    own.mkdir()
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT", raising=False)
    monkeypatch.setenv("TMPDIR", "L")
    monkeypatch.setenv("TEMP", str(own))
    monkeypatch.chdir(shared)
    monkeypatch.setattr(tempfile, "tempdir", None)

    class PytestsOwn:
        def mktemp(self, name):
            raise AssertionError("pytest's temporary folder would be made through L")

    run = _temporary_run(SimpleNamespace(getoption=lambda name, default=None: None), PytestsOwn())
    assert Path(run).parent.parent == own
    assert untouched_since_2020(mine)


LAUNCHER = Path(sys.executable).parent / "topicaudit"


@pytest.mark.skipif(not ROOT or not LAUNCHER.exists(), reason="needs root and the installed launcher")
def test_the_interpreter_writes_no_bytecode_behind_a_planted_pycache_prefix(tmp_path):
    """P1 (critical (c)): ``cd T; PYTHONPYCACHEPREFIX=L topicaudit …`` (a user's shell does not set
    PYTHONDONTWRITEBYTECODE): the interpreter wrote the bytecode of every module it imported into V, the launcher's
    check included (the user's own prefix is still written: it costs another few seconds of compiling, so it was
    tried by hand, not here)."""
    shared, mine = planted_by_another_user(tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    planted = subprocess.run([str(LAUNCHER), "--version"], env={**env, "PYTHONPYCACHEPREFIX": "L"}, cwd=shared,
                             capture_output=True, text=True, timeout=120)
    assert planted.returncode == 0 and "PYTHONPYCACHEPREFIX" in planted.stderr, planted.stderr
    assert untouched_since_2020(mine)


def test_a_local_ray_keeps_its_sessions_in_a_folder_no_other_user_can_enter(tmp_path, monkeypatch):
    """Y2 (critical (c)): Ray makes its root and every session folder writable by everyone, not sticky (/tmp/ray
    and its session_*/logs are 0777): another local user renamed a running session's ``logs`` and put a link to a
    folder of the user's in its place, and the run's Ray processes wrote some forty log files into that folder and
    made it 0777. A local instance's root is now inside a new folder of this user's alone (0700), removed after."""
    ray = pytest.importorskip("ray")
    from topicaudit.engine.execution import parallel
    from topicaudit.engine.execution.ray_local import RayCannotStart
    seen = {}

    def init(**kwargs):  # what Ray would use, then a start that fails (no Ray process is started here)
        seen["base"] = os.environ.get("RAY_TMPDIR")
        info = os.lstat(seen["base"])
        seen["mode"], seen["owner"] = info.st_mode & 0o7777, info.st_uid
        raise ValueError("not started in this test")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(RayCannotStart):
        with parallel.ray_session():
            pass
    assert Path(seen["base"]).parent == tmp_path
    assert seen["mode"] == 0o700 and seen["owner"] == os.geteuid()
    assert not os.path.exists(seen["base"]) and "RAY_TMPDIR" not in os.environ


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_the_fixtures_run_refuses_a_basetemp_behind_another_users_link(tmp_path, monkeypatch):
    """Q7 (critical (c)): ``cd T; pytest --basetemp=L/bt`` with the cache off: pytest made V/bt (and would first
    empty it, were it there) and the fixture wrote its run into it. A --basetemp is the user's choice, as --output
    is, and held to the same rule: refused, naming the link, before pytest makes anything."""
    from topicaudit.testing import _temporary_run
    shared, mine = planted_by_another_user(tmp_path)
    monkeypatch.chdir(tmp_path)  # pytest reads --basetemp against the folder it was started in, not this one

    class PytestsOwn:
        def mktemp(self, name):
            raise AssertionError("pytest's temporary folder would be made through L")

    config = SimpleNamespace(getoption=lambda name, default=None: "L/bt" if name == "basetemp" else None,
                             invocation_params=SimpleNamespace(dir=shared))
    with pytest.raises(pytest.fail.Exception, match="L"):
        _temporary_run(config, PytestsOwn())
    assert untouched_since_2020(mine)
