"""Hostile pass XIX-zo (tests/hostile_xix_zo_cases.md): a start-up file, unchanged throughout, that put its own
function in the built-in learner's place when a flag file existed, hidden where the start-up probe did not look:
behind a ``property``, behind ``functools.singledispatch`` (the standard library's wrapper function) or
``functools.lru_cache`` (zn's O5), or behind the module's own class (``module.__class__ = Sub``). The key (the start's
files) was the same with and without the patch, and a run fitted with the stub was reused without it.

V9, V22: a module a library imports only during the fit (numba's ``cffi`` while it compiles), found first on
PYTHONPATH or in the working directory, was recorded by its content alone; a process that would find another file, or
none, reused the run (and the reverse: a run whose fit found nothing was reused where the name is found)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from test_hardening_xix_zn import STUB, _key  # noqa: E402 - the zn pass's probe runner

HEAD = STUB + "import functools, os, types\nimport topicaudit.targets.learners.lda as _m\n" \
              "ON = os.path.exists(os.environ.get('ZN_FLAG', '/nonexistent'))\n"
STARTS = {
    "property": HEAD + "if ON: _m.VariationalLDA.fit = property(lambda self: functools.partial(_uniform, self))\n",
    "singledispatch": HEAD + "if ON: _m.VariationalLDA.fit = functools.singledispatch(_uniform)\n",
    "lru_cache": HEAD + "if ON: _m.VariationalLDA.fit = functools.lru_cache(_uniform)\n",
    "module-class": HEAD + ("_Real = _m.VariationalLDA\n"
                            "class _Stub(_Real):\n    fit = _uniform\n"
                            "class _Module(types.ModuleType):\n"
                            "    def __getattribute__(self, name):\n"
                            "        return _Stub if name == 'VariationalLDA' else super().__getattribute__(name)\n"
                            "if ON: _m.__class__ = _Module\n"),
}

import importlib  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from topicaudit.engine.execution.tasks import fit_release  # noqa: E402
from topicaudit.targets.base import Release  # noqa: E402


@pytest.mark.parametrize("name", list(STARTS))
def test_a_start_that_hides_its_function_in_a_library_keys_no_run(tmp_path, name):
    """V1 (property), V2 (singledispatch), O5 (lru_cache), V5 (the module's class): with the flag, no run is keyed;
    without it (the same file replacing nothing), the start is keyed."""
    flag = tmp_path / "flag"
    flag.write_text("")
    found, warned = _key(tmp_path, STARTS[name], ZN_FLAG=str(flag))
    assert found == [], warned
    assert "no run is reused from the run cache" in warned and "by start-up code" in warned
    flag.unlink()
    found, warned = _key(tmp_path, STARTS[name], ZN_FLAG=str(flag))
    assert found and "no run is reused" not in warned, warned


# A process that records (``record``: a fit importing two names, by an import statement and by
# ``importlib.import_module``, each maybe absent) or checks a record read from stdin, as a later process reusing a run.
NAMES = """import importlib, json, sys
import topicaudit
from topicaudit.loaded_code import fitting
from topicaudit.engine.storage import fitted_code
if sys.argv[1] == "record":
    with fitting():
        try:
            import zo_statement
        except ImportError:
            pass
        try:
            importlib.import_module("zo_by_name")
        except ImportError:
            pass
    print(json.dumps(fitted_code.loaded_outside()))
else:
    print(json.dumps(fitted_code.changed(json.loads(sys.stdin.read()), names=False)))
"""


def _names(tmp_path, folder, action, record=None):
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder),
                                                                               os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", NAMES, action], env=environment, cwd=tmp_path, text=True,
                          input=json.dumps(record), capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_module_the_fit_imported_counts_by_where_a_process_finds_it(tmp_path):
    """V9 (PYTHONPATH), V22 (the working directory, the same for ``import``): a record made where the fit's lazy
    imports were found in one folder is changed code where they are not (and the reverse); where they are found
    the same, it is not."""
    there, empty = tmp_path / "there", tmp_path / "empty"
    there.mkdir()
    empty.mkdir()
    for name in ("zo_statement", "zo_by_name"):
        (there / f"{name}.py").write_text("VALUE = 1\n")
    found_there, found_empty = _names(tmp_path, there, "record"), _names(tmp_path, empty, "record")
    for changed in (_names(tmp_path, empty, "check", found_there), _names(tmp_path, there, "check", found_empty)):
        assert any("zo_statement" in entry for entry in changed), changed
        assert any("zo_by_name" in entry for entry in changed), changed
    assert _names(tmp_path, there, "check", found_there) == []
    assert _names(tmp_path, empty, "check", found_empty) == []


class _Importing:
    """A target whose fit imports a module no other code imports (a Ray worker's own lazy import)."""

    def fit(self, X, seed, vocabulary=None):
        importlib.import_module("zo_fit_only")
        n = X.shape[1]
        return Release(phi=np.full((2, n), 1 / n, np.float32), vocabulary=np.arange(n))


def test_a_fit_returns_where_its_process_found_the_names_it_imported(tmp_path, monkeypatch):
    """A fit in a Ray worker: the driver never imports what the worker's fit did, so the task returns the worker's
    record with the model (saved with it, and in results.json's ``target.loaded_code``)."""
    (tmp_path / "zo_fit_only.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = fit_release(_Importing(), sp.csr_matrix(np.ones((3, 4))), np.arange(3), 0, None, in_ray=False)
    loaded = result[-1]
    assert loaded["import zo_fit_only"] == str(tmp_path / "zo_fit_only.py")
    assert loaded[str(tmp_path / "zo_fit_only.py")]


# A plug-in learner whose fit takes a faster path when a module is found (the LDA, or a uniform Φ from zo_speedup).
PLUGIN = """from topicaudit.targets.learners.lda import VariationalLDA

class Learner(VariationalLDA):
    def fit(self, X, seed):
        try:
            import zo_speedup
        except ImportError:
            return super().fit(X, seed)
        return zo_speedup.phi(self.k, X.shape[1])
"""
SPEEDUP = "import numpy as np\ndef phi(k, n):\n    return np.full((k, n), 1.0 / n, np.float32)\n"


@pytest.mark.parametrize("first", ["found", "absent"])
def test_a_ray_workers_lazy_import_found_elsewhere_is_not_reused(tmp_path, first):
    """The fits in Ray workers only (``TOPICAUDIT_DRIVER_FITS=0``): a run whose workers' fit found ``zo_speedup``
    (uniform Φ, NO SIGNAL) is not reused where it is not found (VIOLATED), nor the reverse."""
    plugin, speedup = tmp_path / "plugin", tmp_path / "speedup"
    plugin.mkdir()
    speedup.mkdir()
    (plugin / "zo_plugin.py").write_text(PLUGIN)
    (speedup / "zo_speedup.py").write_text(SPEEDUP)
    config = tmp_path / "audit.toml"
    config.write_text('[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nk = 3\nvocabulary = "all"\n'
                      'learner = "zo_plugin:Learner"\n[attack]\nshadows = 2\n[attack.canaries]\ncount = 60\n')
    verdicts = {"found": "NO SIGNAL", "absent": "VIOLATED"}
    for where in (first, *(set(verdicts) - {first})):
        path = [str(plugin), *([str(speedup)] if where == "found" else []), os.environ.get("PYTHONPATH")]
        environment = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off", "TOPICAUDIT_DRIVER_FITS": "0",
                       "PYTHONPATH": os.pathsep.join(filter(None, path))}
        done = subprocess.run([sys.executable, "-m", "topicaudit", "check", str(config), "--epsilon", "0.01",
                               "--cache", str(tmp_path / "cache")], env=environment, capture_output=True, text=True,
                              cwd=tmp_path, timeout=900)
        assert "reusing" not in done.stderr, done.stderr
        assert done.stdout.startswith(verdicts[where]), (where, done.stdout, done.stderr[-2000:])
