"""Hostile pass XIX, helper q (tests/hostile_xix_q_cases.md): a second closing pass.

- A library's own cache folder named by its own variable, through another user's link in a shared sticky folder
  (``/tmp/L`` → a folder of the user's): ``NUMBA_CACHE_DIR=/tmp/L`` had numba write topicaudit's kernels there
  (``jit``), and ``MPLCONFIGDIR=/tmp/L`` had matplotlib write its font list there (``roc_figure``). The folders
  those libraries choose by default were held to the rule already; the folders the variables name were not.
- ``MPLCONFIGDIR`` naming a file (so matplotlib makes a temporary folder of its own) with ``TMPDIR=/tmp/L``: matplotlib
  made and removed its folder in the user's folder L named (``roc_figure._falls_back``).
- ``HOME`` through such a link: a local Ray instance made ``~/.ray/auth_token`` there
  (``ray_local.check_token_folder``).
- A learner's Φ returned as ``numpy.matrix`` or a masked array was an internal error (non-critical).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from linked_cache import planted_by_another_user, untouched_since_2020

from topicaudit.targets.learners.pipeline import released_phi

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

KERNEL = """
from topicaudit.jit import njit


@njit(cache=True)
def plus_one(x):
    return x + 1


print(plus_one(1))
"""


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_numba_cache_dir_through_another_users_link_caches_nothing(tmp_path):
    """NC1 (critical (c)): ``NUMBA_CACHE_DIR`` naming another user's link wrote the kernels behind it."""
    shared, mine = planted_by_another_user(tmp_path)
    (tmp_path / "xix_q_kernel.py").write_text(KERNEL)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(shared / "L"), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", "import xix_q_kernel"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
    assert untouched_since_2020(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_mplconfigdir_through_another_users_link_is_replaced_by_a_temporary_folder(tmp_path):
    """MC1 (critical (c)): ``MPLCONFIGDIR`` naming another user's link got matplotlib's font list behind it; it now
    gets a temporary folder of its own, as the default folders behind such a link do."""
    shared, mine = planted_by_another_user(tmp_path)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "MPLCONFIGDIR": str(shared / "L"), "TMPDIR": str(temporary)}
    made = subprocess.run([sys.executable, "-c", "import os; from topicaudit.engine.presentation.roc_figure import "
                           "new_figure; new_figure(2, 2); print(os.environ['MPLCONFIGDIR'])"],
                          env=env, capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert made.startswith(str(temporary))
    assert untouched_since_2020(mine)
    assert os.listdir(temporary) == []  # removed at exit


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_matplotlibs_own_fallback_never_goes_through_another_users_link(tmp_path):
    """MC2 (critical (c)): with ``MPLCONFIGDIR`` a file, matplotlib made ``$TMPDIR/matplotlib-…`` itself, and with
    ``TMPDIR`` another user's link that folder was made (and removed) in the user's folder; it gets topicaudit's
    own temporary folder instead."""
    shared, mine = planted_by_another_user(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    env = {**os.environ, "MPLCONFIGDIR": str(notes), "TMPDIR": str(shared / "L")}
    made = subprocess.run([sys.executable, "-c", "import os; from topicaudit.engine.presentation.roc_figure import "
                           "new_figure; new_figure(2, 2); print(os.environ['MPLCONFIGDIR'])"],
                          env=env, capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert made != str(notes) and not made.startswith(str(shared))
    assert untouched_since_2020(mine) and notes.read_text() == "mine"


CONFIG = "[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nlearner = \"lda\"\nk = 3\n[attack]\nshadows = 2\n"


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_a_local_ray_never_makes_its_token_through_another_users_link(tmp_path):
    """RT1 (critical (c)): with ``HOME`` another user's link to a folder of the user's, ``run --shadows 2`` had Ray
    write ``.ray/auth_token`` into that folder; the local start is refused, naming the link, nothing written."""
    shared, mine = planted_by_another_user(tmp_path)
    (tmp_path / "c.toml").write_text(CONFIG)
    ray = tempfile.mkdtemp(prefix="rt1-", dir="/tmp")  # short: Ray's socket paths are limited to 107 bytes
    env = {**os.environ, "HOME": str(shared / "L"), "RAY_TMPDIR": ray,
           "TOPICAUDIT_INTEGRITY_KEY": "off", "TOPICAUDIT_CACHE_DIR": "off"}
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE", "RAY_ADDRESS"):
        env.pop(name, None)
    done = subprocess.run([str(Path(sys.executable).parent / "topicaudit"), "run", "c.toml", "--output", "out",
                           "--quiet"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    shutil.rmtree(ray, ignore_errors=True)
    assert untouched_since_2020(mine), done.stderr
    assert done.returncode == 2, done.stderr
    assert str(shared / "L") in done.stderr and "auth_token" in done.stderr
    assert untouched_since_2020(mine) and not (tmp_path / "out").exists()


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # numpy.matrix itself
@pytest.mark.parametrize("kind", ["matrix", "masked"])
def test_a_phi_of_an_ndarray_subclass_is_refused_naming_the_learner(kind):
    """PM1, PM2 (non-critical): a fit returning ``numpy.matrix`` or a masked array ended in an internal error (exit
    3, ``min() got an unexpected keyword argument 'initial'``); it is the learner's Φ refused (ValueError, exit 2)."""
    phi = np.full((2, 4), 0.25, dtype=np.float32)
    made = np.asmatrix(phi) if kind == "matrix" else np.ma.masked_array(phi, mask=np.zeros(phi.shape, bool))
    with pytest.raises(ValueError, match="not a plain numpy array"):
        released_phi(made, 2, 4)
    assert released_phi(phi, 2, 4) is phi
