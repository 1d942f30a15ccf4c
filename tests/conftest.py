"""Fixtures shared by the test modules: where the real corpora are, and one finished small audit.

The real corpora live in ``../shared/data`` beside the repository and are read
in place; a test that needs one asks for its fixture (``pheme_path``, ``kos_path``,
``shared_file(...)``, ``shared_data``) and is skipped, with the path, where it
is absent.

``finished_run`` is one small synthetic audit with real Ray (8 shadow models),
run once per session and shared by the modules that only read its outputs
(the engine's files, ``check``, the ROC figure). Tests may add what ``check``
and the ROC figure write beside its files, never change or resume it: a test
that does makes its own run.
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from topicaudit.engine.config import Config, config_from_dict
from topicaudit.engine.run import execute_run

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
PHEME = SHARED_DATA / "pheme" / "pheme_clean.json"
KOS = SHARED_DATA / "kos" / "docword.kos.txt"

# The small audit: 300 synthetic LDA documents, 8 shadow models, k = 4, two Ray workers.
SMALL_RUN = {"synthetic": {"n_docs": 300, "n_words": 1000, "mean_length": 40}, "attack": {"shadows": 8},
             "target": {"k": 4}, "ray": {"num_cpus": 2}}


def _shared_file(*parts: str) -> Path:
    """``../shared/data/<parts>``, or skip the test saying which file is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data {path} is absent (../shared/data lives beside the repository)")
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


@pytest.fixture(scope="session")
def small_config():
    """``make_small_config``: the small audit's configuration, in a directory of the test's choosing."""
    return make_small_config


@pytest.fixture
def small_settings() -> dict:
    """The small audit's settings as a TOML-shaped dict (a fresh copy each time)."""
    return copy.deepcopy(SMALL_RUN)


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> tuple[Config, dict]:
    """(configuration, results) of the small audit, run once per session; never change or resume it."""
    config = make_small_config(tmp_path_factory.mktemp("finished"))
    return config, execute_run(config, quiet=True)
