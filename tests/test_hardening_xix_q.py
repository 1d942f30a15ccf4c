"""Hostile pass XIX, helper q (tests/hostile_xix_q_cases.md): a second closing pass.

- A library's own cache folder named by its own variable, through another user's link in a shared sticky folder
  (``/tmp/L`` → a folder of the user's): ``NUMBA_CACHE_DIR=/tmp/L`` had numba write topicaudit's kernels there
  (``jit``), and ``MPLCONFIGDIR=/tmp/L`` had matplotlib write its font list there (``roc_figure``). The folders
  those libraries choose by default were held to the rule already; the folders the variables name were not.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

KERNEL = """
from topicaudit.jit import njit


@njit(cache=True)
def plus_one(x):
    return x + 1


print(plus_one(1))
"""


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """T, a shared sticky folder holding L, nobody's link to V, a folder of this user's dated 2020."""
    shared, mine = tmp_path / "T", tmp_path / "V"
    shared.mkdir()
    mine.mkdir()
    shared.chmod(0o1777)
    (shared / "L").symlink_to(mine)
    os.lchown(shared / "L", 65534, 65534)
    os.utime(mine, (1577836800, 1577836800))
    return shared, mine


def _untouched(mine: Path) -> bool:
    return os.listdir(mine) == [] and os.stat(mine).st_mtime == 1577836800


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_numba_cache_dir_through_another_users_link_caches_nothing(tmp_path):
    """NC1 (critical (c)): ``NUMBA_CACHE_DIR`` naming another user's link wrote the kernels behind it."""
    shared, mine = _planted(tmp_path)
    (tmp_path / "xix_q_kernel.py").write_text(KERNEL)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(shared / "L"), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", "import xix_q_kernel"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
    assert _untouched(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_mplconfigdir_through_another_users_link_is_replaced_by_a_temporary_folder(tmp_path):
    """MC1 (critical (c)): ``MPLCONFIGDIR`` naming another user's link got matplotlib's font list behind it; it now
    gets a temporary folder of its own, as the default folders behind such a link do."""
    shared, mine = _planted(tmp_path)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "MPLCONFIGDIR": str(shared / "L"), "TMPDIR": str(temporary)}
    made = subprocess.run([sys.executable, "-c", "import os; from topicaudit.engine.presentation.roc_figure import "
                           "new_figure; new_figure(2, 2); print(os.environ['MPLCONFIGDIR'])"],
                          env=env, capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert made.startswith(str(temporary))
    assert _untouched(mine)
    assert os.listdir(temporary) == []  # removed at exit
