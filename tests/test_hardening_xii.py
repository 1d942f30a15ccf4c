"""Hardening XII (issue 32, hostile pass XII): what it found. Every case it ran is in tests/hostile_xii_cases.md.

Critical (a crash-born exit 0): a learner that calls ``sys.exit(0)`` (or ``sys.exit()``, or ``os._exit(0)``) in
its fit — as code built on a command-line library may — ended ``topicaudit check CONFIG`` with exit 0, nothing
printed and no check.json: a CI gate passed on an audit that never ran. The command line took any SystemExit
with code 0 for success, and the supervising process passed on every exit 0 it saw.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.check import assert_privacy

# A learner that ends the process as some libraries do; EXIT says how.
LEARNER = textwrap.dedent("""
    import os, sys
    from topicaudit.targets.learners.lda import VariationalLDA

    class Exits(VariationalLDA):
        def fit(self, X, seed):
            how = os.environ["EXIT"]
            if how == "os._exit":
                os._exit(0)
            sys.exit(None if how == "none" else int(how))
""")
SMALL = {"synthetic": {"n_docs": 200, "n_words": 300, "k": 3}, "target": {"k": 3, "learner": "exiting_learner:Exits"},
         "attack": {"shadows": 0, "canaries": {"count": 40}}}


@pytest.fixture
def exiting_learner(tmp_path, monkeypatch):
    (tmp_path / "exiting_learner.py").write_text(LEARNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "exits.toml"
    config.write_text('[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nk = 3\n'
                      'learner = "exiting_learner:Exits"\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 40\n')
    return config


@pytest.mark.parametrize("how", ["0", "none"])
def test_a_learner_calling_sys_exit_0_is_no_verdict(exiting_learner, tmp_path, monkeypatch, capsys, how):
    monkeypatch.setenv("EXIT", how)
    code = main(["check", str(exiting_learner), "--epsilon", "1", "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 3 and "internal error" in err, (code, err)  # was 0, nothing said
    assert not (tmp_path / "run" / "check.json").exists()


@pytest.mark.parametrize("how", ["0", "none"])
def test_assert_privacy_turns_a_learners_sys_exit_into_no_verdict(exiting_learner, tmp_path, monkeypatch, how):
    """A script `assert_privacy(...)` whose learner called sys.exit(0) exited 0: read as a pass."""
    monkeypatch.setenv("EXIT", how)
    with pytest.raises(RuntimeError, match="no verdict"):
        assert_privacy(str(exiting_learner), epsilon=1, output=tmp_path / "run")


SUPERVISED = """
import os, sys
from topicaudit.cli import supervisor
def body():
    {body}
sys.exit(supervisor.supervise(body, ["check"]))
"""


@pytest.mark.parametrize("body, code, line", [
    ("os._exit(0)", 3, "exited 0 before the command finished"),  # a learner's os._exit(0), a native exit(0)
    ("supervisor.tell(supervisor.RAY_IN_USE); os._exit(0)", 4, "the Ray runtime ended the process with exit 0"),
    ("return 0", 0, None),
    ("raise SystemExit(0)", 0, None),  # argparse's own exit (--help, --version) keeps its code
    ("print('CONSISTENT: x'); return 0", 0, None),
])
def test_the_supervisor_passes_on_only_the_exit_0_its_command_gave(body, code, line):
    done = subprocess.run([sys.executable, "-c", SUPERVISED.format(body=body)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == code, done.stderr
    if line:
        assert line in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr


def test_the_console_script_says_help_and_version_with_exit_0():
    for flag in (["--version"], ["check", "--help"]):
        done = subprocess.run([str(Path(sys.executable).parent / "topicaudit"), *flag], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and done.stdout, (flag, done.stderr)
