"""A plug-in's code is walked and digested once per command, and afresh by the next command.

A run asked for the digest about five times (the configuration's identity, the run cache's key, results.json),
each a walk of every folder beside the plug-in: 2–3 s each beside a large tree. One command now keys every lookup
by the code it read first; a later call of the API, after the user edited the plug-in, reads the edit.
"""
from __future__ import annotations

import sys

import pytest

from topicaudit.folder_anchors import command_scope
from topicaudit.targets import plugin_code

LEARNER = "class L:\n    def __init__(self, k):\n        self.k = k\n"


@pytest.fixture
def plug_in(tmp_path, monkeypatch):
    before = set(sys.modules)
    (tmp_path / "onceplug.py").write_text(LEARNER)
    (tmp_path / "noise.py").write_text("SCALE = 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    walks = []
    located = plugin_code._located
    monkeypatch.setattr(plugin_code, "_located", lambda *a: walks.append(a[0]) or located(*a))
    yield tmp_path, walks
    for name in set(sys.modules) - before:
        sys.modules.pop(name, None)


def test_one_command_walks_the_plug_ins_folders_once(plug_in):
    folder, walks = plug_in
    with command_scope():
        first = plugin_code.code_digest("onceplug:L")
        assert plugin_code.code_digest("onceplug:L") == first
        assert folder / "noise.py" in plugin_code.code_files("onceplug:L")
    assert walks == ["onceplug:L"]


def test_the_next_command_reads_an_edit_made_between_them(plug_in):
    folder, walks = plug_in
    with command_scope():
        before = plugin_code.code_digest("onceplug:L")
    (folder / "noise.py").write_text("SCALE = 0.5\n")  # the helper beside the learner: half the noise
    with command_scope():
        assert plugin_code.code_digest("onceplug:L") != before
    assert len(walks) == 2


def test_outside_a_command_nothing_is_kept(plug_in):
    folder, walks = plug_in
    before = plugin_code.code_digest("onceplug:L")
    (folder / "noise.py").write_text("SCALE = 0.5\n")
    assert plugin_code.code_digest("onceplug:L") != before
