"""Hardening XIX, helper u (issue 32, hostile pass XIX-u: forged and crash-born verdicts). Every case it ran is in
tests/hostile_xix_u_cases.md.

Critical:
- ST1: the run cache keyed a plug-in by its files on disk, but Python imports a module once. In one session
  (a notebook, a pytest run, a script calling ``assert_privacy`` twice) the plug-in's file was edited between two
  calls: the second call ran the code imported before the edit under the key of the files after it, and a fresh
  process running the edited code reused that entry ("same configuration, corpus content and code"): NO SIGNAL
  where the edited code gives VIOLATED. A plug-in whose files changed after this process imported it now has no
  digest (its run is never reused), with a warning (``plugin_code.as_loaded``). ST4, the same: the plug-in imported,
  then edited, then the process's first call of topicaudit (a notebook); the imported code is compared with the
  file compiled now (its functions' code, its literal constants).
- NP1: a fit that replaced ``builtins.print`` (to silence a library) left ``check`` exit 1 with no VIOLATED line
  printed; ``print`` and ``warnings.showwarning`` are now put back after the plug-in's code (``kept_process_state``).
- RC1: an installed distribution with no list of its files (a dist-info without RECORD): a helper module it installs
  beside its plug-in was in no digest; the modules its top_level.txt names are digested now.
- GC1: a plug-in's guarantee() ran outside every ``kept_process_state`` block: one that moved the working directory
  had the run written into another folder; one that replaced ``print`` or ``sys.stdout`` left exit 1 with no VIOLATED
  printed. Every read of a claim goes through ``targets.base.claim``, such a block. MC1: the same for mechanism()
  (``targets.base.declared_mechanism``).
- DL1: ``check_learner`` read the learner's parameters (to name it) outside the checks' guard: a parameter whose
  ``==``, ``repr`` or property called ``sys.exit(0)`` ended a script running the suite with exit 0 and no check run.
"""
from __future__ import annotations

import builtins
import importlib
import os
import sys
import warnings

import pytest

import stale_plugin

from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_cache import cached_run_dir
from topicaudit.process_state import kept_process_state

LEARNER = '''
import numpy as np

MODE = "uniform"


class Leak:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed, scale=1.0):
        counts = np.asarray(X.sum(axis=0)).ravel() * scale + 1.0
        if MODE == "uniform":
            counts = np.ones_like(counts)
        phi = np.vstack([counts] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''

SETTINGS = stale_plugin.settings("staleplug")


@pytest.fixture
def plug_in(tmp_path, monkeypatch):
    yield from stale_plugin.installed(tmp_path, monkeypatch, "staleplug", LEARNER)


def fresh_process_entry(site, cache) -> str:
    return stale_plugin.fresh_process_entry(site, cache, SETTINGS)


def test_an_edit_after_the_import_is_never_keyed_as_the_code_that_ran(plug_in, tmp_path):
    importlib.import_module("staleplug")  # the session imported it (an earlier call audited it)
    cache = tmp_path / "cache"
    before = cached_run_dir(config_from_dict(SETTINGS), cache)
    assert cached_run_dir(config_from_dict(SETTINGS), cache) == before  # unchanged: the same entry
    (plug_in / "staleplug.py").write_text(LEARNER.replace('MODE = "uniform"', 'MODE = "real"'))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        stale = cached_run_dir(config_from_dict(SETTINGS), cache)  # runs the uniform code still loaded
    assert stale != before
    assert str(stale) != fresh_process_entry(plug_in, cache)  # the edited code never finds the stale run
    assert any(issubclass(w.category, RuntimeWarning) and "staleplug" in str(w.message) for w in said)


@pytest.mark.parametrize("edit", [('MODE = "uniform"', 'MODE = "real"'),
                                  ("counts = np.ones_like(counts)", "counts = counts * 1.0"),
                                  ("scale=1.0", "scale=0.0"), ('MODE = "uniform"', 'MODE = "re" + "al"')])
def test_an_edit_between_the_import_and_the_first_call_is_never_keyed_as_the_code_that_ran(plug_in, tmp_path, edit):
    """ST4: a notebook imports the plug-in in its first cell, the file is edited (a constant, a method's body, a
    default value: ST4b; a constant the compiler folds from an expression: ST4c),
    and the next cell is the process's first call of topicaudit."""
    importlib.import_module("staleplug")
    (plug_in / "staleplug.py").write_text(LEARNER.replace(*edit))
    cache = tmp_path / "cache"
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        stale = cached_run_dir(config_from_dict(SETTINGS), cache)
    assert str(stale) != fresh_process_entry(plug_in, cache)
    assert any(issubclass(w.category, RuntimeWarning) and "staleplug" in str(w.message) for w in said)


def test_any_write_to_the_file_after_the_import_drops_the_entry(plug_in, tmp_path):
    """A comment added above the code after the import: what runs is not told from the file by reading code any
    more (``loaded_code``: the file is no longer the one loaded), so the run is not reused: a refit, with the
    warning, never a stale entry."""
    importlib.import_module("staleplug")
    (plug_in / "staleplug.py").write_text("# a note\n" + LEARNER)
    cache = tmp_path / "cache"
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert str(cached_run_dir(config_from_dict(SETTINGS), cache)) != fresh_process_entry(plug_in, cache)
    assert any("changed after this process imported it" in str(w.message) for w in said)


def test_a_constant_set_in_two_branches_is_no_edit(plug_in, tmp_path):
    """``try: import x; HAS_X = True`` / ``except ImportError: HAS_X = False`` holds one of its two constants: an
    unchanged plug-in written so keeps its entry (one of the two compared alone read as an edit, never reused)."""
    branches = LEARNER.replace("import numpy as np\n", "import numpy as np\ntry:\n    import not_installed_xu\n"
                               "    HAS_IT = True\nexcept ImportError:\n    HAS_IT = False\nLEVEL = 1\nLEVEL = 2\n")
    (plug_in / "staleplug.py").write_text(branches)
    importlib.import_module("staleplug")
    cache = tmp_path / "cache"
    assert str(cached_run_dir(config_from_dict(SETTINGS), cache)) == fresh_process_entry(plug_in, cache)


MADE_AT_IMPORT = '''import enum
import functools
import typing
from dataclasses import dataclass

import numpy as np


@dataclass
class Settings:
    alpha: float = 0.1


class Pair(typing.NamedTuple):
    a: int = 1


class Kind(enum.Enum):
    A = 1


@functools.total_ordering
class Order:
    def __lt__(self, other):
        return False

    def __eq__(self, other):
        return True
'''


def test_methods_made_at_import_are_no_edit(plug_in, tmp_path):
    """A dataclass's generated methods, total_ordering's, a NamedTuple's fields and an Enum's members: made at
    import from what the file says, so not compared (each read as an edit, and such a plug-in was never reused)."""
    made = LEARNER.replace("import numpy as np\n", MADE_AT_IMPORT)
    (plug_in / "staleplug.py").write_text(made)
    importlib.import_module("staleplug")
    cache = tmp_path / "cache"
    assert str(cached_run_dir(config_from_dict(SETTINGS), cache)) == fresh_process_entry(plug_in, cache)


def test_a_learner_in_a_test_module_pytest_rewrote_is_no_edit(tmp_path, monkeypatch):
    """pytest compiles a test module's asserts anew: its functions' code is not the file's compiled plainly, and a
    learner defined in a test file read as edited (never reused from the cache, a wrong warning)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "test_xu_inline.py").write_text(LEARNER + "\n\ndef test_it():\n    assert Leak(2).k == 2\n")
    monkeypatch.syspath_prepend(str(site))
    settings = {**SETTINGS, "target": {**SETTINGS["target"], "learner": "test_xu_inline:Leak"}}
    try:
        module = importlib.import_module("test_xu_inline")
        if type(module.__loader__).__name__ != "AssertionRewritingHook":
            pytest.skip("pytest did not rewrite the module here")
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            cached_run_dir(config_from_dict(settings), tmp_path / "cache")
        assert not [w for w in said if "test_xu_inline" in str(w.message)]
    finally:
        sys.modules.pop("test_xu_inline", None)


def test_a_plug_in_not_yet_imported_is_keyed_by_its_files(plug_in, tmp_path):
    cache = tmp_path / "cache"
    (plug_in / "staleplug.py").write_text(LEARNER.replace('MODE = "uniform"', 'MODE = "real"'))
    assert "staleplug" not in sys.modules
    assert str(cached_run_dir(config_from_dict(SETTINGS), cache)) == fresh_process_entry(plug_in, cache)


@pytest.mark.parametrize("name", ["print", "showwarning"])
def test_a_fit_that_replaces_print_or_showwarning_has_it_put_back(name):
    """NP1: a fit that silenced a chatty library by replacing ``print`` left ``check`` exit 1 with no VIOLATED line
    printed (check.json said VIOLATED); one replacing ``warnings.showwarning`` hid topicaudit's notes."""
    owner = builtins if name == "print" else warnings
    original = getattr(owner, name)
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with kept_process_state("the fit of Quiet"):
                setattr(owner, name, lambda *a, **k: None)
        assert getattr(owner, name) is original
        assert any(issubclass(w.category, RuntimeWarning) and name in str(w.message) for w in said)
    finally:
        setattr(owner, name, original)


class _ExitsOnCompare:
    """A parameter value whose ``==`` calls ``sys.exit(0)``."""

    def __eq__(self, other):
        sys.exit(0)

    __hash__ = object.__hash__


class _LearnerWithAnOddParameter:
    def __init__(self, k, prior=None):
        self.k = k
        self.prior = prior

    def fit(self, X, seed):
        raise AssertionError("never reached: no check may run")


def test_a_parameter_that_exits_when_read_is_no_pass_of_check_learner():
    """DL1: check_learner named the learner (its parameters compared with their defaults) before any check, outside
    the checks' guard: a parameter whose ``==`` (or ``repr``, or a property) called ``sys.exit(0)`` left
    check_learner as SystemExit(0), and a script running the suite ended with exit 0, read as a pass."""
    from topicaudit.learner_checks import CheckDidNotFinish, check_learner
    with pytest.raises(CheckDidNotFinish, match="no check ran"):
        check_learner(_LearnerWithAnOddParameter(k=3, prior=_ExitsOnCompare()), ("phi",))


def test_a_helper_of_an_installed_distribution_without_a_record_is_digested(tmp_path, monkeypatch):
    """RC1: a distribution installed without a list of its files (a dist-info with no RECORD) whose plug-in module
    imports a helper module it installs beside it: nothing beside a module in site-packages is digested, and the
    distribution listed nothing, so an edit to the helper at the same version kept the cache key. Its
    top_level.txt names the helper; each module it names is digested."""
    from topicaudit.targets import plugin_code
    from topicaudit.targets.plugins import LEARNER_GROUP, source
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "leakrc.py").write_text(LEARNER.replace("import numpy as np", "import numpy as np\nimport leakrc_noise"))
    (site / "leakrc_noise.py").write_text("SCALE = 0.0\n")
    info = site / "leakrc-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: leakrc\nVersion: 0.1.0\n")
    (info / "top_level.txt").write_text("leakrc\nleakrc_noise\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(plugin_code, "_installed", lambda: {site.resolve()})
    plugins_module = sys.modules["topicaudit.targets.plugins"]
    plugins_module._distributions.cache_clear()
    try:
        before = source("leakrc:Leak", LEARNER_GROUP)
        assert before["distribution"] == "leakrc"
        (site / "leakrc_noise.py").write_text("SCALE = 1.0\n")
        assert source("leakrc:Leak", LEARNER_GROUP)["source_sha256"] != before["source_sha256"]
    finally:
        plugins_module._distributions.cache_clear()


class ChdirClaim:
    """A learner whose guarantee() moves the working directory (to the folder in $XU_TO)."""

    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        raise AssertionError("never fitted here")

    def guarantee(self):
        from topicaudit.targets.base import NO_GUARANTEE
        os.chdir(os.environ["XU_TO"])
        return NO_GUARANTEE


def test_a_guarantee_that_moves_the_working_directory_has_it_put_back(tmp_path, monkeypatch):
    """GC1: guarantee() is read wherever the engine needs the claim, outside the fits' blocks: one that called
    os.chdir had ``check cX.toml --output o`` write its run into /tmp/o (and one replacing print or sys.stdout left
    exit 1 with no VIOLATED line printed)."""
    from topicaudit.targets.registry import build_target
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("XU_TO", str(elsewhere))
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        build_target(f"{__name__}:ChdirClaim", 3, "all")
    assert os.getcwd() == str(tmp_path)
    assert any(issubclass(w.category, RuntimeWarning) and "working directory" in str(w.message) for w in said)


class ChdirMechanism(ChdirClaim):
    """Its mechanism() moves the working directory; it claims nothing."""

    def guarantee(self):
        from topicaudit.targets.base import NO_GUARANTEE
        return NO_GUARANTEE

    def mechanism(self):
        os.chdir(os.environ["XU_TO"])


def test_a_mechanism_that_moves_the_working_directory_has_it_put_back(tmp_path, monkeypatch):
    """MC1: mechanism() is read wherever the engine needs it, outside the fits' blocks: one that called os.chdir had
    the run written into /tmp/o."""
    from topicaudit.targets.base import declared_mechanism
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("XU_TO", str(elsewhere))
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert declared_mechanism(ChdirMechanism(3)) is None
    assert os.getcwd() == str(tmp_path)
