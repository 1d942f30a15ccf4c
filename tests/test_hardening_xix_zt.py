"""Hostile pass XIX-zt (tests/hostile_xix_zt_cases.md): seventeen more ways for a plug-in to learn its working
directory unwatched (a forked child asking, ``dir_fd=AT_FDCWD``, ``os.statvfs``, a relative name opened for writing,
``/proc/self/environ``, ``os.environb``, C's ``getcwd`` through ctypes, ``//proc/self/cwd``, ``repr(os.environ)``; open
there: a link the plug-in makes to ``/proc/self/cwd`` (Z5), the original behind the wrapped ``os.getcwd`` (Z7), the
import system listing the folder (Z12); a plug-in reading the command line (Z15)), each of which had a run fitted in
folder a reused from folder b with the verdict of a's code. Every pass over that watch found more, so a run of a plug-in
now holds the working directory whether its code asked or not (``fitted_code.plugin_run``, around every run whose
learner or vocabulary step is a plug-in): reused from that folder only, whatever the form. A run of the built-in
learners is reused from anywhere."""
from __future__ import annotations

import pytest
from script_runs import folders, kernels, plugin_script, run_script


# A process that imports the plug-in ``zt_plug`` as topicaudit does, fits as sys.argv[1] says inside a plug-in's run,
# and prints the record; or checks a record read from stdin, as a later process deciding on a reuse does.
SCRIPT = """import importlib, json, os, sys
import topicaudit
import topicaudit.loaded_code as loaded_code
from topicaudit.engine.storage import fitted_code
from topicaudit.targets.plugins import LEARNER_GROUP, load_class
how, sys.argv[1:] = sys.argv[1], sys.argv[2:]  # the rest: the command line the plug-in may read
load_class("zt_plug:L", LEARNER_GROUP, "the test")
if how == "check":
    print(json.dumps(fitted_code.changed(json.loads(sys.stdin.read()), names=False)))
    raise SystemExit
with loaded_code.running(), fitted_code.plugin_run(True), loaded_code.fitting():
    if how == "fork":  # Z1: a child asks and tells through a pipe
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.write(write, os.path.basename(os.getcwd()).encode())
            os._exit(0)
        os.waitpid(child, 0)
        importlib.import_module("zt_k_" + os.read(read, 100).decode())
    elif how == "link":  # Z5: a link of its own to the process's folder
        link = os.path.join(os.environ["ZT_TMP"], "zt_link")
        if not os.path.islink(link):
            os.symlink("/proc/self/cwd", link)
        importlib.import_module("zt_k_" + ("a" if os.path.exists(link + "/zt_flag") else "b"))
    elif how == "wrapped":  # Z7: the original behind the wrapper
        importlib.import_module("zt_k_" + os.path.basename(os.getcwd.__wrapped__()))
    elif how == "listing":  # Z12: the import system's listing of the folder
        import pkgutil
        importlib.import_module("zt_k_" + ("a" if any(m.name == "zt_here" for m in pkgutil.iter_modules([""]))
                                           else "b"))
    elif how == "numba":  # a library that reads the whole environment on its own behalf (numba's settings)
        import numba
        numba.njit(lambda x: x * 2.0)(1.0)
    elif how == "pop":  # XIX-zu ZP: the variable read, then removed before the record is made
        os.environ.get("ZT_MODE")
        os.environ.pop("ZT_MODE", None)
    elif how == "iterate":  # XIX-zu Z1: the environment iterated, not read by name
        "ZT_MODE" in list(os.environ)
    elif how == "argv-copy":  # XIX-zu ZA2: the command line read through a method of list's own
        "--json" in sys.argv.copy()
    elif how == "argv":  # Z15: the plug-in's code chooses by the command line
        importlib.import_module("zt_k_" + sys.modules["zt_plug"].by_command_line())
    print(json.dumps(fitted_code.loaded_outside()))  # as a run records its models, inside it
"""

PLUG = """import sys
from topicaudit.targets.learners.lda import VariationalLDA


def by_command_line():
    return "a" if "--json" in sys.argv else "b"


class L(VariationalLDA):
    pass
"""


@pytest.mark.parametrize("how", ["fork", "link", "wrapped", "listing", "plain"])
def test_a_plugins_run_is_reused_only_from_its_working_directory(tmp_path, how):
    """Z1, Z5, Z7, Z12 and a plain fit: from b the record reads as changed (``working directory``), from a not."""
    a, b, lib = folders(tmp_path, {"lib/zt_plug.py": PLUG, "a/zt_flag": "", "a/zt_here.py": "", **kernels("zt")})
    variables = {"ZT_TMP": str(tmp_path)}  # where the link is made (read by the fit: the same in every process)
    record = run_script(SCRIPT, a, how, variables=variables)
    assert run_script(SCRIPT, b, "check", record=record, variables=variables) == ["working directory"], record
    assert run_script(SCRIPT, a, "check", record=record, variables=variables) == []


def test_a_run_whose_plug_in_read_the_command_line_is_reused_only_with_it(tmp_path):
    """Z15: a plug-in choosing its code by ``"--json" in sys.argv`` had the run of ``check CFG --json v.json`` reused
    by ``check CFG``; its record holds the arguments now (``sys.argv``). A plain fit reads none, and keeps none."""
    a, _, lib = folders(tmp_path, {"lib/zt_plug.py": PLUG, **kernels("zt")})
    record = run_script(SCRIPT, a, "argv", "--json", "v.json")
    assert record["sys.argv"] == '["-c", "--json", "v.json"]', record
    assert run_script(SCRIPT, a, "check", record=record) == ["sys.argv"]
    assert run_script(SCRIPT, a, "check", "--json", "v.json", record=record) == []
    assert "sys.argv" not in run_script(SCRIPT, a, "plain", "--json", "v.json")


@pytest.mark.parametrize("how, entry", [("pop", "environment ZT_MODE"), ("iterate", "environment ZT_MODE"),
                                         ("argv-copy", "sys.argv")])
def test_what_a_plugin_read_is_kept_as_it_read_it(tmp_path, how, entry):
    """XIX-zu ZP, Z1, ZA2: a variable removed after it was read (the record kept it absent), the environment iterated,
    ``sys.argv.copy()``: each reused the run of another value. The value first read is kept; a process with the same
    reuses, one without does not."""
    a, _, lib = folders(tmp_path, {"lib/zt_plug.py": PLUG})
    record = run_script(SCRIPT, a, how, "--json", variables={"ZT_MODE": "flat"})
    assert entry in record, record
    assert entry in run_script(SCRIPT, a, "check", record=record)
    assert run_script(SCRIPT, a, "check", "--json", record=record, variables={"ZT_MODE": "flat"}) == []


def test_a_librarys_own_reads_of_the_environment_key_nothing(tmp_path):
    """XIX-zt's rerun: numba compiling a plug-in's kernel reads every variable (its ``NUMBA_*`` settings), and the run
    was keyed by ``OLDPWD``, ``SHLVL`` and ``_``: refitted from the same folder in another shell. A library's own read
    counts no more; the plug-in's own read of a variable does (``test_hardening_xix_zr``)."""
    a, _, lib = folders(tmp_path, {"lib/zt_plug.py": PLUG})
    record = run_script(SCRIPT, a, "numba")
    assert [entry for entry in record if entry.startswith("environment ")] == [], record


# A process that runs a canary-only audit of the learner sys.argv[2] names in this folder and prints its record; or
# checks a record, as a later process deciding on a reuse does (each a fresh process, as the run cache's are).
RUN = """import json, os, sys
import topicaudit
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.engine.storage import fitted_code
how, learner = sys.argv[1], sys.argv[2]
if how == "check":
    print(json.dumps(fitted_code.changed(json.loads(sys.stdin.read()), names=False)))
    raise SystemExit
config = config_from_dict({"synthetic": {"n_docs": 60, "n_words": 80}, "target": {"k": 2, "learner": learner},
                           "attack": {"shadows": 0, "canaries": {"count": 20}}, "output": os.environ["ZT_RUN"]})
print(json.dumps(execute_run(config, quiet=True).target.loaded_code))
"""


@pytest.mark.parametrize("learner", ["zt_plug:L", "lda"])
def test_a_run_holds_its_folder_when_its_learner_is_a_plug_in(tmp_path, learner):
    """``execute_run`` keys a plug-in's run by its folder (read as changed from another), a built-in's not."""
    a, b, lib = folders(tmp_path, {"lib/zt_plug.py": PLUG})
    variables = {"ZT_RUN": str(tmp_path / "run")}
    recorded = run_script(RUN, a, "run", learner, variables=variables)
    assert run_script(RUN, a, "check", learner, record=recorded, variables=variables) == []
    expected = ["working directory"] if ":" in learner else []
    assert run_script(RUN, b, "check", learner, record=recorded, variables=variables) == expected


# As SCRIPT, choosing by its input rather than its arguments (the command line is what these plug-ins read): a record
# on stdin is checked, none ("null") fits as ZT_READ says.
BY_INPUT = plugin_script("zt_plug", 'open("/proc/self/" + os.environ["ZT_READ"], "rb").read() '
                                    'if os.environ["ZT_READ"] != "orig_argv" else "--json" in sys.orig_argv')


@pytest.mark.parametrize("read, entry", [("orig_argv", "sys.orig_argv"), ("cmdline", "sys.orig_argv"),
                                         ("environ", "environment ZT_MODE")])
def test_the_command_line_and_environment_read_whole_key_the_run(tmp_path, read, entry):
    """XIX-zu: ``sys.orig_argv``, and ``/proc/self/cmdline`` or ``/proc/self/environ`` read as files, chose a
    plug-in's code unseen. Each is kept as read (the whole list; every variable); the same process reuses."""
    a, _, lib = folders(tmp_path, {"lib/zt_plug.py": PLUG})
    same = {"ZT_READ": read, "ZT_MODE": "flat"}
    record = run_script(BY_INPUT, a, "--json", variables=same)
    assert entry in record, record
    assert run_script(BY_INPUT, a, "--json", record=record, variables=same) == []
    other = run_script(BY_INPUT, a, record=record, variables={**same, "ZT_MODE": "on"})
    assert entry in other, other
