"""Hostile pass XIX-y (tests/hostile_xix_y_cases.md): the critical defects it found, each fixed with its test."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from linked_cache import planted_by_another_user, untouched_since_2020

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

# A script that judges matplotlib's folders with ``planted_link`` wrapped so that, right after the folder named by
# ``XY_PLANT`` was judged absent, another user's link to V takes its place (the race nobody's flipper won), then
# imports matplotlib's font manager, which makes its folders and writes its font list.
_PLANT_AFTER_JUDGEMENT = (
    "import os, topicaudit.folder_anchors as f\n"
    "import topicaudit.engine.presentation.roc_figure as r\n"
    "original = f.planted_link\n"
    "seen = [0]\n"
    "def planting(path):\n"
    "    found = original(path)\n"
    "    seen[0] += str(path) == os.environ['XY_LAST']\n"
    "    link = os.environ['XY_PLANT']\n"
    "    if seen[0] == int(os.environ['XY_NTH']) and not os.path.lexists(link):  # right after the last judgement\n"
    "        os.symlink(os.environ['XY_MINE'], link)\n"
    "        os.lchown(link, 65534, 65534)\n"
    "    return found\n"
    "r.planted_link = f.planted_link = planting\n"
    "r._no_planted_matplotlib_folders()\n"
    "import matplotlib.font_manager\n")


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
@pytest.mark.parametrize("variables", [("XDG_CONFIG_HOME", "XDG_CACHE_HOME"), ("HOME",)])
def test_matplotlib_never_writes_behind_a_home_planted_after_its_folders_were_judged(tmp_path, variables):
    """FM1, FM2 (critical (c)): ``XDG_CONFIG_HOME=T/F XDG_CACHE_HOME=T/F report RUN -o rep`` (or ``HOME=T/F``), F
    absent when topicaudit judged matplotlib's default folders and nobody's link to V when matplotlib made them
    (nobody flipping F): ``V/matplotlib/fontlist-v3.11.0.json`` was written. XIX-w fixed the same race for a set
    ``MPLCONFIGDIR`` only."""
    shared, mine = planted_by_another_user(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    env.update({name: str(shared / "F") for name in variables})
    last = str(shared / "F" / (".cache/matplotlib" if variables == ("HOME",) else "matplotlib"))
    env.update({"XY_PLANT": str(shared / "F"), "XY_MINE": str(mine), "XY_LAST": last,
                "XY_NTH": str(len(variables) if variables != ("HOME",) else 1)})
    done = subprocess.run([sys.executable, "-c", _PLANT_AFTER_JUDGEMENT], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert untouched_since_2020(mine), os.listdir(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_rays_token_folder_is_never_made_behind_a_home_planted_after_it_was_judged(tmp_path):
    """RT1 (critical (c)): ``HOME=T/F run c2.toml`` (a local Ray: 2 shadows), F absent when topicaudit judged
    ``~/.ray`` and nobody's link to V when Ray made its token (nobody flipping F): ``V/.ray/auth_token`` was written.
    Here the link is planted right after the judgement, and Ray's own making of its token folder
    (``os.makedirs(~/.ray)``, the token written in it) follows a judgement that let it."""
    shared, mine = planted_by_another_user(tmp_path)
    script = ("import os, topicaudit.folder_anchors as f\n"
              "import topicaudit.engine.execution.ray_local as r\n"
              "from topicaudit.errors import UserError\n"
              "original = f.planted_link\n"
              "def planting(path):\n"
              "    found = original(path)\n"
              "    link = os.environ['HOME']\n"
              "    if not os.path.lexists(link):  # right after the judgement\n"
              "        os.symlink(os.environ['XY_MINE'], link)\n"
              "        os.lchown(link, 65534, 65534)\n"
              "    return found\n"
              "r.planted_link = f.planted_link = planting\n"
              "try:\n"
              "    r.check_token_folder()\n"
              "except UserError as refused:\n"
              "    print('refused:', refused)\n"
              "else:  # what Ray does next when no token is given\n"
              "    folder = os.path.expanduser('~/.ray')\n"
              "    os.makedirs(folder, exist_ok=True)\n"
              "    with open(os.path.join(folder, 'auth_token'), 'w') as token:\n"
              "        token.write('0' * 64)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update({"HOME": str(shared / "F"), "XY_MINE": str(mine)})
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert untouched_since_2020(mine), os.listdir(mine)


@pytest.mark.skipif(not ROOT, reason="giving a link to another user needs root")
def test_the_phase_trace_is_never_created_behind_a_folder_planted_after_it_was_judged(tmp_path):
    """PT2 (critical (c)): ``TOPICAUDIT_PHASE_TRACE=T/G/trace.txt check RUN …``, G absent when the trace's folder was
    judged and nobody's link to V when the trace was opened (nobody flipping G): ``V/trace.txt`` was created and
    written. The link is planted right after the judgement here."""
    shared, mine = planted_by_another_user(tmp_path)
    script = ("import os, topicaudit.folder_anchors as f\n"
              "import topicaudit.engine.execution.phases as p\n"
              "original = f.planted_link\n"
              "def planting(path):\n"
              "    found = original(path)\n"
              "    link = os.environ['XY_PLANT']\n"
              "    if not os.path.lexists(link):  # right after the judgement\n"
              "        os.symlink(os.environ['XY_MINE'], link)\n"
              "        os.lchown(link, 65534, 65534)\n"
              "    return found\n"
              "p.planted_link = f.planted_link = planting\n"
              "p._append({'phase': 'x'})\n")
    env = {**os.environ, "TOPICAUDIT_PHASE_TRACE": str(shared / "G" / "trace.txt"), "XY_PLANT": str(shared / "G"),
           "XY_MINE": str(mine)}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert untouched_since_2020(mine), os.listdir(mine)
