"""pytest plugin: the ``assert_privacy`` fixture for a project's own privacy regression tests.

Installed with topicaudit (entry point ``pytest11``)::

    def test_our_topic_model_keeps_its_promise(assert_privacy):
        assert_privacy("privacy/audit.toml", epsilon=3, canaries=1000)

Each call audits in a fresh temporary run directory unless ``output`` is given.
``from topicaudit.engine.check import assert_privacy`` gives the same function without pytest.
"""
from __future__ import annotations

import pytest

from topicaudit.engine.check import assert_privacy as _assert_privacy


@pytest.fixture(name="assert_privacy")
def assert_privacy_fixture(tmp_path_factory):
    def check(config, epsilon=None, delta=None, alpha=None, output=None, canaries=None):
        output = output if output is not None else tmp_path_factory.mktemp("topicaudit") / "run"
        return _assert_privacy(config, epsilon, delta, alpha, output=output, canaries=canaries)

    return check
