"""pytest plugin: the ``assert_privacy`` fixture, ``check_learner`` and ``parametrize_with_checks``, for a project's
own tests.

Installed with topicaudit (entry point ``pytest11``)::

    def test_our_topic_model_keeps_its_promise(assert_privacy):
        assert_privacy("privacy/audit.toml", epsilon=3, canaries=1000)
        assert_privacy({"attack": {"shadows": 0}}, canaries=1000, learner=OurLearner(k=5, epsilon=3))
        assert_privacy("privacy/dp-cgs.toml", canaries="auto", budget=120)  # 95% power against a 2× bug

Unless ``output`` is given, each call keeps its run in the run cache
(``topicaudit.engine.storage.run_cache``), keyed by everything that can change the
verdict (the configuration, its input files' content, topicaudit's and the
learner's code): a second session with nothing changed reuses the finished
run without refitting, and any change refits. The cache is
``--topicaudit-cache DIR``, else the ini option ``topicaudit_cache`` (relative
to the rootdir), else ``$TOPICAUDIT_CACHE_DIR/runs`` (default
``~/.cache/topicaudit/runs``); with ``TOPICAUDIT_CACHE_DIR=off`` (and neither
option) each call audits in a fresh temporary directory.
``from topicaudit.engine.check import assert_privacy`` gives the same function without pytest.

``check_learner`` is the learner conformance suite (``topicaudit.learner_checks``), in
the spirit of scikit-learn's ``check_estimator``; every built-in learner passes it::

    from topicaudit.testing import check_learner, parametrize_with_checks

    def test_our_learner_conforms():
        check_learner(OurLearner(k=3, n_iter=20))   # AssertionError naming the failed check

    @parametrize_with_checks([OurLearner(k=3, n_iter=20)])   # one test per (learner, check)
    def test_each_check(learner, check):
        check(learner)

A claim too large for its canary audit to test warns with ``UntestableClaimWarning``.

pytest loads this module in every session of every project that installs
topicaudit, so it imports nothing heavy (the engine, numba, scipy.stats,
dp-accounting, Ray) until a fixture or function of it is used: those load on
first use (``__getattr__``, ``importlib``).
"""
from __future__ import annotations

import functools
import importlib
import os
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

import pytest

__all__ = ["UntestableClaimWarning", "assert_privacy_fixture", "check_learner", "parametrize_with_checks"]

# Loaded on first use, from the module that defines them.
_LAZY = {"check_learner": "topicaudit.learner_checks", "UntestableClaimWarning": "topicaudit.learner_checks"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'topicaudit.testing' has no attribute {name!r}")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("topicaudit")
    group.addoption("--topicaudit-cache", metavar="DIR", default=None,
                    help="where the assert_privacy fixture keeps its runs, reused while the configuration, its "
                         "inputs and the learner's code are unchanged ('off': a temporary directory each time; "
                         "default: the ini option topicaudit_cache, else $TOPICAUDIT_CACHE_DIR/runs)")
    parser.addini("topicaudit_cache", "the assert_privacy fixture's run cache (relative to the rootdir)", default="")


def _fixture_cache(config) -> str | None:
    """The run cache the fixture was configured with: the command-line option, else the ini option (relative to
    the rootdir), else None (the default cache)."""
    chosen = config.getoption("topicaudit_cache", None)
    if chosen:
        return chosen
    ini = config.getini("topicaudit_cache")
    if ini:
        return ini if ini.strip().lower() == "off" else str(config.rootpath / ini)
    return None


def _temporary_run(config, tmp_path_factory):
    """A fresh run directory for a call without a cache: in pytest's temporary folder, unless pytest would take
    that folder through another user's link in a shared sticky folder (``$TMPDIR=/tmp/L``, L a link to a folder of
    the user's: pytest resolves it and made ``pytest-of-USER/…`` and the run there, hostile pass XIX-r); then in a
    folder of topicaudit's own where no such link leads (``folder_anchors.temporary_folder``). A ``--basetemp``
    is the user's choice, followed as an ``--output`` is, but not through such a link: ``--basetemp=/tmp/L/bt``
    made (and would first have emptied) the folder of the user's that L names, and the run went there (XIX-t)."""
    anchors = importlib.import_module("topicaudit.folder_anchors")
    given = config.getoption("basetemp", None)
    if given is not None:  # as pytest reads it: against the folder it was started in, `..` by the text
        planted = anchors.planted_link(os.path.abspath(os.path.join(config.invocation_params.dir, given)))
        if planted is not None:
            pytest.fail(f"the assert_privacy fixture's run would go into --basetemp {given}: {planted[0]} is a "
                        f"symbolic link of another user (uid {planted[1]}) to {planted[2]}, in a folder everyone "
                        "may write to (sticky, as /tmp): topicaudit does not follow it; give --basetemp a path "
                        "of your own, or the call an output", pytrace=False)
    else:
        roots = ([os.environ["PYTEST_DEBUG_TEMPROOT"]] if os.environ.get("PYTEST_DEBUG_TEMPROOT") else
                 [tempfile.tempdir] if tempfile.tempdir else
                 [os.environ[name] for name in ("TMPDIR", "TEMP", "TMP") if os.environ.get(name)])
        # a root absent now is no better: another user may make it a link before pytest takes it (XIX-zb, FQ2)
        if any(anchors.planted_link(root) is not None or not os.path.isdir(root) for root in roots):
            place = anchors.temporary_folder()
            if place is None:
                pytest.fail(f"no temporary folder for the assert_privacy fixture's run: {roots[0]} is absent or "
                            "another user's link and no other temporary place is writable; give the call an output, "
                            "or pytest --basetemp", pytrace=False)
            return os.path.join(tempfile.mkdtemp(prefix="topicaudit-", dir=place), "run")
    with anchors.tempfile_without_planted_links():  # pytest's root is tempfile's choice: never through such a link
        return tmp_path_factory.mktemp("topicaudit") / "run"


@pytest.fixture(name="assert_privacy")
def assert_privacy_fixture(request, tmp_path_factory):
    assert_privacy = importlib.import_module("topicaudit.engine.check").assert_privacy  # the engine, on use
    resolve_root = importlib.import_module("topicaudit.engine.storage.run_cache").resolve_root
    cache_place = importlib.import_module("topicaudit.engine.configuration.arguments").cache_place
    configured = _fixture_cache(request.config)

    def check(config=None, epsilon=None, delta=None, alpha=None, output=None, canaries=None, learner=None,
              cache=None, power=None, budget=None):
        # checked as assert_privacy checks it, before it is read here: NumPy's False was a TypeError (XIX-zl)
        cache = configured if cache is None else cache_place(cache)
        if output is None and resolve_root(cache) is None:  # no cache: a fresh temporary directory
            output = _temporary_run(request.config, tmp_path_factory)
        return assert_privacy(config, epsilon, delta, alpha, output=output, canaries=canaries, learner=learner,
                              cache=cache, power=power, budget=budget)

    return check


def parametrize_with_checks(learners: Iterable[Any],
                            expected_failures: dict[str, str] | Callable[[Any], dict[str, str]] | None = None):
    """A ``pytest.mark.parametrize`` over every (learner, conformance check), like scikit-learn's of the same name.

    The test takes ``learner`` and ``check`` and calls ``check(learner)``; each
    runs one check of ``check_learner`` (``topicaudit.learner_checks.CHECKS``),
    with ids such as ``ZhuDPCollapsedGibbsLDA(k=3,epsilon=1.0)-canary audit``.
    expected_failures: check name → why it is expected to fail, for every
    learner, or a function of the learner giving that mapping; those tests are
    marked ``xfail(strict=True)``, so a check that starts passing is reported
    and the declaration can be removed; only the check's own finding is that
    failure (``CheckFailed``): a check the learner's code crashed fails the test.
    """
    checks = importlib.import_module("topicaudit.learner_checks")  # the suite, when a test module asks for it
    if isinstance(learners, (str, bytes)) or not hasattr(learners, "__iter__"):
        # "abc" was three learners a, b, c (hostile pass XIX-zi, N10)
        raise TypeError(f"learners must be a list of learner objects (got {type(learners).__name__}); "
                        "pass [learner] for one")
    if not (expected_failures is None or callable(expected_failures) or isinstance(expected_failures, dict)):
        raise TypeError("expected_failures must be a dict of check name → why it fails, or a function of the "
                        f"learner giving one (got {type(expected_failures).__name__})")
    params = []
    for learner in learners:
        declared = expected_failures(learner) if callable(expected_failures) else dict(expected_failures or {})
        unknown = sorted(set(declared) - set(checks.CHECKS))
        if unknown:
            raise ValueError(f"expected_failures names unknown check(s) {', '.join(map(repr, unknown))}; "
                             f"the checks: {', '.join(checks.CHECKS)}")
        label = checks.describe(learner).replace(", ", ",")
        for name in checks.CHECKS:
            # Only the check's finding is the declared failure: a check that crashed (CheckDidNotFinish) read as
            # XFAIL "not private yet", so a learner that no audit ever ran on passed as expected (hostile pass XIX-p).
            marks = ([pytest.mark.xfail(reason=declared[name], strict=True, raises=checks.CheckFailed)]
                     if name in declared else [])
            params.append(pytest.param(learner, functools.partial(checks.check_learner, checks=(name,)),
                                       id=f"{label}-{name}", marks=marks))
    return pytest.mark.parametrize("learner, check", params)
