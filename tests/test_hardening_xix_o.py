"""Hostile pass XIX, helper o (tests/hostile_xix_o_cases.md): what the confirmation pass found after passes XIX-l
and XIX-m.

- The run cache's code digest missed code a plug-in imports as part of its own package or from beside it
  (``targets.plugins``): a namespace package (a folder without ``__init__.py``) beside the learner, a package split
  over two folders by ``pkgutil.extend_path``, a subpackage that is a symbolic link, and every module beside a
  project that lies under the interpreter's prefix. An edit there reused the cached run of the code before it.
- A learner object holding an unseeded random generator made in its constructor was refused as holding other
  state than its rebuild (non-critical: a wrong refusal).
- A child forked in a plug-in's ``guarantee()`` (no kept_process_state block) carried on as a second command, printed
  a second verdict after the command ended and rewrote check.json (``process_state._after_fork``).
- A plug-in's exception whose ``str()`` raised, or a BaseException of its own, was an internal error (exit 3, the
  latter leaving a half-written run), and a ValueError of megabytes was printed whole (non-critical).
- A report run as root removed another user's folder that looked like a killed report's staging, beside its
  output in a shared sticky folder (``output_folder.remove_stale_staging``).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from topicaudit.errors import UserError
from topicaudit.targets.base import NO_GUARANTEE, Guarantee
from topicaudit.targets.learners.pipeline import PluginCodeError, plugin_code
from topicaudit.targets.plugins import LEARNER_GROUP, source
from topicaudit.process_state import FORKED_CHILD_EXIT
from topicaudit.reports.output_folder import remove_stale_staging
from topicaudit.targets.registry import claim_of, learner_settings

LEARNER = "from {helper} import noise\n\nclass L:\n    def __init__(self, k):\n        self.k = k\n"


@pytest.fixture
def clean_modules():
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        sys.modules.pop(name, None)


def _digest(name: str) -> str:
    return source(name, LEARNER_GROUP)["source_sha256"]


def test_a_helper_in_a_namespace_folder_beside_the_learner_is_in_its_digest(tmp_path, monkeypatch, clean_modules):
    """``from helpers import noise`` with helpers/ holding no __init__.py: an edit there is another digest."""
    (tmp_path / "helpers").mkdir()
    (tmp_path / "ourl.py").write_text(LEARNER.format(helper="helpers"))
    (tmp_path / "helpers" / "noise.py").write_text("MODE = 'uniform'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = _digest("ourl:L")
    (tmp_path / "helpers" / "noise.py").write_text("MODE = 'real'\n")
    assert _digest("ourl:L") != before


def test_a_package_split_by_extend_path_is_digested_over_both_folders(tmp_path, monkeypatch, clean_modules):
    init = "from pkgutil import extend_path\n__path__ = extend_path(__path__, __name__)\n"
    for portion in ("one", "two"):
        (tmp_path / portion / "splitpkg").mkdir(parents=True)
        (tmp_path / portion / "splitpkg" / "__init__.py").write_text(init)
    (tmp_path / "one" / "splitpkg" / "learner.py").write_text(LEARNER.format(helper="splitpkg"))
    (tmp_path / "two" / "splitpkg" / "noise.py").write_text("MODE = 'uniform'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "two"))
    monkeypatch.syspath_prepend(str(tmp_path / "one"))
    before = _digest("splitpkg.learner:L")
    (tmp_path / "two" / "splitpkg" / "noise.py").write_text("MODE = 'real'\n")
    assert _digest("splitpkg.learner:L") != before


def test_a_subpackage_that_is_a_symbolic_link_is_in_the_digest(tmp_path, monkeypatch, clean_modules):
    (tmp_path / "site" / "linkpkg").mkdir(parents=True)
    (tmp_path / "shared").mkdir()
    (tmp_path / "site" / "linkpkg" / "__init__.py").write_text("")
    (tmp_path / "site" / "linkpkg" / "learner.py").write_text(LEARNER.format(helper="linkpkg.impl"))
    (tmp_path / "shared" / "__init__.py").write_text("")
    (tmp_path / "shared" / "noise.py").write_text("MODE = 'uniform'\n")
    (tmp_path / "shared" / "loop").symlink_to(tmp_path / "shared")  # a link back up: read once, no endless walk
    (tmp_path / "site" / "linkpkg" / "impl").symlink_to(tmp_path / "shared")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    before = _digest("linkpkg.learner:L")
    (tmp_path / "shared" / "noise.py").write_text("MODE = 'real'\n")
    assert _digest("linkpkg.learner:L") != before


def test_a_project_under_the_interpreters_prefix_has_its_helpers_digested(tmp_path, monkeypatch, clean_modules):
    """A system Python's prefix is /usr, and /usr/src/app is a project, not an installed location."""
    app = tmp_path / "src" / "app"
    (app / "helpers").mkdir(parents=True)
    (app / "helpers" / "__init__.py").write_text("")
    (app / "prefixl.py").write_text(LEARNER.format(helper="helpers"))
    (app / "helpers" / "noise.py").write_text("MODE = 'uniform'\n")
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path))
    monkeypatch.setattr(sys, "base_exec_prefix", str(tmp_path))
    monkeypatch.syspath_prepend(str(app))
    before = _digest("prefixl:L")
    (app / "helpers" / "noise.py").write_text("MODE = 'real'\n")
    assert _digest("prefixl:L") != before


class _WithGenerator:
    """An honest learner holding an unseeded generator it makes in its constructor."""

    def __init__(self, k, max_iter=10):
        self.k, self.max_iter = k, max_iter
        self._rng = np.random.default_rng()
        self._legacy = np.random.RandomState()

    def fit(self, X, seed):
        raise NotImplementedError

    def guarantee(self):
        return NO_GUARANTEE


def test_a_learner_holding_an_unseeded_generator_is_not_refused_as_other_state():
    """Its generator differs from its rebuild's by construction; a switch set after construction is still refused."""
    name, k, given = learner_settings(_WithGenerator(k=3))
    assert (k, given) == (3, {}) and name.endswith(":_WithGenerator")
    switched = _WithGenerator(k=3)
    switched._release_real = True
    with pytest.raises(UserError, match="_release_real"):
        learner_settings(switched)


class _ForksInItsClaim:
    """A part whose guarantee() forks; the child would carry on as the command."""

    def guarantee(self):
        os.fork()
        return NO_GUARANTEE


def test_a_child_forked_in_a_plug_ins_guarantee_ends_where_it_returns_into_topicaudit():
    """claim_of is no kept_process_state block: the child came back and ran the caller's code (a second command)."""
    parent = os.getpid()
    claim_of(_ForksInItsClaim(), "the part")
    if os.getpid() != parent:  # the child got here: what the fix stops
        os._exit(0)
    _, status = os.wait()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == FORKED_CHILD_EXIT


def test_a_fork_no_topicaudit_code_made_is_left_alone():
    """A script's own fork (a pool), with no topicaudit call on the way, runs its child as it wrote it."""
    child = os.fork()
    if child == 0:
        os._exit(5)
    assert os.WEXITSTATUS(os.waitpid(child, 0)[1]) == 5


class _Part:
    """A plug-in part (its module is this test's, not topicaudit's)."""


class _StrFails(Exception):
    def __str__(self):
        raise RuntimeError("str failed")


class _ValueStrFails(ValueError):
    def __str__(self):
        raise RuntimeError("str failed")


class _OwnBase(BaseException):
    pass


@pytest.mark.parametrize("raised, named", [(_StrFails(), "_StrFails"), (_ValueStrFails(), "_ValueStrFails"),
                                           (_OwnBase("its own"), "_OwnBase"), (ValueError("y" * 100_000), "y" * 50)])
def test_a_plug_ins_exception_is_said_as_its_own_in_one_bounded_line(raised, named):
    """str() raising, a BaseException of its own, a ValueError of 100,000 characters: each a PluginCodeError (exit 2
    naming the plug-in), never the internal error (exit 3) nor a megabyte on stderr."""
    with pytest.raises(PluginCodeError) as caught:
        with plugin_code(_Part(), "fit"):
            raise raised
    text = str(caught.value)
    assert named in text and "not topicaudit's" in text and len(text) < 1000


def test_a_plug_ins_readable_refusal_and_an_interrupt_go_on_as_they_are():
    with pytest.raises(ValueError, match="^corpus too large for a dense sampler$") as caught:
        with plugin_code(_Part(), "fit"):
            raise ValueError("corpus too large for a dense sampler")
    assert not isinstance(caught.value, PluginCodeError)
    with pytest.raises(KeyboardInterrupt):
        with plugin_code(_Part(), "fit"):
            raise KeyboardInterrupt


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_report_run_as_root_leaves_another_users_stale_staging_alone(tmp_path):
    """In a shared /tmp the sticky bit does not stop root: another user's folder named and filled like a killed
    report's staging was deleted by root's report beside it."""
    theirs = tmp_path / ".rep.tmp-999999-abc"
    theirs.mkdir()
    (theirs / "report.md").write_text("theirs\n")
    for path in (theirs, theirs / "report.md"):
        os.chown(path, 65534, 65534)
    remove_stale_staging(tmp_path / "rep")
    assert (theirs / "report.md").read_text() == "theirs\n"
    os.chown(theirs, 0, 0)
    os.chown(theirs / "report.md", 0, 0)
    remove_stale_staging(tmp_path / "rep")  # one's own killed report's staging is still cleared
    assert not theirs.exists()


def test_an_exception_from_topicaudits_own_code_under_a_plug_in_is_not_said_to_be_the_plug_ins():
    """A learner subclassing a built-in calls its super().fit; what that raises is topicaudit's line, not the
    plug-in's ("the plug-in's code, not topicaudit's" named topicaudit's own file)."""
    with pytest.raises(PluginCodeError) as caught:
        with plugin_code(_Part(), "fit"):
            Guarantee(epsilon="one")  # topicaudit's own code failing (a TypeError naming the field)
    text = str(caught.value)
    assert "topicaudit's own code" in text and "not topicaudit's" not in text
