"""Fixtures shared by the test modules: where the real corpora are, and one finished small audit.

The real corpora live in ``../shared/data`` beside the repository and are read
in place; a test that needs one asks for its fixture (``pheme_path``, ``kos_path``,
``shared_file(...)``, ``shared_data``) and is skipped, with the path, where it
is absent — failed in CI, where ``TOPICAUDIT_REQUIRE_DATA=1``.

``finished_run`` is one small synthetic audit with real Ray (8 shadow models),
run once per session and shared by the modules that only read its outputs
(the engine's files, ``check``, the ROC figure). Tests may add what ``check``
and the ROC figure write beside its files, never change or resume it: a test
that does makes its own run.

``shared_ray`` is one local Ray instance (two CPUs) that the runs made in the
test process join, as a library caller's runs join the Ray it initialised,
instead of each paying for a start, a stop and cold workers. Starting a local
instance is still tested wherever ``topicaudit`` runs as its own process; a
test that needs Ray uninitialised in this process asks for ``own_ray``, and
such tests run at the end of the session.
"""
from __future__ import annotations

import atexit
import copy
import os
import shutil
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from topicaudit.engine import power
from topicaudit.engine.execution import parallel
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.execution.parallel import ray_session
from topicaudit.engine.run import execute_run

# OpenMP threads spin while they wait; on a machine running other work they spin against each other (the quantile
# attack's scoring once took 30 s instead of 1 at load 8 on 2 cores, before it ran on one thread). Tests run beside
# other jobs, so any OpenMP user they reach waits passively. Set before anything loads OpenMP; the commands the
# tests start inherit it. No number changes.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# The corpus cache of the test session (and of the commands it starts) lives in a directory of its own, never the
# user's ~/.cache; tests of the cache itself point it elsewhere.
if "TOPICAUDIT_CACHE_DIR" not in os.environ:
    os.environ["TOPICAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="topicaudit-test-cache-")
    atexit.register(shutil.rmtree, os.environ["TOPICAUDIT_CACHE_DIR"], True)

# No integrity key unless the session sets one on purpose: a developer's ~/.config/topicaudit/integrity.key would
# otherwise authenticate every run here and change what the tests that forge manifests see. Tests of the key set
# their own (tests/test_hardening_v.py).
os.environ.setdefault("TOPICAUDIT_INTEGRITY_KEY", "off")

REPO = Path(__file__).resolve().parents[1]
# tests/packages holds packages that are not topicaudit's (docs/adding-a-learner.md's dpem-topics), with test modules
# of their own that import them: a test installs such a package and runs them, the session never collects them.
collect_ignore = ["packages"]
SHARED_DATA = REPO.parent / "shared" / "data"
PHEME = SHARED_DATA / "pheme" / "pheme_clean.json"
KOS = SHARED_DATA / "kos" / "docword.kos.txt"

# The small audit: 300 synthetic LDA documents, 8 shadow models, k = 4, two Ray workers.
SMALL_RUN = {"synthetic": {"n_docs": 300, "n_words": 1000, "mean_length": 40}, "attack": {"shadows": 8},
             "target": {"k": 4}, "ray": {"num_cpus": 2}}


def _shared_file(*parts: str) -> Path:
    """``../shared/data/<parts>``, or skip the test saying which file is absent; in CI
    (``TOPICAUDIT_REQUIRE_DATA=1``, set by .ci/run) an absent file fails the test instead: the real-data
    tests are the suite's point there, not an option."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        message = f"real data {path} is absent (../shared/data lives beside the repository)"
        if os.environ.get("TOPICAUDIT_REQUIRE_DATA") == "1":
            pytest.fail(message + "; TOPICAUDIT_REQUIRE_DATA=1 requires it", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder (skips without it)."""
    return _shared_file()


@pytest.fixture(scope="session")
def shared_file():
    """A function: ``shared_file("kos", "vocab.kos.txt")`` is that file in ../shared/data, or the test is skipped."""
    return _shared_file


@pytest.fixture(scope="session")
def pheme_path() -> Path:
    """The paper's cleaned PHEME corpus (5,698 tweets; skips without it)."""
    return _shared_file("pheme", "pheme_clean.json")


@pytest.fixture(scope="session")
def kos_path() -> Path:
    """The UCI KOS corpus's counts (skips without it)."""
    return _shared_file("kos", "docword.kos.txt")


def make_small_config(directory: Path, name: str = "small", **extra) -> Config:
    """The small audit's configuration writing to ``directory / name``; ``extra`` updates its sections or keys."""
    data = copy.deepcopy(SMALL_RUN)
    for key, value in extra.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    data["output"] = str(Path(directory) / name)
    return config_from_dict(data)


@contextmanager
def power_search_cut_short():
    """While it lasts, the search for the canary count a CONSISTENT (or underpowered) mechanism audit suggests stops
    after the first count it simulates: ``check`` otherwise simulates ever larger designs for up to
    ``POWER_SEARCH_SECONDS`` (10 s, more with the last simulation), all of it advice no test of the verdict reads.
    The verdict, its bounds and its power estimate are the same; only the suggestion reads "the search … stopped
    at". Tests of the search itself (tests/test_guidance.py, tests/test_sizing.py, docs/check.md's quoted line)
    run it whole."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(power, "POWER_SEARCH_SECONDS", 0.0)
        yield


@pytest.fixture
def short_power_search():
    """``power_search_cut_short`` for one test."""
    with power_search_cut_short():
        yield


@pytest.fixture(scope="session")
def small_config():
    """``make_small_config``: the small audit's configuration, in a directory of the test's choosing."""
    return make_small_config


@pytest.fixture
def small_settings() -> dict:
    """The small audit's settings as a TOML-shaped dict (a fresh copy each time)."""
    return copy.deepcopy(SMALL_RUN)


class SharedRay:
    """The session's local Ray instance: started on first use, kept until the session ends or a test needs none."""

    def __init__(self):
        self._session: ExitStack | None = None

    def start(self) -> None:
        if self._session is not None:
            return
        # A library caller's session, whoever asks first: a command line run in-process (as many tests do) would
        # have it end pytest if the raylet died.
        session = ExitStack()
        with parallel.ray_behaviour(parallel.RayBehaviour()):
            session.enter_context(ray_session("", num_cpus=2))
        self._session = session

    def stop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()


# Tests that took over 4 s each in a full run on 2 cores (tests/slow_tests.txt says which run): marked slow, so the
# default run (CI's) keeps to its time; `bash tests/run.sh -m slow` runs them, as the benchmarks record.
SLOW_TESTS = Path(__file__).with_name("slow_tests.txt")


def _listed_slow() -> set[str]:
    lines = SLOW_TESTS.read_text(encoding="utf-8").splitlines() if SLOW_TESTS.is_file() else []
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)  # before ``-m 'not slow'`` deselects by mark
def pytest_collection_modifyitems(items):
    """Tests listed in tests/slow_tests.txt (a test's id, or its function's for every parameter) are marked slow;
    tests that need Ray uninitialised (``own_ray``) run last, so the shared instance starts only once."""
    slow = _listed_slow()
    for item in items:
        if item.nodeid in slow or item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: "own_ray" in getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session")
def ray_holder() -> SharedRay:
    """The shared local Ray instance, not started yet: module fixtures that run audits call its ``start()``."""
    holder = SharedRay()
    yield holder
    holder.stop()


@pytest.fixture
def shared_ray(ray_holder) -> None:
    """The shared local Ray instance, running: runs in this process join it (``ray_session`` uses it as it is)."""
    ray_holder.start()


@pytest.fixture
def own_ray(ray_holder) -> None:
    """No Ray initialised in this process: the test's run starts (or fails to start) its own local instance."""
    ray_holder.stop()


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, ray_holder) -> tuple[Config, dict]:
    """(configuration, results) of the small audit, run once per session; never change or resume it."""
    ray_holder.start()
    config = make_small_config(tmp_path_factory.mktemp("finished"))
    return config, execute_run(config, quiet=True)


@pytest.fixture(autouse=True)
def _signals_as_a_fresh_process_has_them():
    """Each test starts with no signal blocked in this process: a child a test starts inherits the mask, and a
    command that held its signals in-process (the supervisor's code paths) must not leave them held for the
    signal tests that run later (they passed alone and failed after the whole suite)."""
    import signal
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGCHLD})
    yield
