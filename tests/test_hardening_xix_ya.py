"""Hostile pass XIX-ya (tests/hostile_xix_ya_cases.md): a plug-in's code that Python does not load as a module (a
shared library it opens with ctypes) is still held against its file."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

KERNEL = '''
import ctypes, pathlib
import numpy as np

_lib = ctypes.CDLL(str(pathlib.Path(__file__).with_name("libyakernel.so")))
_lib.scale.restype = ctypes.c_double


class Kernel:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        row = 1.0 + _lib.scale() * 50.0 * np.asarray(X.sum(axis=0)).ravel()
        phi = np.vstack([row] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''


def _build(folder, scale: str) -> None:
    (folder / "yakernel.c").write_text(f"double scale(void) {{ return {scale}; }}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / "libyakernel.so"), str(folder / "yakernel.c")],
                   check=True)


@pytest.mark.skipif(shutil.which("gcc") is None or sys.platform != "linux", reason="needs gcc and /proc")
def test_a_shared_library_the_plugin_opened_then_rebuilt_drops_the_digest(tmp_path, monkeypatch):
    """C1: the plug-in's kernel is a shared library beside it, opened with ctypes at import (a C kernel built in
    place); the library rebuilt (scale 0 → 1: the rebuilt learner's Φ follows the counts, VIOLATED) after the
    import. The process still runs the library it opened (dlopen keeps it), but its digest was the rebuilt file's,
    with no warning: the API's second audit (NO SIGNAL) took the rebuilt code's key, and a fresh
    `topicaudit check` of the rebuilt plug-in said 'reusing …', NO SIGNAL, exit 0, where it gives VIOLATED."""
    import importlib
    import warnings

    from topicaudit.targets import plugin_code

    site = tmp_path / "site"
    site.mkdir()
    (site / "yakernel.py").write_text(KERNEL)
    _build(site, "0.0")
    monkeypatch.syspath_prepend(str(site))
    try:
        importlib.import_module("yakernel")
        digest = plugin_code.code_digest("yakernel:Kernel")
        _build(site, "1.0")
        rebuilt = plugin_code.code_digest("yakernel:Kernel")
        assert rebuilt != digest
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            assert plugin_code.as_loaded("yakernel:Kernel", rebuilt) == {}
    finally:
        sys.modules.pop("yakernel", None)
    assert any("changed after this process imported it" in str(w.message) for w in said)


UNCHANGED = """
import json, sys, warnings
sys.path.insert(0, sys.argv[1])
import topicaudit
from topicaudit.targets import plugin_code
import yakernel
warnings.simplefilter("error")
digest = plugin_code.code_digest("yakernel:Kernel")
print(json.dumps(plugin_code.as_loaded("yakernel:Kernel", digest) == digest and "source_sha256" in digest))
"""


@pytest.mark.skipif(shutil.which("gcc") is None or sys.platform != "linux", reason="needs gcc and /proc")
def test_a_shared_library_built_before_the_process_keeps_the_digest(tmp_path):
    """C1's fix costs no reuse for a library built before the process that opened it (the common case: a build,
    then a check)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "yakernel.py").write_text(KERNEL)
    _build(site, "0.0")
    time.sleep(0.1)  # the process's start is known to a clock tick (10 ms), rounded down
    done = subprocess.run([sys.executable, "-c", UNCHANGED, str(site)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "true", done.stderr[-2000:]


EXEC_READER = '''
import os
import numpy as np

_ns = {}
with open(os.path.join(os.path.dirname(__file__), "yaexkernels.py")) as _f:
    exec(_f.read(), _ns)  # an old idiom: the kernels' text run into a namespace, compiled as "<string>"


class Ex:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        row = _ns["shape"](np.asarray(X.sum(axis=0)).ravel())
        phi = np.vstack([row] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''


def test_a_helper_whose_text_the_plugin_ran_then_edited_drops_the_digest(tmp_path, monkeypatch):
    """C2: the plug-in runs its helper's text (``exec(open(path).read(), ns)``), so no module code of that file is
    run (the code is "<string>") and the load hook had no record of it; the helper edited after the import (its Φ
    then follows the counts: VIOLATED) was not seen: the API's audit ran the old code (NO SIGNAL) under the edited
    files' key, and a fresh `topicaudit check` said 'reusing …', NO SIGNAL, exit 0."""
    import importlib
    import warnings

    from topicaudit.targets import plugin_code

    site = tmp_path / "site"
    site.mkdir()
    (site / "yaexreader.py").write_text(EXEC_READER)
    (site / "yaexkernels.py").write_text("import numpy as np\n\n\ndef shape(counts):\n    return np.ones_like(counts)\n")
    monkeypatch.syspath_prepend(str(site))
    try:
        importlib.import_module("yaexreader")
        digest = plugin_code.code_digest("yaexreader:Ex")
        assert plugin_code.as_loaded("yaexreader:Ex", digest) == digest  # nothing changed yet
        (site / "yaexkernels.py").write_text("def shape(counts):\n    return 1.0 + 50.0 * counts\n")
        edited = plugin_code.code_digest("yaexreader:Ex")
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            assert plugin_code.as_loaded("yaexreader:Ex", edited) == {}
    finally:
        sys.modules.pop("yaexreader", None)
    assert any("changed after this process imported it" in str(w.message) for w in said)


def test_the_digest_reading_a_file_is_not_a_load(tmp_path, monkeypatch):
    """C2's fix notes the code files the process opens; topicaudit's own reads (the digest) are not noted, so a
    helper beside the plug-in that nothing loaded may be edited between two audits of one process and reused."""
    import importlib

    from topicaudit.targets import plugin_code

    site = tmp_path / "site"
    site.mkdir()
    (site / "yaquiet.py").write_text("class Q:\n    pass\n")
    (site / "yaquietbeside.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(site))
    try:
        importlib.import_module("yaquiet")
        plugin_code.code_digest("yaquiet:Q")
        (site / "yaquietbeside.py").write_text("X = 2\n")
        edited = plugin_code.code_digest("yaquiet:Q")
        assert plugin_code.as_loaded("yaquiet:Q", edited) == edited
    finally:
        sys.modules.pop("yaquiet", None)


PATCHED = '''
import numpy as np


def _row(counts):
    return 1.0 + 50.0 * counts


class Leak:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        phi = np.vstack([_row(np.asarray(X.sum(axis=0)).ravel())] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    @staticmethod
    def name():
        return "leak"
'''


@pytest.mark.parametrize("how", ["method", "module function", "static method", "deleted method", "class"])
def test_a_plugin_patched_in_the_process_drops_the_digest(tmp_path, monkeypatch, how):
    """M1: a test stubs the learner's fit (``monkeypatch.setattr(Leak, "fit", stub)``, ``mock.patch.object``) and
    audits with the shared cache: the stub's run (NO SIGNAL) was kept under the plug-in's files' key, and a fresh
    `topicaudit check` of the real, leaking learner said 'reusing …', NO SIGNAL, exit 0, where it gives VIOLATED.
    Its files are unchanged; the code that runs is not theirs."""
    import importlib
    import warnings

    from topicaudit.targets import plugin_code

    site = tmp_path / "site"
    site.mkdir()
    (site / "yapatched.py").write_text(PATCHED)
    monkeypatch.syspath_prepend(str(site))
    try:
        module = importlib.import_module("yapatched")
        digest = plugin_code.code_digest("yapatched:Leak")
        assert plugin_code.as_loaded("yapatched:Leak", digest) == digest  # as imported
        if how == "method":
            monkeypatch.setattr(module.Leak, "fit", lambda self, X, seed: np.ones((self.k, X.shape[1]), np.float32))
        elif how == "module function":
            monkeypatch.setattr(module, "_row", lambda counts: counts * 0.0 + 1.0)
        elif how == "static method":
            monkeypatch.setattr(module.Leak, "name", staticmethod(lambda: "stub"))
        elif how == "deleted method":
            monkeypatch.delattr(module.Leak, "fit")
        else:
            monkeypatch.setattr(module, "Leak", type("Leak", (), {"fit": lambda self, X, seed: None}))
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            assert plugin_code.as_loaded("yapatched:Leak", digest) == {}
    finally:
        sys.modules.pop("yapatched", None)
