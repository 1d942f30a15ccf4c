"""A folder declared topicaudit's own is its own for the command that declared it, not for the whole process.

Hostile pass XIV (F3: G2b, G3b, G5b): in one Python session, once an API call had used a ``--cache DIR`` (or the
default cache, or a report's staging folder), a later call's output below that folder was opened without
following links, though the user named it: ``run(output=proj/out/r1)``, ``proj/out`` the user's link to a larger
disk, was refused ("proj/out is a symbolic link") where a fresh process writes the run where the link points.
"""
from __future__ import annotations

import threading

import topicaudit
from topicaudit import folder_anchors
from topicaudit.engine.check import assert_privacy

SMALL = {"synthetic": {"n_docs": 120, "n_words": 200, "mean_length": 30}, "target": {"k": 3},
         "attack": {"shadows": 0, "canaries": {"count": 20}}}


def test_a_declaration_ends_with_its_command_scope(tmp_path):
    cache = tmp_path / "cache"
    with folder_anchors.command_scope():
        folder_anchors.declare(cache / "runs", cache)
        assert folder_anchors.anchor_of(cache / "runs" / "entry") == (cache, ("runs", "entry"))
    assert folder_anchors.anchor_of(cache / "runs" / "entry") == (cache / "runs" / "entry", ())


def test_one_threads_scope_ending_leaves_anothers_declaration_of_the_same_folder(tmp_path):
    cache = tmp_path / "cache"
    declared, ended = threading.Event(), threading.Event()

    def other():
        with folder_anchors.command_scope():
            folder_anchors.declare(cache / "runs", cache)
            declared.set()
            ended.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    declared.wait(10)
    with folder_anchors.command_scope():
        folder_anchors.declare(cache / "runs", cache)
    assert folder_anchors.anchor_of(cache / "runs" / "x")[0] == cache  # the other thread's command still runs
    ended.set()
    thread.join()
    assert folder_anchors.anchor_of(cache / "runs" / "x")[0] == cache / "runs" / "x"


def test_a_later_api_call_follows_the_users_link_below_an_earlier_calls_cache(tmp_path, monkeypatch, shared_ray):
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    monkeypatch.chdir(tmp_path)
    project, bigdisk = tmp_path / "proj", tmp_path / "bigdisk"
    bigdisk.mkdir()
    assert_privacy(dict(SMALL), epsilon=50, cache=project)  # the run kept in proj/…, declared the cache's own
    (project / "out").symlink_to(bigdisk)  # the user's own link, made after
    results = topicaudit.run({**SMALL, "output": str(project / "out" / "r1")})
    assert results is not None
    assert (bigdisk / "r1" / "results.json").is_file()  # where the user's link points, as a fresh process writes it
    assert (project / "out").is_symlink()

