"""The command line and a local Ray instance's workers wait passively in OpenMP (OMP_WAIT_POLICY=passive) unless
the user set the policy: the quantile-regression attack's OpenMP threads then sleep instead of spinning against each
other on a busy machine. No number changes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine import parallel

TINY = {"text": ["cats dogs mice run", "dogs bark at cats", "mice run from cats", "cats sleep dogs run",
                 "dogs chase mice home", "mice hide from dogs"] * 4}
# libgomp's spin count for each policy, as OMP_DISPLAY_ENV=VERBOSE prints it: unset (its default), passive, active.
SPINS = {None: "300000", "passive": "0", "active": "30000000000"}
CONSOLE = Path(sys.executable).with_name("topicaudit")


@pytest.mark.parametrize("user, expected", [(None, "passive"), ("active", "active"), ("PASSIVE", "PASSIVE")])
def test_the_command_line_waits_passively_unless_the_user_said_otherwise(monkeypatch, user, expected):
    if user is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", user)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert os.environ["OMP_WAIT_POLICY"] == expected


def test_no_openmp_runtime_is_loaded_before_the_command_line_sets_the_policy():
    """The policy is read when an OpenMP runtime loads: nothing the command line imports before it runs may load one."""
    probe = ("import topicaudit.cli.main, topicaudit.cli.supervisor; "
             "maps = open('/proc/self/maps').read(); "
             "print([lib for lib in ('libgomp', 'libiomp', 'libomp') if lib in maps])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("user, expected", [(None, "passive"), ("active", "active")])
def test_a_local_ray_instances_workers_get_the_policy(monkeypatch, user, expected):
    if user is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", user)
    environment = parallel.local_environment()
    assert environment["OMP_WAIT_POLICY"] == expected
    assert environment["OMP_NUM_THREADS"] == "1"
    assert ("OMP_WAIT_POLICY" in os.environ) == (user is not None)  # the driver's own environment is not changed


@pytest.mark.skipif(not sys.platform.startswith("linux") or not CONSOLE.exists(), reason="libgomp and the console script")
def test_the_attacks_openmp_runtime_sees_the_passive_policy(tmp_path):
    """End to end: ``topicaudit run`` as a user starts it, without OMP_WAIT_POLICY; libgomp, loaded by the
    quantile-regression attack in the driver, reports its spin count (OMP_DISPLAY_ENV=VERBOSE): passive's 0."""
    corpus = tmp_path / "tiny.json"
    corpus.write_text(json.dumps(TINY))
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    done = subprocess.run([str(CONSOLE), "run", "--corpus", str(corpus), "--no-preprocess", "--k", "2", "--shadows",
                           "2", "--num-cpus", "2", "--output", str(tmp_path / "run"), "--quiet"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    spins = [line.split("=", 1)[1].strip().strip("'") for line in done.stderr.splitlines()
             if line.strip().startswith("GOMP_SPINCOUNT")]
    assert spins and set(spins) == {SPINS["passive"]}, done.stderr[-2000:]
