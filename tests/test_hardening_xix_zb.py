"""Hostile pass XIX, helper zb (tests/hostile_xix_zb_cases.md): a closing pass on user files, links and exit codes.

- FQ2 (critical (3)): the ``assert_privacy`` fixture without a cache judged pytest's temporary root
  (``TMPDIR=/tmp/T/F``) while F was absent, and pytest's ``tmp_path_factory`` took the root a moment later, when
  another user had made F a link to a folder of the user's: ``V/pytest-of-root/…/topicaudit0/run`` was written.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from linked_cache import untouched_since_2020

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_the_fixtures_run_never_follows_a_tmpdir_link_planted_after_the_look(tmp_path, monkeypatch):
    from topicaudit.testing import _temporary_run
    shared, mine, own = tmp_path / "T", tmp_path / "V", tmp_path / "own"
    for folder in (shared, mine, own):
        folder.mkdir()
    shared.chmod(0o1777)
    os.utime(mine, (1577836800, 1577836800))
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT", raising=False)
    monkeypatch.setenv("TMPDIR", str(shared / "F"))  # absent when the fixture looks
    monkeypatch.setenv("TEMP", str(own))
    monkeypatch.setattr(tempfile, "tempdir", None)

    class PytestsOwn:  # what pytest's tmp_path_factory does, once another user has made F a link to V
        def mktemp(self, name):
            (shared / "F").symlink_to(mine)
            os.lchown(shared / "F", 65534, 65534)
            root = Path(tempfile.gettempdir()).resolve() / "pytest-of-root"
            root.mkdir(exist_ok=True)
            made = root / f"{name}0"
            made.mkdir()
            return made

    _temporary_run(SimpleNamespace(getoption=lambda name, default=None: None), PytestsOwn())
    assert untouched_since_2020(mine)
