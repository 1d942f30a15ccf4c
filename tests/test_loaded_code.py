"""A plug-in's module held against its file as it was loaded (topicaudit.loaded_code): any change to the file after
the import drops the digest (never a stale cache entry), and nothing the module's own code does reads as an edit.
Passes XIX-u and XIX-v found edits that comparing the loaded code with the file missed, and changes a plug-in makes
to itself (a decorator's, a filled cache) read as edits; the file's identity and times tell both apart."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
import types
import warnings

import pytest

import stale_plugin

from topicaudit import files_read, loaded_code
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_cache import cached_run_dir

LEARNER = '''
import numpy as np

import stalehelper

SCALE = float("1.0")
_FITTED = {}


def register(cls):
    cls.tag = cls.tag.upper()
    return cls


@register
class Leak:
    tag = "leak"

    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        _FITTED[seed] = True
        counts = stalehelper.shape(np.asarray(X.sum(axis=0)).ravel() * SCALE + 1.0)
        phi = np.vstack([counts] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''

HELPER = "import numpy as np\n\n\ndef shape(counts):\n    return np.ones_like(counts)\n"

SETTINGS = stale_plugin.settings("staleloaded")


@pytest.fixture
def plug_in(tmp_path, monkeypatch):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "stalehelper.py").write_text(HELPER)
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    (site / "staleloaded.py").write_text(LEARNER)
    yield site
    for name in ("staleloaded", "stalehelper"):
        sys.modules.pop(name, None)


def _entry(cache) -> tuple[str, list]:
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        entry = str(cached_run_dir(config_from_dict(SETTINGS), cache))
    return entry, [str(w.message) for w in said if "changed after this process imported it" in str(w.message)]


def test_what_the_plug_in_does_to_itself_is_no_edit(plug_in, tmp_path):
    """A decorator rewrote a class attribute, the fit filled a module-level cache: the files are as loaded, so the
    entry is the one a fresh process finds, with no warning (both were false edits: FP1 and FP2 of pass XIX-v)."""
    module = importlib.import_module("staleloaded")
    module.Leak(2).fit(__import__("scipy.sparse").sparse.csr_matrix([[1, 2]]), 0)
    entry, said = _entry(tmp_path / "cache")
    assert entry == stale_plugin.fresh_process_entry(plug_in, tmp_path / "cache", SETTINGS) and not said


@pytest.mark.parametrize("file, edit", [("staleloaded.py", ('float("1.0")', 'float("0.0")')),
                                        ("stalehelper.py", ("np.ones_like(counts)", "counts"))],
                         ids=["a value no literal holds", "a helper module beside it"])
def test_an_edit_no_code_comparison_sees_drops_the_entry(plug_in, tmp_path, file, edit):
    importlib.import_module("staleloaded")
    path = plug_in / file
    path.write_text(path.read_text().replace(*edit))
    entry, said = _entry(tmp_path / "cache")
    assert entry != stale_plugin.fresh_process_entry(plug_in, tmp_path / "cache", SETTINGS) and said


IMPORTED_FIRST = """
import json, pathlib, sys, warnings
sys.path.insert(0, sys.argv[1])
import staleloaded  # before topicaudit: no record of the load, the process's start stands in
if sys.argv[3] == "edit":
    path = pathlib.Path(sys.argv[1], "staleloaded.py")
    path.write_text(path.read_text().replace('float("1.0")', 'float("0.0")'))
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_cache import cached_run_dir
warnings.simplefilter("ignore")
print(cached_run_dir(config_from_dict(json.loads(sys.argv[2])), sys.argv[4]))
"""


@pytest.mark.parametrize("edit", [False, True], ids=["unedited", "edited"])
def test_a_plug_in_imported_before_topicaudit(plug_in, tmp_path, edit):
    """A notebook's first cell imports the plug-in, then topicaudit: no record of the load, so a file changed since
    the process started counts as edited, and one older than the process does not."""
    cache = str(tmp_path / "cache")
    time.sleep(0.05)  # the file older than the process by more than the clocks' grain (a tick)
    done = subprocess.run([sys.executable, "-c", IMPORTED_FIRST, str(plug_in), json.dumps(SETTINGS),
                           "edit" if edit else "keep", cache], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    here = done.stdout.strip().splitlines()[-1]
    assert (here != stale_plugin.fresh_process_entry(plug_in, cache, SETTINGS)) is edit


def test_a_file_removed_or_replaced_after_the_load_is_changed(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "loadedonce.py").write_text("X = 1\n")
    module = importlib.import_module("loadedonce")
    try:
        assert not loaded_code.changed_since_loaded(module)
        (tmp_path / "other.py").write_text("X = 1\n")
        os.replace(tmp_path / "other.py", tmp_path / "loadedonce.py")  # the same bytes, another file
        assert loaded_code.changed_since_loaded(module)
        os.remove(tmp_path / "loadedonce.py")
        assert loaded_code.changed_since_loaded(module)
    finally:
        sys.modules.pop("loadedonce", None)
    assert not loaded_code.changed_since_loaded(types.ModuleType("no_file"))


SELF_EDITING = '''
import pathlib

import numpy as np


class Leak:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        path = pathlib.Path(__file__)  # the file changes while the run runs (and is put back after it)
        path.write_text(path.read_text() + "# touched\\n")
        phi = np.ones((self.k, X.shape[1]))
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self):
        from topicaudit.targets.base import NO_GUARANTEE
        return NO_GUARANTEE
'''

AGAIN = """
import json, sys
sys.path.insert(0, sys.argv[1])
import topicaudit
topicaudit.run(json.loads(sys.argv[2]), quiet=False)
"""


def test_a_run_whose_plug_in_changed_while_it_ran_is_never_reused(tmp_path, monkeypatch):
    """The key is taken when the run starts; the code recorded when it finishes is held against this process's,
    so a run during which the plug-in's file changed (then was put back) is not reused as a run of that code."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "selfedit.py").write_text(SELF_EDITING)
    monkeypatch.syspath_prepend(str(site))
    settings = {**stale_plugin.settings("selfedit"), "output": str(tmp_path / "run")}
    try:
        from topicaudit import run
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(settings)
    finally:
        sys.modules.pop("selfedit", None)
    (site / "selfedit.py").write_text(SELF_EDITING)  # put back: the files are those of the run's start
    done = subprocess.run([sys.executable, "-c", AGAIN, str(site), json.dumps(settings)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert "reusing" not in done.stderr


def test_a_plug_in_whose_file_is_a_link_of_another_name(tmp_path, monkeypatch):
    """site/staleloaded.py is a link to code/real_code.py: the edit to the file it names is seen after the import."""
    (tmp_path / "code").mkdir()
    (tmp_path / "site").mkdir()
    (tmp_path / "code" / "real_code.py").write_text(LEARNER.replace("import stalehelper\n", "")
                                                    .replace("stalehelper.shape(", "("))
    (tmp_path / "site" / "staleloaded.py").symlink_to(tmp_path / "code" / "real_code.py")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    try:
        importlib.import_module("staleloaded")
        target = tmp_path / "code" / "real_code.py"
        target.write_text(target.read_text().replace('float("1.0")', 'float("0.0")'))
        entry, said = _entry(tmp_path / "cache")
        assert entry != stale_plugin.fresh_process_entry(tmp_path / "site", tmp_path / "cache", SETTINGS) and said
    finally:
        sys.modules.pop("staleloaded", None)


class _ChangedWhileCopied(dict):
    """A record another thread adds to while it is read, once (a full test run: Ray starting beside a fit)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.changes = 1

    def _changing(self):
        if self.changes:
            self.changes -= 1
            raise RuntimeError("dictionary changed size during iteration")

    def items(self):
        self._changing()
        return super().items()

    def copy(self):
        self._changing()
        return dict(self)


def test_a_record_another_thread_adds_to_while_it_is_read_is_read_again(monkeypatch):
    """``read_and_compiled`` (now ``files_read.read``) ended a run with "dictionary changed size during iteration"."""
    monkeypatch.setattr(files_read, "_READ", _ChangedWhileCopied({"/x/data.txt": {("/x/reader.py",)}}))
    monkeypatch.setattr(loaded_code, "_LOADED", _ChangedWhileCopied({"/x/module.py": [(1, 2, 3, 4, 5)]}))
    read = files_read.read()
    assert read == {"/x/data.txt": {("/x/reader.py",)}}
    assert "/x/module.py" in loaded_code.noted_files()
