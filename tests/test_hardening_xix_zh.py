"""Hostile pass XIX-zh (tests/hostile_xix_zh_cases.md): code a start leaves behind (a profile function, a planted
finder, a thread, a wrapper over the import system) imports more code during the fit, from outside every digest of
the cache key; a run fitted with one content of that code is never reused for another."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from topicaudit.engine.storage import fitted_code
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.targets.base import Release

# The fit's module is found here when the start-up code imports it: ci_patches replaces the built-in learner's fit
# by a uniform Φ ("on") or does nothing ("off").
PATCHES = {
    "on": "import numpy as np\n"
          "def uniform(self, X, seed, *args, **kwargs):\n"
          "    phi = np.ones((self.k, X.shape[1]), np.float32)\n"
          "    return phi / phi.sum(axis=1, keepdims=True)\n"
          "def apply(module):\n"
          "    module.VariationalLDA.fit = uniform\n",
    "off": "def apply(module):\n    pass\n",
}

LATER = """
import sys
def _maybe():
    module = sys.modules.get("topicaudit.targets.learners.lda")
    if module is None or getattr(module, "_ci", False) or not hasattr(module, "VariationalLDA"):
        return False
    module._ci = True
    sys.path.insert(0, {patches!r})
    import ci_patches
    ci_patches.apply(module)
    return True
"""

# T2: a profile function (as a CI's call tracer leaves one); T6: a wrapper over the import system's own function.
PROFILER = LATER + """
def _profile(frame, event, arg):
    if event == "call" and _maybe():
        sys.setprofile(None)
sys.setprofile(_profile)
"""
IMPORT_WRAPPER = LATER + """
import _frozen_importlib
_original = _frozen_importlib._find_and_load
def _find_and_load(name, import_):
    module = _original(name, import_)
    _maybe()
    return module
_frozen_importlib._find_and_load = _find_and_load
"""

# T10: the patch's text, read from a file that is no module (exec(open(...).read())), run once the learner's module
# is loaded (first by a profile function; a wrapper over the import system since a profile function keys no run).
TEXT_RUNNER = """
import sys, _frozen_importlib
_original = _frozen_importlib._find_and_load
def _find_and_load(name, import_):
    loaded = _original(name, import_)
    module = sys.modules.get("topicaudit.targets.learners.lda")
    if module is not None and hasattr(module, "VariationalLDA") and not getattr(module, "_ci", 0):
        module._ci = True
        found = {{"__name__": "ci_shim"}}
        exec(open({patches!r} + "/ci_patches.py").read(), found)
        found["apply"](module)
    return loaded
_frozen_importlib._find_and_load = _find_and_load
"""


def _started(tmp_path, start):
    """The folder of the patches, and an environment whose Python starts with ``start`` as its sitecustomize.py."""
    patches, shim = tmp_path / "patches", tmp_path / "shim"
    patches.mkdir()
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(start.format(patches=str(patches)))
    return patches, {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off", "PYTHONDONTWRITEBYTECODE": "1",
                     "PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))}


def _check(tmp_path, environment, cache):
    config = tmp_path / "audit.toml"
    config.write_text('[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nk = 3\nvocabulary = "all"\n'
                      "[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    command = [sys.executable, "-m", "topicaudit", "check", str(config), "--epsilon", "0.01", "--cache", str(cache)]
    return subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path, timeout=900)


@pytest.mark.parametrize("start", [PROFILER, IMPORT_WRAPPER, TEXT_RUNNER],
                         ids=["profile-function", "import-wrapper", "text-run"])
def test_code_start_up_code_imports_during_the_fit_is_not_reused_after_its_edit(tmp_path, start):
    """T2, T6, T10: sitecustomize.py (unchanged throughout) leaves a profile function, or a wrapper over
    ``_frozen_importlib._find_and_load``, that imports ci_patches from another folder once the built-in learner's
    module is loaded (or runs its text, T10); ci_patches replaces ``fit``. Edited to patch nothing, `check` on the same cache printed
    "reusing …" and the stub's NO SIGNAL, exit 0, where a fresh cache gives VIOLATED: ci_patches was in no digest.
    The fit's process records such files with the run, and an entry whose recorded code changed is not this code's."""
    patches, environment = _started(tmp_path, start)
    seen = []
    for patch in ("on", "off", "off", "on"):
        (patches / "ci_patches.py").write_text(PATCHES[patch])
        done = _check(tmp_path, environment, tmp_path / "cache")
        seen.append((patch, done.returncode, done.stdout.split(":")[0], "reusing" in done.stderr))
        assert done.returncode in (0, 1), done.stderr[-3000:]
    # A start that leaves a profile function (XIX-zm) or a function of its own in the import system's place
    # (XIX-zn) now keys no run at all: each check fits afresh, the code's own verdict, none reused.
    assert seen == [("on", 0, "NO SIGNAL", False), ("off", 1, "VIOLATED", False), ("off", 1, "VIOLATED", False),
                    ("on", 0, "NO SIGNAL", False)], seen


def test_a_run_directory_whose_loaded_code_changed_is_refitted_not_rescored(tmp_path):
    """The same run directory given by --output (no cache key to follow): its results and its model were fitted by
    the code before the edit; rescoring the model under the new code kept the stub's NO SIGNAL. It is refitted."""
    patches, environment = _started(tmp_path, PROFILER)
    config = tmp_path / "audit.toml"
    config.write_text('[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nk = 3\nvocabulary = "all"\n'
                      "[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    command = [sys.executable, "-m", "topicaudit", "check", str(config), "--epsilon", "0.01",
               "--output", str(tmp_path / "run")]
    (patches / "ci_patches.py").write_text(PATCHES["on"])
    first = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert first.returncode == 0 and first.stdout.startswith("NO SIGNAL"), first.stderr[-3000:]
    recorded = json.loads((tmp_path / "run" / "results.json").read_text())["target"]["loaded_code"]
    assert str(patches / "ci_patches.py") in recorded, recorded
    (patches / "ci_patches.py").write_text(PATCHES["off"])
    second = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert second.returncode == 1 and second.stdout.startswith("VIOLATED"), (second.stdout, second.stderr[-3000:])
    assert "reusing" not in second.stderr


def test_a_saved_model_whose_code_changed_is_refitted_on_resume(tmp_path, monkeypatch):
    """T12: `check` under a start-up patch killed (-9) after the canary release's model was saved, before
    results.json; the patch edited; `check` on the same cache resumed and rescored the stub's model: NO SIGNAL, exit
    0, kept as the new code's run (a fresh cache: VIOLATED). Each model keeps the code it was fitted with, and one
    whose code changed is refitted."""
    patch = tmp_path / "ci_patches.py"
    patch.write_text(PATCHES["on"])
    monkeypatch.setattr(fitted_code, "loaded_outside", lambda *a: {str(patch): fitted_code.file_digest(patch)})
    run = RunDirectory(tmp_path / "run")
    run.models.mkdir(parents=True)
    release = Release(phi=np.full((2, 3), 1 / 3, dtype=np.float32), vocabulary=np.arange(3))
    run.save_model("canary-target", release, "abc", 1.0)
    assert run.load_model("canary-target", "abc") is not None  # the code unchanged: resumed
    patch.write_text(PATCHES["off"])
    with pytest.warns(UserWarning, match="changed since"):
        assert run.load_model("canary-target", "abc") is None
    assert not run.model_path("canary-target").exists()


def test_a_module_of_a_recorded_name_loaded_from_another_file_is_other_code(tmp_path, monkeypatch):
    """T13: one sitecustomize.py whose profile function imports ci_patches from the folder an environment variable
    names; a run with ZH_P=pon (the stub) was reused by `check` with ZH_P=poff (the real fit): NO SIGNAL where a
    fresh cache gives VIOLATED, since pon's file had not changed. A module this process loaded under a recorded
    file's name from elsewhere is other code."""
    (tmp_path / "pon").mkdir()
    (tmp_path / "poff").mkdir()
    (tmp_path / "pon" / "ci_patches.py").write_text(PATCHES["on"])
    (tmp_path / "poff" / "ci_patches.py").write_text(PATCHES["off"])
    recorded = {str(tmp_path / "pon" / "ci_patches.py"): fitted_code.file_digest(tmp_path / "pon" / "ci_patches.py")}
    assert fitted_code.changed(recorded) == []
    other = type(sys)("ci_patches")
    other.__file__ = str(tmp_path / "poff" / "ci_patches.py")
    monkeypatch.setitem(sys.modules, "ci_patches", other)
    assert fitted_code.changed(recorded) == [other.__file__]
    assert fitted_code.changed(recorded, names=False) == []
