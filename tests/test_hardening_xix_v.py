"""Hardening XIX, helper v (issue 32, hostile pass XIX-v, the closing pass). Every case it ran is in
tests/hostile_xix_v_cases.md.

Critical:
- CL2: a learner whose class's name, read (a metaclass's ``__name__``), called ``sys.exit(0)``: check_learner read it
  outside its guard to word the guard's own failure, and a script running the suite ended with exit 0, no check run.
- V1: a fit that set ``sys.stdout.write`` on the stream itself (not a swapped stream) left check exit 1 with no
  VIOLATED line and no note; what is set on the standard streams is put back now.
- N1: a plug-in imported, then edited, then the process's first call (a notebook): ``as_loaded`` compared each
  function's own code, with the functions defined inside it (a lambda, a comprehension, a nested ``def``) by name
  only, and skipped a module-level lambda and the methods of a class not defined at the module's top (in an
  ``if``). An edit there kept the key of the edited file for the imported code's run, and a fresh process reused it:
  NO SIGNAL where the edited code gives VIOLATED.
"""
from __future__ import annotations

import importlib
import io
import os
import sys
import warnings

import pytest

import stale_plugin

from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_cache import cached_run_dir
from topicaudit.learner_checks import CheckDidNotFinish, check_learner
from topicaudit.process_state import kept_process_state
from topicaudit.targets.learners.lda import VariationalLDA

LEARNER = '''
import numpy as np

shrink_all = lambda phi: phi * 1.0

if True:
    class Helper:
        def scale(self, phi):
            return phi * 1.0


class Leak:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        counts = np.asarray(X.sum(axis=0)).ravel() + 1.0
        flatten = lambda c: np.ones_like(c)
        def nested(c):
            return c * 1.0
        rows = [flatten(counts) for _ in range(self.k)]
        phi = nested(shrink_all(Helper().scale(np.vstack(rows))))
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''

SETTINGS = stale_plugin.settings("staleplugv")


@pytest.fixture
def plug_in(tmp_path, monkeypatch):
    yield from stale_plugin.installed(tmp_path, monkeypatch, "staleplugv", LEARNER)


def fresh_process_entry(site, cache) -> str:
    return stale_plugin.fresh_process_entry(site, cache, SETTINGS)


@pytest.mark.parametrize("edit", [("lambda c: np.ones_like(c)", "lambda c: c"),
                                  ("[flatten(counts) for _ in", "[flatten(counts) * 0 + 1 for _ in"),
                                  ("            return c * 1.0", "            return c * 0.0 + 1.0"),
                                  ("shrink_all = lambda phi: phi * 1.0", "shrink_all = lambda phi: phi * 2.0"),
                                  ("            return phi * 1.0", "            return phi * 2.0")],
                         ids=["lambda", "comprehension", "nested def", "module lambda", "class in an if"])
def test_an_edit_inside_a_function_defined_in_another_is_never_keyed_as_the_code_that_ran(plug_in, tmp_path, edit):
    """N1: the plug-in imported, then edited where only a function inside another (or a lambda, or a class in an
    ``if``) changes, then the process's first call: its entry is never the one the edited code finds."""
    importlib.import_module("staleplugv")
    (plug_in / "staleplugv.py").write_text(LEARNER.replace(*edit))
    cache = tmp_path / "cache"
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        stale = cached_run_dir(config_from_dict(SETTINGS), cache)
    assert str(stale) != fresh_process_entry(plug_in, cache)
    assert any(issubclass(w.category, RuntimeWarning) and "staleplugv" in str(w.message) for w in said)


def test_an_unedited_plug_in_keeps_the_entry(plug_in, tmp_path):
    """Imported before the first call and never edited: this process's entry is the one a fresh process finds."""
    importlib.import_module("staleplugv")
    cache = tmp_path / "cache"
    assert str(cached_run_dir(config_from_dict(SETTINGS), cache)) == fresh_process_entry(plug_in, cache)


def test_an_edit_that_puts_the_file_s_times_back_is_still_seen(plug_in, tmp_path):
    """The file's modification time set back after the edit (``touch -r``), its size unchanged: its change time,
    which no user can set back, still tells that it is not the file that was loaded."""
    importlib.import_module("staleplugv")
    path = plug_in / "staleplugv.py"
    before = path.stat()
    edited = LEARNER.replace("phi * 1.0", "phi * 2.0")
    assert len(edited) == len(LEARNER)
    path.write_text(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    cache = tmp_path / "cache"
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert str(cached_run_dir(config_from_dict(SETTINGS), cache)) != fresh_process_entry(plug_in, cache)


@pytest.mark.parametrize("name", ["stdout", "stderr"])
def test_a_fit_that_replaces_a_stream_s_write_has_it_put_back(name, monkeypatch):
    """V1: a fit that silenced a library by setting ``sys.stdout.write`` on the stream itself (the same object, so
    not seen as a swapped stream) left ``check`` exit 1 with nothing printed and no note (check.json said VIOLATED)."""
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, name, stream)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with kept_process_state("the fit of Quiet"):
            getattr(sys, name).write = lambda text: len(text)
    print("VIOLATED: the verdict", file=getattr(sys, name))
    stream.flush()
    assert b"VIOLATED" in stream.buffer.getvalue()
    assert any(issubclass(w.category, RuntimeWarning) and f"sys.{name}" in str(w.message) for w in said)


class _ExitsWhenNamed(type):
    """A metaclass whose class name, read, calls ``sys.exit(0)``."""

    @property
    def __name__(cls):
        sys.exit(0)


def test_a_learner_whose_class_name_exits_is_no_pass_of_check_learner():
    """CL2: check_learner named the learner again (its class's ``__name__``) to word the guard's failure, outside the
    guard: a class whose name, read, called ``sys.exit(0)`` ended a script running the suite with exit 0, no check
    run."""
    class Named(VariationalLDA, metaclass=_ExitsWhenNamed):
        pass

    with pytest.raises(CheckDidNotFinish, match="no check ran"):
        check_learner(Named(k=3), ("phi",))
