"""Hostile pass XIX-zp (tests/hostile_xix_zp_cases.md): what a run imports where a file in the working directory or on
PYTHONPATH stands in, unchanged between two processes, that the run's record did not place.

Z1: Ray's optional GPU probe imports ``amdsmi`` in the driver after the cache entry is chosen, outside every fit; a
stand-in in the working directory patched topicaudit and raised ImportError (no module kept): recorded by its content
alone, and a process started elsewhere reused its NO SIGNAL. Z2: the same with a module of the standard library that
a library imports lazily during the run (``colorsys``): its ``module colorsys`` entry is compared only where the
reusing process has loaded that name, which one deciding on a reuse has not. Z3: a stand-in for ``cffi`` (imported by
numba during the fit) that takes its own folder off ``sys.path`` before failing was recorded as ``absent``, the place
the name had at the end of the run, not where it was found; so was one that puts another copy in ``sys.modules``."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import topicaudit.engine.run as run_module
import topicaudit.loaded_code as loaded_code
from topicaudit.engine.configuration.loading import config_from_dict

# A process that records (a run or a fit importing the names given, each maybe failing) or checks a record read from
# stdin, as a later process deciding on a reuse does.
SCRIPT = """import contextlib, importlib, json, sys
import topicaudit
import topicaudit.loaded_code as loaded_code
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage import fitted_code
blocks = {"fit": loaded_code.fitting, "run": getattr(loaded_code, "running", contextlib.nullcontext)}
how, names = sys.argv[1], sys.argv[2:]  # read before the run: a command line read in it is recorded (XIX-zt Z15)
with blocks.get(how, contextlib.nullcontext)():
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
if how == "check":
    print(json.dumps(fitted_code.changed(json.loads(sys.stdin.read()), names=False)))
else:
    print(json.dumps(fitted_code.loaded_outside()))
"""
# A stand-in that patches, then fails (Z1); one that hides its folder before failing (Z3); one that puts the copy
# found in the folder of ZP_OTHER in its place (Z3).
FAILING = "PATCHED = True\nraise ImportError('no such module here')\n"
HIDING = ("import os, sys\nhere = os.path.dirname(os.path.abspath(__file__))\n"
          "sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != here]\nraise ImportError('not here')\n")
SWAPPING = ("import importlib.util, os, sys\n"
            "spec = importlib.util.spec_from_file_location(__name__, os.path.join(os.environ['ZP_OTHER'], "
            "__name__ + '.py'))\nmodule = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
            "sys.modules[__name__] = module\n")


def _run(tmp_path, folder, *args, record=None, **env):
    environment = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder),
                                                                                 os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", SCRIPT, *args], env=environment, cwd=tmp_path, text=True,
                          input=json.dumps(record), capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _folders(tmp_path, **files):
    there, empty = tmp_path / "there", tmp_path / "empty"
    for folder in (there, empty):
        folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (there / f"{name}.py").write_text(text)
    return there, empty


def test_a_runs_own_imports_found_in_a_stand_in_are_placed(tmp_path):
    """Z1 (a stand-in that fails, kept in no ``sys.modules``), Z2 (a standard-library name, found first on PYTHONPATH,
    imported by the run outside a fit): a process where the names are not found there reads the record as changed;
    where they are, it does not."""
    there, empty = _folders(tmp_path, zp_probe=FAILING, colorsys="VALUE = 1\n")
    record = _run(tmp_path, there, "run", "zp_probe", "colorsys")
    assert str(there / "zp_probe.py") in record and str(there / "colorsys.py") in record, record
    changed = _run(tmp_path, empty, "check", record=record)
    assert any("zp_probe" in entry for entry in changed), changed
    assert any("colorsys" in entry for entry in changed), changed
    assert _run(tmp_path, there, "check", record=record) == []


def test_a_run_records_a_name_found_in_the_key_only_from_a_fit(tmp_path):
    """A run's import of a standard-library module is no entry (Ray puts its own psutil first on ``sys.path``, which
    a process deciding on a reuse has not done: every Ray run would be refitted); a fit's is, as in XIX-zo."""
    _, empty = _folders(tmp_path)
    assert "import colorsys" not in _run(tmp_path, empty, "run", "colorsys")
    assert _run(tmp_path, empty, "fit", "colorsys")["import colorsys"] == "a place the key holds"


def test_a_stand_in_that_hides_itself_is_placed_where_it_was_found(tmp_path):
    """Z3: a stand-in that takes its folder off ``sys.path`` before failing, or puts another copy in ``sys.modules``
    (as loaded from ZP_OTHER), is recorded where the fit found it, not where the name is by the end."""
    there, empty = _folders(tmp_path, zp_hiding=HIDING, zp_swap=SWAPPING)
    other = tmp_path / "other"
    other.mkdir()
    (other / "zp_swap.py").write_text("VALUE = 2\n")
    record = _run(tmp_path, there, "fit", "zp_swap", "zp_hiding", ZP_OTHER=str(other))  # the swap first
    assert record["import zp_hiding"] == str(there / "zp_hiding.py"), record
    assert record["import zp_swap"] == str(there / "zp_swap.py"), record
    changed = _run(tmp_path, empty, "check", record=record)
    assert "import zp_hiding" in changed, changed
    assert "import zp_swap" in _run(tmp_path, other, "check", record=record)
    # (the swapping stand-in read ZP_OTHER: the record holds it, the same here)
    assert _run(tmp_path, there, "check", record=record, ZP_OTHER=str(other)) == []


def test_execute_run_notes_the_names_its_run_imports(monkeypatch, tmp_path):
    """The run (``execute_run``, from its entry's choice to its results) is the block whose imports are noted."""
    seen = []
    monkeypatch.setattr(run_module, "_execute_run",
                        lambda config, quiet, carried: seen.append(getattr(loaded_code, "_RUNS", [0])[0]))
    config = config_from_dict({"synthetic": {"n_docs": 20, "n_words": 30}, "target": {"k": 2}})
    config.output = str(tmp_path / "run")
    with contextlib.suppress(Exception):
        run_module.execute_run(config, quiet=True, wait_for_ray=False)
    assert seen == [1]


def test_a_portion_of_a_package_of_several_folders_is_placed(tmp_path):
    """Z4: a pkgutil-style package (``extend_path`` in its ``__init__``) whose submodule the fit imports from the first
    folder on the path that has one (a portion in the working directory): recorded where it was found, changed code
    where the path finds another, unchanged where it finds the same."""
    base, there, real = (tmp_path / name / "zp_pkg" for name in ("base", "there", "real"))
    for folder in (base, there, real):
        folder.mkdir(parents=True)
    (base / "__init__.py").write_text("from pkgutil import extend_path\n__path__ = extend_path(__path__, __name__)\n")
    (there / "kern.py").write_text("VALUE = 1\n")
    (real / "kern.py").write_text("VALUE = 2\n")
    with_there = os.pathsep.join(str(folder.parent) for folder in (base, there, real))
    without = os.pathsep.join(str(folder.parent) for folder in (base, real))
    record = _run(tmp_path, with_there, "fit", "zp_pkg.kern")
    assert record["import zp_pkg.kern"] == str(there / "kern.py"), record
    assert "import zp_pkg.kern" in _run(tmp_path, without, "check", record=record)
    assert _run(tmp_path, with_there, "check", record=record) == []


def test_a_plugins_optional_import_before_the_run_is_placed(tmp_path):
    """Z5: a plug-in's optional imports as it is imported (before the run): a stand-in that fails (kept in no
    ``sys.modules``) and one that loads, both in the working directory; a process that looks for the same names where
    they are not found there reads the record as changed; one that finds them there does not, nor one that never
    looks for them (a script's or a test's own modules are not every process's)."""
    there, empty = _folders(tmp_path, zp_failing=FAILING, zp_loading="VALUE = 1\n")
    record = _run(tmp_path, there, "before", "zp_failing", "zp_loading")
    assert record["module zp_failing"] == str(there / "zp_failing.py"), record
    assert record["module zp_loading"] == str(there / "zp_loading.py"), record
    changed = _run(tmp_path, empty, "check", "zp_failing", "zp_loading", record=record)
    assert "module zp_failing" in changed and "module zp_loading" in changed, changed
    assert _run(tmp_path, there, "check", "zp_failing", "zp_loading", record=record) == []
    assert _run(tmp_path, empty, "check", record=record) == []
