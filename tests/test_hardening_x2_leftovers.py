"""Hardening X' leftovers: the non-critical findings of hostile pass X' fixed afterwards (N8–N16).

Each finding, and what was done, is in tests/hostile_x2_cases.md ("Not fixed, with what to do").
"""
from __future__ import annotations

from pathlib import Path

import pytest

from topicaudit import api
from topicaudit.errors import UserError


class _BytesPath:
    """A path-like whose ``__fspath__`` gives bytes, as os.PathLike allows."""

    def __fspath__(self):
        return b"/tmp/somewhere"


class _ShiftingPath:
    """A path-like that gives another value each time it is asked."""

    def __init__(self, first: str, then: str):
        self.values, self.calls = [first, then], 0

    def __fspath__(self):
        self.calls += 1
        return self.values[min(self.calls, 2) - 1]


def test_a_path_like_giving_bytes_is_refused_naming_the_argument():
    """N10: bytes from ``__fspath__`` went on and failed later as a TypeError (a traceback)."""
    with pytest.raises(UserError, match="run_dir"):
        api.check(_BytesPath(), epsilon=1.0)


def test_a_path_like_is_read_once_and_the_value_checked_is_the_value_used(tmp_path):
    """N10: the value was checked on one ``__fspath__`` call and used from another, so a name with a NUL could pass."""
    shifting = _ShiftingPath(str(tmp_path / "nothing-here"), "a\0b")
    with pytest.raises(UserError) as caught:
        api.check(shifting, epsilon=1.0)
    assert shifting.calls == 1
    assert "NUL" not in str(caught.value)  # the first value was the one checked and used
