"""Hostile pass XIX-zg (tests/hostile_xix_zg_cases.md): code Python runs at start that leaves a way to run other code
later keys no run."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

AUDIT_HOOK = """
import sys
_busy = []
def _watch(event, args):  # a CI's import watcher: applies its patches once a module is loaded
    if event != "import" or _busy:
        return
    module = sys.modules.get("topicaudit.targets.learners.lda")
    if module is None or getattr(module, "_ci_patched", False):
        return
    _busy.append(1)
    try:
        import ci_patches
        ci_patches.apply(module)
        module._ci_patched = True
    finally:
        _busy.clear()
sys.addaudithook(_watch)
"""

ASK = "from topicaudit.engine.storage.startup_code import startup_code; print(repr(startup_code()))"


def _asked(tmp_path, shim):
    (tmp_path / "sitecustomize.py").write_text(shim)
    others = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [others])])}
    done = subprocess.run([sys.executable, "-c", ASK], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return ast.literal_eval(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_start_that_adds_an_audit_hook_keys_no_run(tmp_path):
    """S6: a sitecustomize.py (unchanged throughout) adds an audit hook that, at the first import event after the
    built-in learner's module is loaded, imports ci_patches from elsewhere and lets it replace `fit`: the hook is no
    finder or path hook, so the start was keyed; ci_patches.py edited to patch nothing, `check` reused the stub's
    NO SIGNAL where a fresh cache gives VIOLATED. Such a start keys no run (an empty digest), with a warning."""
    found, said = _asked(tmp_path, AUDIT_HOOK)
    assert found == {}, found
    assert "audit hook" in said and "no run is reused" in said, said


def test_a_start_without_hooks_is_keyed(tmp_path):
    found, said = _asked(tmp_path, "import sys\nSETTING = 1\n")
    assert set(found) == {"modules", "pth"}, (found, said)


BY_COMMAND = """
import os, sys
if os.path.basename(sys.argv[0]).startswith("tool"):  # a CI's patches for the tool under test, for its command only
    import ci_patches
"""


def test_start_up_code_of_this_command_alone_is_in_the_key(tmp_path):
    """S7: a sitecustomize.py imports ci_patches (replacing the built-in learner's fit) only when the command is
    `topicaudit`; the bare start that keys start-up code was asked with `sys.argv == ['-c']`, so ci_patches was in
    no digest, and after it was edited to patch nothing `check` reused the stub's NO SIGNAL where a fresh cache gives
    VIOLATED. The bare start is asked with the command line this process started with."""
    (tmp_path / "sitecustomize.py").write_text(BY_COMMAND)
    (tmp_path / "tool.py").write_text(ASK)
    others = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [others])])}
    found = []
    for patch in ("STUB = True\n", "STUB = False\n"):
        (tmp_path / "ci_patches.py").write_text(patch)
        done = subprocess.run([sys.executable, "-B", "tool.py", "--some", "option"], env=env, capture_output=True,
                              text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        found.append(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
    assert found[0] and found[1] and found[0] != found[1], found


def test_a_start_that_imports_topicaudit_is_keyed(tmp_path):
    """topicaudit's own audit hook (``loaded_code``, which only records) is no hook of the start's."""
    found, said = _asked(tmp_path, "import topicaudit.targets.learners.lda\n")
    assert set(found) == {"modules", "pth"}, (found, said)


def test_a_start_that_changes_the_working_directory_is_not_keyed_as_another(tmp_path):
    """S8: `PYTHONPATH=sc` names a sitecustomize.py that replaces the built-in learner's fit and then moves the
    process to another folder (os.chdir); the bare start was asked from there, where `sc` names nothing: the shim's
    NO SIGNAL was kept under the key of a start with no shim, and `check` run from that folder without the shim
    reused it. A start-up module this process runs that the bare start does not load keys no run."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "sitecustomize.py").write_text(f"import os\nos.chdir({str(elsewhere)!r})\n")
    others = os.environ.get("PYTHONPATH")
    found = []
    for where, path in ((tmp_path, ["sc"]), (elsewhere, [])):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, *filter(None, [others])])}
        done = subprocess.run([sys.executable, "-c", ASK], env=env, capture_output=True, text=True, cwd=where)
        assert done.returncode == 0, done.stderr[-2000:]
        found.append(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
    assert found[1] and found[0] != found[1], found


def test_code_a_start_reads_from_shared_memory_is_in_the_key(tmp_path):
    """S9: a sitecustomize.py runs a shim kept in /dev/shm (`exec(open("/dev/shm/…").read())`, a CI's fast scratch
    space); the files a start reads were digested except under /proc, /dev and /sys, so the shim edited to patch
    nothing reused its NO SIGNAL. Only /proc and /sys (the process's own state) are left out."""
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    shim = f"/dev/shm/topicaudit-zg-{os.getpid()}-{tmp_path.name}.py"
    try:
        found = []
        for text in ("PATCH = True\n", "PATCH = False\n"):
            with open(shim, "w") as handle:
                handle.write(text)
            found.append(_asked(tmp_path, f"exec(open({shim!r}).read())\n")[0])
        assert found[0] and found[1] and found[0] != found[1], found
    finally:
        os.unlink(shim)


def test_a_library_outside_the_installed_folders_is_keyed_by_its_code(tmp_path):
    """L2: a test suite's stand-in gensim (or a working copy of it) on PYTHONPATH, flat topics, then edited to leak
    the corpus's counts at the same place and version: `library_locations` keyed where it is imported from, not
    what it holds, and `check` reused the flat stand-in's NO SIGNAL where a fresh cache gives VIOLATED. A library
    imported from outside the folders Python installs into is keyed by the content of its code too."""
    (tmp_path / "gensim").mkdir()
    ask = ("from topicaudit.engine.storage.run_cache import library_locations; "
           "print(repr(library_locations(['gensim', 'numpy'])))")
    others = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [others])])}
    found = []
    for body in ("FLAT = True\n", "FLAT = False\n"):
        (tmp_path / "gensim" / "__init__.py").write_text(body)
        done = subprocess.run([sys.executable, "-B", "-c", ask], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        found.append(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
    assert found[0]["numpy"] == found[1]["numpy"] and "sha256" not in found[0]["numpy"], found
    assert found[0]["gensim"] != found[1]["gensim"], found
