"""Hostile pass XIX-zn (tests/hostile_xix_zn_cases.md): start-up code whose behaviour is not its files'. A
sitecustomize.py unchanged throughout ran the text of an environment variable, chose by a variable or by a file's
existence whether to replace the built-in learner's ``fit``, or wrapped ``importlib.import_module`` to do so; the
start's key (its files) was the same with and without the patch, so a run fitted with it was reused without it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from test_hardening_xix_zh import _check  # noqa: E402 - the zh pass's `check` runner

ASK = ("import sys, warnings\nwarnings.simplefilter('always')\n"
       "from topicaudit.engine.storage import startup_code\n"
       "open(sys.argv[1], 'w').write(repr(sorted(startup_code.startup_code().items())))\n")

STUB = """
import numpy as np
def _uniform(self, X, seed, *args, **kwargs):
    phi = np.ones((self.k, X.shape[1]), np.float32)
    return phi / phi.sum(axis=1, keepdims=True)
"""
# E2, E8: the text of an environment variable run at start (it patches numpy's or importlib's functions, or nothing)
FROM_ENVIRONMENT = "import importlib, os\nimport numpy\nexec(os.environ.get('ZN_CODE', ''), {})\n"
PATCH = STUB + ("import importlib\n_orig = importlib.import_module\n"
                "def import_module(name, package=None):\n"
                "    m = _orig(name, package)\n"
                "    if hasattr(m, 'VariationalLDA'):\n"
                "        m.VariationalLDA.fit = _uniform\n"
                "    return m\n"
                "importlib.import_module = import_module\n")
# E3: a variable read at start chooses (here only a value kept: what it chooses is the start's own business)
CHOOSES = "import os\nCHOICE = os.environ.get('ZN_STUB') == '1'\n"
# E4, E5, E9: the patch in the start-up file, applied as a file's existence (or a variable read later) chooses
WRAPS = STUB + ("import importlib, os\n_orig = importlib.import_module\n"
                "def import_module(name, package=None):\n"
                "    m = _orig(name, package)\n"
                "    if hasattr(m, 'VariationalLDA') and os.path.exists(os.environ.get('ZN_FLAG', '/nonexistent')):\n"
                "        m.VariationalLDA.fit = _uniform\n"
                "    return m\n"
                "importlib.import_module = import_module\n")
IMPORTS_TOPICAUDIT = STUB + ("import os\nimport topicaudit.targets.learners.lda as m\n"
                             "if os.environ.get('ZN_STUB') == '1':\n    m.VariationalLDA.fit = _uniform\n")
# what a start may do that changes no code: generated classes, a library imported, a variable read
ORDINARY = ("import collections, dataclasses, os\nimport numpy\nPoint = collections.namedtuple('Point', 'x y')\n"
            "@dataclasses.dataclass\nclass Box:\n    size: int = 0\nLEVEL = os.environ.get('ZN_LEVEL', 'info')\n")


def _key(tmp_path, start: str, folder: str = "shim", **variables) -> tuple[list, str]:
    shim = tmp_path / folder
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(start)
    others = os.environ.get("PYTHONPATH")
    env = {**os.environ, **variables, "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(shim), *filter(None, [others])])}
    answer = tmp_path / "answer"
    done = subprocess.run([sys.executable, "-c", ASK, str(answer)], env=env, cwd=tmp_path, timeout=300,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True)
    return eval(answer.read_text()), done.stderr  # noqa: S307 - our own repr of a list of str pairs


def test_text_or_variables_start_up_code_runs_or_reads_are_in_the_key(tmp_path):
    """E2, E8: the same sitecustomize.py gave one key whether $ZN_CODE replaced ``importlib.import_module`` (the
    learner's ``fit`` then a stub) or held ``x = 1``; E3: whatever a variable it read chose."""
    patched, _ = _key(tmp_path, FROM_ENVIRONMENT, ZN_CODE=PATCH)
    harmless, _ = _key(tmp_path, FROM_ENVIRONMENT, ZN_CODE="x = 1")
    assert patched and harmless and patched != harmless
    assert _key(tmp_path, FROM_ENVIRONMENT, ZN_CODE="x = 1")[0] == harmless  # the same text: the same key
    on, off = _key(tmp_path, CHOOSES, ZN_STUB="1")[0], _key(tmp_path, CHOOSES, ZN_STUB="0")[0]
    assert on and off and on != off


@pytest.mark.parametrize("start, folder", [(WRAPS, "shim"), (IMPORTS_TOPICAUDIT, "shim"), (WRAPS, "site-packages")],
                         ids=["library-function-replaced", "topicaudit-function-replaced", "in-a-site-packages-folder"])
def test_a_start_that_replaces_a_library_or_topicaudit_function_keys_no_run(tmp_path, start, folder):
    """E4, E5, E9: the patch in the start-up file itself, applied when a flag file exists (or a variable the fit reads
    says so): nothing the key holds differs, so such a start keys no run (as one that leaves an import hook). E22: the
    fix's first version took a start-up file in any folder named site-packages for an installed library's."""
    found, warned = _key(tmp_path, start, folder, ZN_FLAG=str(tmp_path / "flag"), ZN_STUB="1")
    assert found == [], warned
    assert "no run is reused from the run cache" in warned and "by start-up code" in warned
    if start is IMPORTS_TOPICAUDIT:  # the same start, replacing nothing: keyed (tests/test_hardening_xix_zg.py)
        assert _key(tmp_path, start, folder, ZN_STUB="0")[0]


def test_an_ordinary_start_is_keyed_the_same_each_time(tmp_path):
    """Not a false positive: namedtuple and dataclass code, numpy's compiled functions and a variable read keep a
    start keyed, by the same key each time, and another value of the variable is another key."""
    first, warned = _key(tmp_path, ORDINARY)
    assert first and "no run is reused" not in warned, warned
    assert _key(tmp_path, ORDINARY)[0] == first
    assert _key(tmp_path, ORDINARY, ZN_LEVEL="debug")[0] != first


def test_a_start_that_ran_a_variables_text_is_not_reused_without_it(tmp_path):
    """E8 end to end: `check` with $ZN_CODE wrapping ``importlib.import_module`` (NO SIGNAL), then with ``x = 1`` on
    the same cache printed "reusing …" and NO SIGNAL, exit 0; a fresh cache gives VIOLATED."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(FROM_ENVIRONMENT)
    environment = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off", "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))}
    seen = []
    for text in (PATCH, "x = 1", "x = 1"):
        done = _check(tmp_path, {**environment, "ZN_CODE": text}, tmp_path / "cache")
        assert done.returncode in (0, 1), done.stderr[-3000:]
        seen.append((done.returncode, done.stdout.split(":")[0], "reusing" in done.stderr))
    assert seen == [(0, "NO SIGNAL", False), (1, "VIOLATED", False), (1, "VIOLATED", True)], seen
