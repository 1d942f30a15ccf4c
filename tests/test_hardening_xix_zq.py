"""Hostile pass XIX-zq (tests/hostile_xix_zq_cases.md): a name a fit looks for after the fit changed its import path.

Q1: a plug-in's fit put the working directory first on ``sys.path`` while it imported its kernel (``zq_kern``): from a
folder holding none, the kernel on PYTHONPATH ran (a uniform Φ, NO SIGNAL) and the run's record placed ``zq_kern``
there; a process started from a folder holding its own ``zq_kern.py`` found the name on PYTHONPATH too as it decided
(its fit had not changed its path yet), reused the NO SIGNAL, where its own fit gives VIOLATED. A fit that moves into
another folder under a relative ``sys.path`` entry (``os.chdir``, ``''`` first) is the same, and so would be a path
changed in the run before the fit (a ``check``'s learner is built before its entry is chosen too, where its change is
seen by the place: Q1b). Such a lookup is
recorded as found on a path its fit changed, which no process finds: the run is not reused. Q8: the same with the
working directory put first in (or made the whole of) the ``__path__`` of the plug-in's package, as its fit imported
``zq_pkg.kern``: a process deciding found the package's own folder alone, and the submodule was placed there (first
form) or not at all (a package of one folder)."""
from __future__ import annotations

import pytest
from script_runs import run_script

# A process that records a fit importing ZQ_NAME (moving its import path first, as sys.argv[1] says), or checks a
# record read from stdin, as a later process deciding on a reuse does.
SCRIPT = """import importlib, json, os, sys
import topicaudit
import topicaudit.loaded_code as loaded_code
from topicaudit.engine.storage import fitted_code
how = sys.argv[1]
if how == "check":
    print(json.dumps(fitted_code.changed(json.loads(sys.stdin.read()), names=False)))
    raise SystemExit
here = os.getcwd()
with loaded_code.running():
    if how == "construct":  # the learner, built in the run, puts its folder first before it is fitted
        sys.path.insert(0, os.path.join(here, "elsewhere"))
    with loaded_code.fitting():
        if how == "insert":
            sys.path.insert(0, os.path.join(here, "elsewhere"))
        elif how == "chdir":
            os.chdir("elsewhere")
        elif how in ("package", "package-only"):  # Q8: the working directory's kernels first in the package
            import zq_pkg
            zq_pkg.__path__[:0 if how == "package" else None] = [os.path.join(here, "elsewhere")]
        try:
            importlib.import_module("zq_pkg.kern" if how.startswith("package") else "zq_kern")
        finally:
            if how in ("insert", "construct"):
                sys.path.pop(0)
            os.chdir(here)
print(json.dumps(fitted_code.loaded_outside()))
"""


def _run(tmp_path, there, *args, record=None):
    return run_script(SCRIPT, tmp_path, *args, record=record, lib=there)


@pytest.mark.parametrize("how", ["insert", "chdir", "construct", "package", "package-only"])
def test_a_name_a_fit_looks_for_on_a_path_it_changed_is_never_reused(tmp_path, how):
    """Q1: the record read as unchanged by a process with the same PYTHONPATH, whose fit would have looked in its own
    working directory first; a fit that leaves its path alone is still reused (no false positive)."""
    there = tmp_path / "there"
    (there / "zq_pkg").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (there / "zq_kern.py").write_text("PATCHED = True\n")
    (there / "zq_pkg" / "__init__.py").write_text("")
    (there / "zq_pkg" / "kern.py").write_text("PATCHED = True\n")
    if how == "package-only":  # else the working directory holds no kernel: the package's ran
        (tmp_path / "elsewhere" / "kern.py").write_text("PATCHED = False\n")
    record = _run(tmp_path, there, how)
    if how.startswith("package"):  # the package's own kernel, or the working directory's: never reused
        assert "import zq_pkg.kern" in _run(tmp_path, there, "check", record=record), record
        return
    assert str(there / "zq_kern.py") in record, record
    assert "import zq_kern" in _run(tmp_path, there, "check", record=record)
    plain = _run(tmp_path, there, "plain")
    assert plain["import zq_kern"] == str(there / "zq_kern.py")
    assert _run(tmp_path, there, "check", record=plain) == []


# Q2: a process whose fit runs (or reads) a file by its path in the working directory, as sys.argv[1] says; or checks
# a record read from stdin, as a later process deciding on a reuse does.
BY_PATH = """import importlib.util, json, os, runpy, sys
import topicaudit
import topicaudit.loaded_code as loaded_code
from topicaudit.engine.storage import fitted_code
how, given = sys.argv[1], sys.argv[2:]  # read before the run: a command line read in it is recorded (XIX-zt Z15),
sys.argv[1:] = []  # and runpy reads it: the same in both processes
if how == "check":
    print(json.dumps(fitted_code.changed(json.loads(sys.stdin.read()), names=False)))
    raise SystemExit
with loaded_code.importing("__main__"):  # as the plug-in is imported, before its run (targets.plugins.load_class)
    if how == "import":
        importlib.import_module("zq_k_" + os.path.basename(os.getcwd()))
    elif how == "import-read":
        exec(open("zq_helper.py").read())
with loaded_code.running(), loaded_code.fitting():
    if how in ("spec", "beside"):
        folder = os.getcwd() if how == "spec" else given[0]
        spec = importlib.util.spec_from_file_location("zq_helper", os.path.join(folder, "zq_helper.py"))
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    elif how == "runpy":
        runpy.run_path("zq_helper.py")
    elif how == "exec":
        exec(open("zq_helper.py").read())
    elif how == "read":
        open("zq_settings.txt").read()
    elif how == "name":  # Q7: the kernel chosen by the working directory's name
        importlib.import_module("zq_k_" + os.path.basename(os.getcwd()))
    elif how == "path":
        import pathlib
        importlib.import_module("zq_k_" + pathlib.Path.cwd().name)
print(json.dumps(fitted_code.loaded_outside()))
"""


def _by_path(folder, *args, record=None):
    return run_script(BY_PATH, folder, *args, record=record)


@pytest.mark.parametrize("how", ["spec", "runpy", "exec", "read", "import-read"])
def test_a_file_a_fit_runs_by_its_path_in_the_working_directory_is_reused_only_there(tmp_path, how):
    """Q2: the helper in a, unchanged, read as unchanged by a process started in b, whose fit would run b's helper
    (or none): the run is reused from a alone; a helper run by a path outside the working directory is reused from
    either folder (no false positive)."""
    a, b, lib = tmp_path / "a", tmp_path / "b", tmp_path / "lib"
    for folder in (a, b, lib):
        folder.mkdir()
    for folder in (a, lib):
        (folder / "zq_helper.py").write_text("PATCHED = True\n")
        (folder / "zq_settings.txt").write_text("uniform\n")
    record = _by_path(a, how)
    assert str(a / ("zq_settings.txt" if how == "read" else "zq_helper.py")) in record, record
    assert _by_path(b, "check", record=record), record
    assert _by_path(a, "check", record=record) == []
    beside = _by_path(a, "beside", str(lib))
    assert str(lib / "zq_helper.py") in beside, beside
    assert _by_path(b, "check", record=beside) == []


@pytest.mark.parametrize("how", ["name", "path", "import"])
def test_a_fit_choosing_its_code_by_the_working_directory_is_reused_only_there(tmp_path, how):
    """Q7: the kernel named after the working directory (``zq_k_a`` from a, found on PYTHONPATH and unchanged) read as
    in place by a process started in b, whose fit would import ``zq_k_b``: reused from a alone. So too when the name
    is chosen as the plug-in is imported, before the run (``import``)."""
    a, b, lib = tmp_path / "a", tmp_path / "b", tmp_path / "lib"
    for folder in (a, b, lib):
        folder.mkdir()
    (lib / "zq_k_a.py").write_text("PATCHED = True\n")
    (lib / "zq_k_b.py").write_text("")
    record = _by_path(a, how)
    assert record["import zq_k_a" if how != "import" else "module zq_k_a"] == str(lib / "zq_k_a.py"), record
    assert _by_path(b, "check", record=record) == ["working directory"]
    assert _by_path(a, "check", record=record) == []
