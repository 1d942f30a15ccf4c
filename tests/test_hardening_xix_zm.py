"""Hostile pass XIX-zk, T8 and T20 (tests/hostile_xix_zk_cases.md), fixed on helper-zm: code that reaches the fit
from no file (an environment variable's text, another process's output) is noted as code no later process can check,
and the run it fitted is never reused; code generated from its caller's own names (dataclasses, namedtuple) or from
a literal in its caller's file is not such code."""
from __future__ import annotations

import collections
import dataclasses
import importlib.util
import os
import secrets
import sys

import pytest

from topicaudit import loaded_code
from topicaudit.engine.storage import fitted_code, run_cache
from test_hardening_xix_zh import _check  # noqa: E402 - the zh pass's `check` runner
from test_hardening_xix_zk import HARMLESS, SELF, START  # noqa: E402 - the patch, a harmless text, the profiling start

# T8: the code held in an environment variable; T20: printed by another process reading the file.
FROM_ENVIRONMENT = '    exec(os.environ.get("ZK_CODE", ""), {{}})'
FROM_PROCESS = '    exec(subprocess.run(["cat", {file!r}], capture_output=True).stdout, {{}})'


@pytest.mark.parametrize("kind, patch_first", [("environment", True), ("process", True), ("environment", False)])
def test_code_from_no_file_run_in_the_fit_keys_no_reuse(tmp_path, kind, patch_first):
    """T8, T20: sitecustomize.py (unchanged) leaves a profile function that, once the built-in learner is loaded,
    runs the text of $ZK_CODE, or what `cat p/ci.txt` prints; the text replaced ``fit``. Changed to patch nothing,
    `check` on the same cache printed "reusing …" and NO SIGNAL, exit 0, where a fresh cache gives VIOLATED. The
    other way round (no patch first, then the patch) the patched check reused the run fitted without it (XIX-zm:
    the start's profile function now keys no run at all)."""
    data, shim = tmp_path / "ci.txt", tmp_path / "shim"
    shim.mkdir()
    body = (FROM_ENVIRONMENT if kind == "environment" else FROM_PROCESS).format(file=str(data))
    (shim / "sitecustomize.py").write_text(START.format(body=body))
    environment = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off", "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))}
    seen, warned = [], []
    for text in (SELF, HARMLESS) if patch_first else ("", SELF):  # "": no code, in every file
        data.write_text(text)
        done = _check(tmp_path, {**environment, "ZK_CODE": text}, tmp_path / "cache")
        seen.append((done.returncode, done.stdout.split(":")[0], "reusing" in done.stderr))
        warned.append("no later process can check that code" in done.stderr)
        assert done.returncode in (0, 1), done.stderr[-3000:]
    fresh = [(0, "NO SIGNAL", False), (1, "VIOLATED", False)]
    assert seen == (fresh if patch_first else fresh[::-1]), seen
    assert warned == ([True, True] if patch_first else [False, True]), done.stderr[-3000:]


HELPER = '''
import collections, dataclasses, os
def generated():
    @dataclasses.dataclass
    class Point:
        x: int = 0
        y: "int" = 1
    Pair = collections.namedtuple("Pair", "left right")
    exec("zm_literal = 1", {})
    return Point(), Pair(1, 2)
def from_environment():
    exec(os.environ["ZM_CODE"], {})
'''


def _helper(tmp_path, monkeypatch):
    (tmp_path / "zm_helper.py").write_text(HELPER)
    spec = importlib.util.spec_from_file_location("zm_helper", tmp_path / "zm_helper.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "zm_helper", module)  # a dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _uncheckable(found):
    return sorted(key for key, digest in found.items() if digest == fitted_code.UNCHECKABLE)


def test_code_generated_from_names_or_literals_in_the_fit_keeps_runs_reusable(tmp_path, monkeypatch):
    """A plug-in's fit that defines a dataclass and a namedtuple (code the standard library writes from its names) and
    runs a literal text of its own file is checkable: its file's digest keys it. attrs' methods (which dp_accounting
    and topicaudit's own events module have written at import) and numba's wrappers (a keyed library's) too."""
    monkeypatch.setattr(loaded_code, "_FROM_TEXT", {})
    module = _helper(tmp_path, monkeypatch)
    with loaded_code.fitting():
        module.generated()
        dataclasses.make_dataclass("Made", [("a", int)])
        collections.namedtuple("Here", "a b")
        attr = pytest.importorskip("attr")  # an installed library writing a class's methods, as dataclasses does
        attr.make_class("Made", ["a", "b"])
        numba = pytest.importorskip("numba")
        numba.njit(lambda x: x + 1)(1)
    assert loaded_code.from_text(), "the hook noted nothing during the fit"
    found = fitted_code.loaded_outside()
    assert _uncheckable(found) == []
    assert not [name for name in fitted_code.changed(found, names=False) if "code from no file" in name]


def test_code_from_no_file_is_noted_reported_changed_and_never_found_again(tmp_path, monkeypatch):
    """The same helper running an environment variable's text during a fit: an entry that ``changed`` always reports,
    a warning, and a cache entry whose run is followed by one that no process finds again (not 16 redirects)."""
    monkeypatch.setattr(loaded_code, "_FROM_TEXT", {})
    monkeypatch.setattr(fitted_code, "_WARNED", set())
    monkeypatch.setenv("ZM_CODE", f"zm = {secrets.token_hex(8)!r}")  # a text in no file
    module = _helper(tmp_path, monkeypatch)
    module.from_environment()  # outside a fit and any call of topicaudit's: the script's own business
    assert _uncheckable(fitted_code.loaded_outside()) == []
    with loaded_code.fitting():
        module.from_environment()
    with pytest.warns(RuntimeWarning, match="no later process can check that code"):
        found = fitted_code.loaded_outside()
    entry = f"<code from no file, run by {tmp_path / 'zm_helper.py'}>"
    assert _uncheckable(found) == [entry]
    assert entry in fitted_code.changed(found)
    root = tmp_path / "cache"
    monkeypatch.setattr(run_cache, "cache_key", lambda config, unkeyed=False: {"code": "k"})
    monkeypatch.setattr(run_cache, "learner_label", lambda learner: "lda")

    class Config:
        stem, seed = "c", 0
        target = type("Target", (), {"learner": "lda", "k": 3})()

    keyed = run_cache.cached_run_dir(Config, root, unkeyed=True)  # the key's own entry (nothing read)
    monkeypatch.setattr(run_cache, "_loaded_code_of", lambda where: found if where == keyed else None)
    first, second = run_cache.cached_run_dir(Config, root), run_cache.cached_run_dir(Config, root)
    assert len({keyed, first, second}) == 3 and first.parent == root == second.parent
