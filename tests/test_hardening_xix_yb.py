"""Hostile pass XIX-yb (tests/hostile_xix_yb_cases.md): the critical defects it found, each fixed with its test."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from linked_cache import planted_by_another_user, untouched_since_2020

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_numba_never_caches_in_its_user_wide_folder_behind_a_link_planted_after_it_was_judged(tmp_path):
    """NU1 (critical (3)): the package's own ``__pycache__`` not writable (a read-only mount of the install; a
    root's install run by another user), so numba caches in its user-wide folder ``$XDG_CACHE_HOME/numba``;
    ``XDG_CACHE_HOME=T/F check RUN``, F absent when ``jit._cache_planted`` judged it (``planted_link`` of the path
    as it was) and nobody's link to V when numba made its folder a moment later (nobody flipping F): V was given
    ``numba/…`` with the kernels. Here the package folder is taken as unwritable (numba's in-tree locator finds no
    place) and the link is planted right after the first judgement."""
    shared, mine = planted_by_another_user(tmp_path)
    script = ("import os, topicaudit.folder_anchors as f\n"
              "from numba.core import caching\n"
              "caching.InTreeCacheLocator.from_function = classmethod(lambda cls, function, file: None)\n"
              "original = f.planted_link\n"
              "def planting(path):\n"
              "    found = original(path)\n"
              "    link = os.environ['XDG_CACHE_HOME']\n"
              "    if not os.path.lexists(link):  # right after the judgement\n"
              "        os.symlink(os.environ['YB_MINE'], link)\n"
              "        os.lchown(link, 65534, 65534)\n"
              "    return found\n"
              "f.planted_link = planting\n"
              "from kernels import twice\n"
              "print(twice(21))\n")
    (tmp_path / "kernels.py").write_text("from topicaudit.jit import njit\n\n\n@njit(cache=True)\ndef twice(x):\n"
                                         "    return 2 * x\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**env, "XDG_CACHE_HOME": str(shared / "F"), "YB_MINE": str(mine)})
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
    assert untouched_since_2020(mine), os.listdir(mine)


def _plant_after_judgement(monkeypatch, link, mine, nth=1):
    """``planted_link`` wrapped (where it is looked up) so that, right after its ``nth`` judgement of a way,
    another user's link to ``mine`` takes the absent name ``link`` (the race nobody's flipper won)."""
    import topicaudit.folder_anchors as anchors
    import topicaudit.owned_folders as owned
    original, calls = anchors.planted_link, [0]

    def planting(path):
        found = original(path)
        calls[0] += 1
        if calls[0] == nth and not os.path.lexists(link):
            os.symlink(mine, link)
            os.lchown(link, 65534, 65534)
        return found
    monkeypatch.setattr(anchors, "planted_link", planting)
    monkeypatch.setattr(owned, "planted_link", planting)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_an_output_folder_is_never_made_behind_a_link_planted_above_it_after_it_was_judged(tmp_path, monkeypatch):
    """HL1 (critical (3)): ``run cA.toml --output /tmp/T/A/b/o``, nobody flipping A between nothing and a link to
    V: ``open_folder`` judged the way (A absent: no link), A became the link, and ``mkdir(parents=True)`` made
    ``V/b/o`` through it before the second judgement refused the output (exit 2, V changed)."""
    from topicaudit.owned_folders import LinkedFolder, open_folder
    shared, mine = planted_by_another_user(tmp_path)
    _plant_after_judgement(monkeypatch, str(shared / "A"), str(mine))
    with pytest.raises(LinkedFolder):
        open_folder(shared / "A" / "b" / "o", create=True).close()
    assert untouched_since_2020(mine), os.listdir(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_a_reports_folders_are_never_made_behind_a_link_planted_above_them(tmp_path, monkeypatch):
    """HL1's cause in ``report -o /tmp/T/A/b/rep``: the folders above the output were made with
    ``mkdir(parents=True)`` after the judgement, through a link planted above them since (``sweep --output`` made
    its output the same way)."""
    from topicaudit.reports.output_folder import write_report
    shared, mine = planted_by_another_user(tmp_path)
    _plant_after_judgement(monkeypatch, str(shared / "A"), str(mine), nth=2)  # after the output's checks
    with pytest.raises(Exception):
        write_report(shared / "A" / "b" / "rep", [], lambda figures: pytest.fail("composed behind the link"))
    assert untouched_since_2020(mine), os.listdir(mine)
