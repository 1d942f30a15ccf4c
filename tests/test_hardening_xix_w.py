"""Hostile pass XIX-w (tests/hostile_xix_w_cases.md): the critical defects it found, each fixed with its test."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from linked_cache import planted_by_another_user, untouched_since_2020

SMALL = {"synthetic": {"n_docs": 120, "n_words": 300, "mean_length": 30}, "target": {"k": 3},
         "attack": {"shadows": 0, "canaries": {"count": 20}}}


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory):
    """A small canary-only run (no Ray): ε = 0.01 is refuted by it."""
    import topicaudit

    out = tmp_path_factory.mktemp("xix-w") / "run"
    topicaudit.run({**SMALL, "output": str(out)}, quiet=True)
    return out


@pytest.mark.skipif(not os.path.exists("/proc/sys/fs/pipe-max-size"), reason="sizes a pipe as Linux does")
def test_the_verdict_line_reaches_a_full_nonblocking_unbuffered_stdout(canary_run):
    """NB1: `check RUN --epsilon 0.01` with PYTHONUNBUFFERED=1 and stdout a non-blocking pipe already full: Python's
    unbuffered writer took EAGAIN as "nothing written" and print() returned, so the command exited 1 with no
    VIOLATED line anywhere and no note (check.json said VIOLATED). The line must reach the reader once it reads."""
    fcntl = pytest.importorskip("fcntl")
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    os.set_blocking(write_end, False)
    os.write(write_end, b"x" * 4096)  # full: every write now fails with EAGAIN until the reader starts
    received = bytearray()

    def reader():  # starts once the verdict is recorded (it is printed right after), so the print meets a full pipe
        deadline = time.monotonic() + 120
        while not (canary_run / "check.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        while chunk := os.read(read_end, 65536):
            received.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    done = subprocess.run([sys.executable, "-m", "topicaudit.cli.main", "check", str(canary_run), "--epsilon",
                           "0.01", "--quiet"], stdout=write_end, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", "TOPICAUDIT_INTEGRITY_KEY": "off"})
    os.close(write_end)
    thread.join()
    os.close(read_end)
    printed = received[4096:].decode()
    assert done.returncode == 1, done.stderr
    assert "VIOLATED" in printed, done.stderr


ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_tempfile_never_chooses_a_tmpdir_absent_at_the_check_and_planted_after_it(tmp_path, monkeypatch):
    """FL2 (critical (c)): ``TMPDIR=T/F``, F absent when the command looked and another user's link to V when
    tempfile first chose (nobody flipping F): nltk's ``gettempdir()`` made and removed its test file in V."""
    import tempfile

    from topicaudit.folder_anchors import command_scope
    shared, mine = planted_by_another_user(tmp_path)
    for variable in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("TMPDIR", str(shared / "F"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with command_scope():
        (shared / "F").symlink_to(mine)  # planted between the command's look and tempfile's first choice
        os.lchown(shared / "F", 65534, 65534)
        inner = tempfile.gettempdir()
    assert Path(inner) != shared / "F"
    assert untouched_since_2020(mine)


LAUNCHER = Path(__file__).resolve().parent.parent / "audit" / "cli" / "topicaudit"
# sh: another user's link planted after the launcher looked, before the interpreter starts; Python: a string
PLANTS_THEN_IMPORTS = """#!/bin/sh
'''true' "{python}"; [ -e "{link}" ] || {{ ln -s "{mine}" "{link}"; chown -h 65534 "{link}"; }}; exec "{python}" "$0" "$@"
' '''
import json, csv, difflib, fractions  # modules the interpreter compiles now, writing their bytecode
"""


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_the_interpreter_never_writes_bytecode_behind_a_link_planted_after_the_launcher_looked(tmp_path):
    """FL1 (critical (c)): ``PYTHONPYCACHEPREFIX=T/F topicaudit …``, F absent when the launcher looked and another
    user's link to V a moment later (nobody flipping F): the interpreter wrote the bytecode of every module it
    imported into V. The launcher is run beside an entry that plants the link itself, then imports."""
    import shutil

    shared, mine = planted_by_another_user(tmp_path)
    folder = tmp_path / "bin"
    folder.mkdir()
    shutil.copy(LAUNCHER, folder / "topicaudit")
    (folder / "topicaudit-python").write_text(PLANTS_THEN_IMPORTS.format(
        python=sys.executable, link=str(shared / "F"), mine=str(mine)))
    (folder / "topicaudit-python").chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([str(folder / "topicaudit")], env={**env, "PYTHONPYCACHEPREFIX": str(shared / "F")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert untouched_since_2020(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_numba_never_caches_behind_a_link_planted_after_the_cache_folder_was_judged(tmp_path):
    """FL3 (critical (c)): ``NUMBA_CACHE_DIR=T/F check …``, F absent when topicaudit judged it and another user's
    link to V when numba made its cache folder (nobody flipping F): numba made ``attacks_…/`` in V. The link is
    planted right after the judgement here (``planted_link`` is wrapped to plant it)."""
    shared, mine = planted_by_another_user(tmp_path)
    script = ("import os, topicaudit.folder_anchors as f\n"
              "original = f.planted_link\n"
              "def planting(path):\n"
              "    found = original(path)\n"
              "    link = os.environ['NUMBA_CACHE_DIR']\n"
              "    if not os.path.lexists(link):\n"
              "        os.symlink(os.environ['XW_MINE'], link)\n"
              "        os.lchown(link, 65534, 65534)\n"
              "    return found\n"
              "f.planted_link = planting\n"
              "from kernels import twice\n"
              "print(twice(21))\n")
    (tmp_path / "kernels.py").write_text("from topicaudit.jit import njit\n\n\n@njit(cache=True)\ndef twice(x):\n"
                                         "    return 2 * x\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(shared / "F"), "XW_MINE": str(mine)})
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
    assert untouched_since_2020(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_matplotlib_never_writes_behind_a_link_planted_after_its_folder_was_judged(tmp_path):
    """FL4 (critical (c)): ``MPLCONFIGDIR=T/F report …``, F absent when topicaudit judged it and another user's
    link to V when matplotlib made its folder (nobody flipping F): ``fontlist-v3.11.0.json`` was written into V."""
    shared, mine = planted_by_another_user(tmp_path)
    script = ("import os, topicaudit.folder_anchors as f\n"
              "import topicaudit.engine.presentation.roc_figure as r\n"
              "original = r.planted_link\n"
              "def planting(path):\n"
              "    found = original(path)\n"
              "    link = os.environ['MPLCONFIGDIR']\n"
              "    if str(path) == link and not os.path.lexists(link):  # right after F itself was judged\n"
              "        os.symlink(os.environ['XW_MINE'], link)\n"
              "        os.lchown(link, 65534, 65534)\n"
              "    return found\n"
              "r.planted_link = f.planted_link = planting\n"
              "r._no_planted_matplotlib_folders()\n"
              "import matplotlib.font_manager\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MPLCONFIGDIR": str(shared / "F"), "XW_MINE": str(mine)})
    assert done.returncode == 0, done.stderr
    assert untouched_since_2020(mine)
