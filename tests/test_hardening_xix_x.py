"""Hostile pass XIX-x (tests/hostile_xix_x_cases.md): a tie is no evidence, and a plug-in's code loaded
outside sys.modules is still held against its files."""
from __future__ import annotations

import numpy as np
import pytest

from topicaudit.attacks.canaries import canary_coins
from topicaudit.bounds.fdp import eps_lb_fdp_one_run
from topicaudit.bounds.guesses import guess_outcomes
from topicaudit.bounds.one_run import eps_lb_one_run


@pytest.mark.parametrize("count", [8, 10, 16, 20])
def test_tied_scores_prove_nothing_whatever_the_coins(count):
    """R1: a learner whose Φ is uniform scores every canary the same; the tie-break's seeded order (seed 0) put
    the five members of the default 10 canaries (CANARY_SEED 0) first, so a learner that reads nothing of its data
    was VIOLATED ε ≥ 0.247 (10 of 10 'correct'). A guess inside a tie counts as the worst the tie allows."""
    labels = canary_coins(count, 0)
    tied = np.full(count, -174.18830469)
    for family in ("pure", "gdp"):
        assert eps_lb_fdp_one_run(tied, labels, 1e-5, family=family).epsilon == 0.0
    assert eps_lb_one_run(tied, labels, 1e-5).epsilon == 0.0


def test_a_tie_across_the_cut_counts_its_worst():
    scores = np.array([3.0, 2.0, 2.0, 2.0, 1.0])
    labels = np.array([True, True, False, True, False])
    # top 2: the 3.0 (a member) and one of the tied 2.0s, which may be the non-member: 1 sure hit
    # bottom 2: the 1.0 (a non-member) and one of the tied 2.0s, which may be a member: 1 sure hit
    assert guess_outcomes(scores, labels, [(2, 0), (0, 2), (2, 2), (1, 1)]) == [
        (2, 0, 2, 1), (0, 2, 2, 1), (2, 2, 4, 2), (1, 1, 2, 2)]


LOADER = '''
import importlib.util, pathlib
import numpy as np

_spec = importlib.util.spec_from_file_location("xl_impl_private", pathlib.Path(__file__).with_name("xlimpl.py"))
impl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(impl)  # a plug-in loader's idiom: the helper is in no sys.modules entry


class Leak:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        counts = impl.shape(np.asarray(X.sum(axis=0)).ravel() + 1.0)
        phi = np.vstack([counts] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''


def test_a_helper_loaded_outside_sys_modules_then_edited_drops_the_entry(tmp_path, monkeypatch):
    """S1: the plug-in loads its helper beside it with spec_from_file_location/exec_module and keeps it out of
    sys.modules; the helper edited after the import (the edit makes the fit raise) was not seen, so the run of the
    code loaded before the edit (NO SIGNAL, exit 0) was cached under the edited files' key and a fresh check of the
    edited plug-in reused it: exit 0 where the code on disk cannot fit."""
    import importlib
    import sys
    import warnings

    import stale_plugin
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.storage.run_cache import cached_run_dir

    site = tmp_path / "site"
    site.mkdir()
    (site / "xlloader.py").write_text(LOADER)
    (site / "xlimpl.py").write_text("import numpy as np\n\n\ndef shape(counts):\n    return np.ones_like(counts)\n")
    monkeypatch.syspath_prepend(str(site))
    settings = stale_plugin.settings("xlloader")
    try:
        importlib.import_module("xlloader")
        (site / "xlimpl.py").write_text("def shape(counts):\n    raise RuntimeError('edited')\n")
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            entry = str(cached_run_dir(config_from_dict(settings), tmp_path / "cache"))
    finally:
        sys.modules.pop("xlloader", None)
    assert entry != stale_plugin.fresh_process_entry(site, tmp_path / "cache", settings)
    assert any("changed after this process imported it" in str(w.message) for w in said)


def test_a_stale_bytecode_file_python_would_run_is_in_the_digest(tmp_path, monkeypatch):
    """S2: the source edited at the same size and modification time (two saves in one second, a copy keeping times)
    after its .pyc was written: Python's rule (mtime in seconds, size) runs the bytecode of the old code, under the
    digest of the new source; a later process without that .pyc (the cache cleared, another checkout) ran the code
    on disk and reused that run (NO SIGNAL, exit 0, where the code on disk cannot fit: exit 2)."""
    import os
    import py_compile
    import shutil

    from topicaudit.targets import plugin_code

    monkeypatch.syspath_prepend(str(tmp_path))
    source = tmp_path / "stalepyc.py"
    source.write_text('MODE = "ones"\n')
    os.utime(source, (1_700_000_000, 1_700_000_000))
    py_compile.compile(str(source), doraise=True)
    fresh = plugin_code.code_digest("stalepyc:Leak")
    source.write_text('MODE = "nope"\n')  # the same size
    os.utime(source, (1_700_000_000, 1_700_000_000))  # the same time: Python runs the .pyc of "ones"
    stale = plugin_code.code_digest("stalepyc:Leak")
    shutil.rmtree(tmp_path / "__pycache__")
    on_disk = plugin_code.code_digest("stalepyc:Leak")
    assert stale != on_disk and fresh != on_disk
    py_compile.compile(str(source), doraise=True)  # bytecode of the code on disk: the same digest as none
    assert plugin_code.code_digest("stalepyc:Leak") == on_disk


FORKED = """
import json, os, pathlib, sys, time, warnings
sys.path.insert(0, sys.argv[1])
import staleloaded  # before topicaudit, in the parent
time.sleep(0.05)
path = pathlib.Path(sys.argv[1], "staleloaded.py")
path.write_text(path.read_text().replace('float("1.0")', 'float("0.0")'))
time.sleep(0.05)  # the edit older than the child process by more than the clocks' grain
pid = os.fork()
if pid == 0:
    warnings.simplefilter("ignore")
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.storage.run_cache import cached_run_dir
    print(cached_run_dir(config_from_dict(json.loads(sys.argv[2])), sys.argv[3]), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_a_forked_child_counts_the_modules_its_parent_loaded(tmp_path):
    """S8: a script imports the plug-in (not topicaudit), the file is edited, then the script forks (os.fork,
    multiprocessing's default start method on Linux) and the child imports topicaudit and audits: the child runs
    the parent's code, loaded before the edit, but the edit is older than the child, so 'loaded before topicaudit
    and changed since the process started' saw no change and the old code's run took the edited files' key."""
    import json
    import os
    import subprocess
    import sys

    import stale_plugin
    from test_loaded_code import HELPER, LEARNER, SETTINGS

    site = tmp_path / "site"
    site.mkdir()
    (site / "stalehelper.py").write_text(HELPER)
    (site / "staleloaded.py").write_text(LEARNER)
    cache = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", FORKED, str(site), json.dumps(SETTINGS), cache],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    child = done.stdout.strip().splitlines()[-1]
    assert child != stale_plugin.fresh_process_entry(site, cache, SETTINGS)


BEFORE = """
import json, pathlib, sys, time, warnings
sys.path.insert(0, sys.argv[1])
import xlloader  # before topicaudit: its helper is loaded by exec_module, in no sys.modules entry, with no record
time.sleep(0.05)
path = pathlib.Path(sys.argv[1], "xlimpl.py")
path.write_text("def shape(counts):\\n    raise RuntimeError('edited')\\n")
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_cache import cached_run_dir
warnings.simplefilter("ignore")
print(cached_run_dir(config_from_dict(json.loads(sys.argv[2])), sys.argv[3]))
"""


def test_a_helper_loaded_outside_sys_modules_before_topicaudit_then_edited(tmp_path):
    """S9: S1's plug-in imported before topicaudit (a notebook's first cell), its helper edited, then audited: no
    record of the helper's load and no module of it to hold against its file, so the old code's run took the edited
    files' key. A plug-in loaded before topicaudit holds every file of it to the process's start."""
    import json
    import os
    import subprocess
    import sys
    import time

    import stale_plugin

    site = tmp_path / "site"
    site.mkdir()
    (site / "xlloader.py").write_text(LOADER)
    (site / "xlimpl.py").write_text("import numpy as np\n\n\ndef shape(counts):\n    return np.ones_like(counts)\n")
    settings = stale_plugin.settings("xlloader")
    cache = str(tmp_path / "cache")
    time.sleep(0.05)
    done = subprocess.run([sys.executable, "-c", BEFORE, str(site), json.dumps(settings), cache],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    here = done.stdout.strip().splitlines()[-1]
    assert here != stale_plugin.fresh_process_entry(site, cache, settings)


def test_a_checked_hash_pyc_python_is_told_not_to_check_is_in_the_digest(tmp_path, monkeypatch):
    """P3: under ``python --check-hash-based-pycs never`` Python runs a checked hash-based .pyc without reading its
    source; the source edited after it was written ran the old code under the new source's digest, and a process
    without the .pyc reused that run (NO SIGNAL, exit 0, where the code on disk cannot fit)."""
    import _imp
    import py_compile
    import shutil

    from topicaudit.targets import plugin_code

    monkeypatch.setattr(_imp, "check_hash_based_pycs", "never")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = tmp_path / "hashpyc.py"
    source.write_text('MODE = "ones"\n')
    py_compile.compile(str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    source.write_text('MODE = "nope"\n')
    stale = plugin_code.code_digest("hashpyc:Leak")
    shutil.rmtree(tmp_path / "__pycache__")
    assert stale != plugin_code.code_digest("hashpyc:Leak")
