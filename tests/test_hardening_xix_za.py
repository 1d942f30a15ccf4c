"""Hostile pass XIX-za: a plug-in changed in the process through doors the M1 fix (XIX-ya) did not look at, whose
run (NO SIGNAL, for a stub) was kept under the unchanged files' key and reused by a fresh `topicaudit check` of the
real, leaking learner (NO SIGNAL, exit 0, where it gives VIOLATED)."""
from __future__ import annotations

import functools
import sys
from unittest import mock

import numpy as np
import pytest

BASE = '''
import numpy as np


class Base:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        phi = np.vstack([1.0 + 50.0 * np.asarray(X.sum(axis=0)).ravel()] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''

HELPER = '''
def kernel(counts, scale):
    return 1.0 + scale * counts
'''

PLUGIN = '''
import numpy as np
from zabase import Base
from zahelper import kernel

SCALE = 50.0


class Inherit(Base):
    """fit inherited from zabase.Base."""


def _fit(self, X, seed):
    return self.fit(X, seed)


class Own:
    FACTOR = 1.0
    alias = kernel
    refit = _fit

    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        row = kernel(np.asarray(X.sum(axis=0)).ravel(), SCALE * self.FACTOR)
        phi = np.vstack([row] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''


def _stub(self, X, seed):
    return np.ones((2, X.shape[1]), np.float32) / X.shape[1]


class _Callable:
    def __call__(self, X, seed):
        return _stub(None, X, seed)


PATCHES = {
    # a code-less callable in a method the file defines
    "callable object": lambda m: mock.patch.object(m.Own, "fit", _Callable()),
    "functools.partial": lambda m: mock.patch.object(m.Own, "fit", functools.partial(_stub, None)),
    "functools.partialmethod": lambda m: mock.patch.object(m.Own, "fit", functools.partialmethod(_stub)),
    "mock side_effect": lambda m: mock.patch.object(m.Own, "fit", side_effect=lambda X, seed: _stub(None, X, seed)),
    # a method the class body does not define (inherited), set on the class
    "inherited method set on the class": lambda m: mock.patch.object(m.Inherit, "fit", _stub, create=True),
    # a name the file imports, rebound in the plug-in's module (patched where it is used)
    "imported function rebound": lambda m: mock.patch.object(m, "kernel", lambda counts, scale: counts * 0 + 1.0),
    # a method the class body binds to a module function by name (``fit = _fit``)
    "method bound by name in the class body": lambda m: mock.patch.object(m.Own, "refit", _stub),
    # a constant the file assigns, at its top level or in a class body
    "module constant": lambda m: mock.patch.object(m, "SCALE", 0.0),
    "class constant": lambda m: mock.patch.object(m.Own, "FACTOR", 0.0),
}


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    import importlib

    site = tmp_path / "site"
    site.mkdir()
    for name, text in (("zabase", BASE), ("zahelper", HELPER), ("zaplug", PLUGIN)):
        (site / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(site))
    try:
        yield importlib.import_module("zaplug")
    finally:
        for name in ("zabase", "zahelper", "zaplug"):
            sys.modules.pop(name, None)


def test_an_unpatched_plugin_keeps_its_digest(plugin):
    from topicaudit.targets import plugin_code

    for spec in ("zaplug:Own", "zaplug:Inherit"):
        digest = plugin_code.code_digest(spec)
        assert digest and plugin_code.as_loaded(spec, digest) == digest


@pytest.mark.parametrize("how", list(PATCHES))
def test_a_plugin_patched_through_another_door_drops_the_digest(plugin, how):
    import warnings

    from topicaudit.targets import plugin_code

    spec = "zaplug:Inherit" if "inherited" in how else "zaplug:Own"
    digest = plugin_code.code_digest(spec)
    assert plugin_code.as_loaded(spec, digest) == digest
    with PATCHES[how](plugin), warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert plugin_code.as_loaded(spec, digest) == {}
    assert plugin_code.as_loaded(spec, digest) == digest  # put back
