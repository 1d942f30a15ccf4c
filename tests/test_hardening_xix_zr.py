"""Hostile pass XIX-zr (tests/hostile_xix_zr_cases.md): a run that depends on the working directory in ways Q2 and Q7
(XIX-zq) did not note.

R1, R2: a plug-in that, as it is imported (before the run), imports a kernel named after the working directory's
folder, or reads a settings file in it: only fits and runs were watched, so a process started in another folder (whose
plug-in picks another kernel, or finds no settings) reused the run. R3: a fit testing whether a flag file exists in the
working directory (``os.path.exists``: no audit event). R4: a fit listing it (``os.listdir(".")``). R5: a fit asking
``posix.getcwd()`` (os's own function, not the wrapper). R7: a fit reading ``open(b"settings.txt")`` (a bytes path was
no file read). R8: a fit opening a settings file its folder lacks (the file was not listed, so nor was the
folder, and a folder holding it reused the run); R12: the same through a library's call (``numpy.loadtxt``), which
was the library's own ask; R14: a fit running ``ls`` (a child inherits the folder); R11: a thread the plug-in's import
started, asking between the import and the run (what the plug-in's own code asks after its import counts);
a fit testing ``/proc/self/cwd/flag``, reading that link, or reading ``PWD``. Each is now recorded as depending on the
working directory (``"working directory"``): reused from that folder only. R6: a fit naming its kernel after
``sys.path[0]`` (the working directory under ``python -m``): the record holds the import path. R13: R1 for the script
that defines the learner (``__main__:L``)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from script_runs import folders, kernels, run_script

# A process that imports the plug-in ``zr_plug`` as topicaudit does, then fits as sys.argv[1] says, and prints the
# record; or checks a record read from stdin, as a later process deciding on a reuse does.
SCRIPT = """import importlib, json, os, sys
import topicaudit
import topicaudit.loaded_code as loaded_code
from topicaudit.engine.storage import fitted_code
from topicaudit.targets.plugins import LEARNER_GROUP, load_class
how = sys.argv[1]
if how == "check":  # the plug-in reads ZR_HOW as it is imported: the same in the deciding process
    os.environ["ZR_HOW"] = sys.argv[2]
    load_class("zr_plug:L", LEARNER_GROUP, "the test")
    print(json.dumps(fitted_code.changed(json.loads(sys.stdin.read()), names=False)))
    raise SystemExit
os.environ["ZR_HOW"] = how
load_class("zr_plug:L", LEARNER_GROUP, "the test")
if how == "thread":
    import time
    time.sleep(0.6)  # the configuration read and checked, before the run
with loaded_code.running(), fitted_code.plugin_run(how == "syspath"), loaded_code.fitting():
    if how == "exists":
        os.path.exists("zr_flag")
    elif how == "listdir":
        os.listdir(".")
    elif how == "posix":
        import posix
        importlib.import_module("zr_k_" + os.path.basename(posix.getcwd()))
    elif how == "bytes":
        open(b"zr_settings.txt").read()
    elif how == "absent":
        try:
            open("zr_absent.txt").read()
        except OSError:
            pass
    elif how == "numpy":  # R12: a library's call on the fit's behalf
        import numpy
        try:
            numpy.loadtxt("zr_absent.txt")
        except OSError:
            pass
    elif how == "spawn":  # R14: another process, run in the folder, lists it
        import subprocess
        subprocess.run(["ls"], capture_output=True)
    elif how == "thread":  # R11: a thread the plug-in's import started asked between the import and the run
        plug = sys.modules["zr_plug"]
        plug.ASKER.join()
        importlib.import_module("zr_k_" + plug.FOLDER[0])
    elif how == "proc":
        os.path.exists("/proc/self/cwd/zr_flag")
    elif how == "readlink":
        importlib.import_module("zr_k_" + os.path.basename(os.readlink("/proc/self/cwd")))
    elif how == "syspath":  # R6: under python -m, sys.path[0] is the working directory
        importlib.import_module("zr_k_" + os.path.basename(sys.path[0]))
    elif how == "pwd":
        importlib.import_module("zr_k_" + os.path.basename(os.environ["PWD"]))
    elif how == "environ":  # a kernel chosen by a variable
        importlib.import_module("zr_k_" + os.environ.get("ZR_KERNEL", "b"))
    else:  # a plain fit importing a module ('' first on sys.path: the import system asks for the directory)
        importlib.import_module("zr_k_b")
    print(json.dumps(fitted_code.loaded_outside()))  # as a run records its models, inside it
"""

PLUG = """import importlib, os
from topicaudit.targets.learners.lda import VariationalLDA
HOW = os.environ.get("ZR_HOW", "")
if HOW == "import-name":
    importlib.import_module("zr_k_" + os.path.basename(os.getcwd()))
elif HOW == "import-read":
    SETTINGS = open("zr_settings.txt").read() if os.path.exists("zr_settings.txt") else ""
elif HOW == "thread":
    import threading, time
    FOLDER = []
    ASKER = threading.Thread(target=lambda: (time.sleep(0.3), FOLDER.append(os.path.basename(os.getcwd()))))
    ASKER.start()


class L(VariationalLDA):
    pass
"""


def _run(folder, *args, record=None):
    return run_script(SCRIPT, folder, *args, record=record)


@pytest.mark.parametrize("how", ["import-name", "import-read", "exists", "listdir", "posix", "bytes", "absent",
                                 "numpy", "spawn", "thread", "proc", "readlink", "pwd"])
def test_a_run_that_learns_its_working_directory_is_reused_only_there(tmp_path, how):
    """The run from a, its files unchanged, read as unchanged by a process started in b at f910ea8; now b sees the
    working directory changed and a reuses it (no false positive); a plug-in that learns nothing of it is reused from
    either folder."""
    a, b, lib = folders(tmp_path, {"lib/zr_plug.py": PLUG, "a/zr_flag": "", "a/zr_settings.txt": "uniform\n",
                                   **kernels("zr")})
    record = _run(a, how)
    expected = ["environment PWD", "working directory"] if how == "pwd" else ["working directory"]
    assert _run(b, "check", how, record=record) == expected, record
    assert _run(a, "check", how, record=record) == []
    plain = _run(a, "plain")
    assert "working directory" not in plain, plain
    assert _run(b, "check", "plain", record=plain) == []


def test_a_run_choosing_its_code_by_the_import_path_is_reused_only_with_that_path(tmp_path):
    """R6: under ``python -m`` sys.path[0] is the working directory; a fit importing a kernel named after it asks
    nothing, and was reused from b at c639fcd. The record holds the import path as code reads it (``sys.path``)."""
    a, b, lib = folders(tmp_path, {"lib/zr_plug.py": PLUG, **kernels("zr")})
    record = run_script(SCRIPT, a, "syspath", module=True)
    assert run_script(SCRIPT, b, "check", "syspath", record=record, module=True) == ["sys.path",
                                                                                     "working directory"], record
    assert run_script(SCRIPT, a, "check", "syspath", record=record, module=True) == []


def test_a_run_choosing_its_code_by_an_environment_variable_is_reused_only_with_its_value(tmp_path):
    """A fit importing a kernel named by ``ZR_KERNEL``: its files unchanged, a process with another value reused the
    run (docs/check.md listed variables as not covered). The record holds a digest of each variable code outside
    the key read (``environment NAME``); a variable only topicaudit or a library read on its own is not kept."""
    a, _, lib = folders(tmp_path, {"lib/zr_plug.py": PLUG, **kernels("zr")})
    record = run_script(SCRIPT, a, "environ", variables={"ZR_KERNEL": "a", "ZR_SECRET": "s3cret"})
    assert record["environment ZR_KERNEL"] != "a" and "s3cret" not in json.dumps(record), record
    assert "environment ZR_SECRET" not in record and "environment TOPICAUDIT_CACHE_DIR" not in record, record
    assert run_script(SCRIPT, a, "check", "environ", record=record) == ["environment ZR_KERNEL"]
    assert run_script(SCRIPT, a, "check", "environ", record=record, variables={"ZR_KERNEL": "b"}) == \
        ["environment ZR_KERNEL"]
    assert run_script(SCRIPT, a, "check", "environ", record=record, variables={"ZR_KERNEL": "a"}) == []


# R13: the script that defines the learner (``__main__:L``), loaded in the audit's new process as ``__mp_main__``.
MAIN = """import json, sys
import topicaudit
from topicaudit.engine import cached_audit
from topicaudit.engine.storage import fitted_code
how, sys.argv[1:] = sys.argv[1], sys.argv[2:]  # the rest: the calling script's own arguments
if how == "check":
    print(json.dumps(fitted_code.changed(json.loads(sys.stdin.read()), names=False)))
    raise SystemExit
cached_audit._load_script(how)
print(json.dumps(fitted_code.loaded_outside()))
"""

SCRIPT_ASKING = """import importlib, os
KERNEL = importlib.import_module("zr_k_" + os.path.basename(os.getcwd()))
"""


def _main(folder, *args, record=None):
    return run_script(MAIN, folder, *args, record=record)


def test_a_script_choosing_its_learner_s_code_by_the_working_directory_is_reused_only_there(tmp_path):
    """R13: the script's top level imports a kernel named after the folder as the new process loads it: reused from
    b at 5ae4b56; now from a alone. A script that asks nothing, lying in the working directory, is reused from b."""
    a, b, lib = folders(tmp_path, {"lib/asking.py": SCRIPT_ASKING, "a/plain.py": "import os\n", **kernels("zr")})
    record = _main(a, str(lib / "asking.py"))
    assert _main(b, "check", record=record) == ["working directory"], record
    assert _main(a, "check", record=record) == []
    plain = _main(a, str(a / "plain.py"))
    assert "working directory" not in plain, plain
    assert _main(b, "check", record=plain) == []


def test_a_script_s_arguments_are_part_of_its_learner_s_record(tmp_path):
    """XIX-zf N2: a script defining the learner, reading ``--strength 50``, had the run of ``--strength 0`` reused
    (the new process is given the caller's arguments); its record holds them now (``sys.argv``)."""
    a, _, lib = folders(tmp_path, {"lib/strong.py": "import sys\nSTRENGTH = float(sys.argv[-1])\n"})
    record = _main(a, str(lib / "strong.py"), "--strength", "50")
    assert _main(a, "check", "--strength", "0", record=record) == ["sys.argv"], record
    assert _main(a, "check", "--strength", "50", record=record) == []


def test_the_wrapped_path_tests_keep_descriptor_relative_calls():
    """The wrappers of ``os.stat``, ``lstat`` and ``access`` stand where those functions are counted as taking a
    folder's descriptor: as first merged they were not, and a process importing topicaudit first wrote its own
    folders by path (``owned_folders.BY_DESCRIPTOR`` False) and ``shutil.rmtree`` lost its guard against links."""
    done = subprocess.run([sys.executable, "-c", "import topicaudit, os, posix, shutil\n"
                           "import topicaudit.owned_folders as owned\n"
                           "sets = ('supports_dir_fd', 'supports_fd', 'supports_follow_symlinks',\n"
                           "        'supports_effective_ids')\n"
                           "same = all((getattr(os, f) in getattr(os, s)) == (getattr(posix, f) in getattr(os, s))\n"
                           "           for f in ('stat', 'lstat', 'access') for s in sets)\n"
                           "print(owned.BY_DESCRIPTOR, shutil.rmtree.avoids_symlink_attacks, same,\n"
                           "      os.stat is not posix.stat)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] * 4
