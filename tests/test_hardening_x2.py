"""Hardening X' (issue 32, a second independent fresh hostile pass: processes, terminals, parsing, the API boundary).

Every case the pass ran, with what was expected and what happened, is in tests/hostile_x2_cases.md.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from topicaudit.cli.main import main
from topicaudit.engine.check import assert_privacy
from topicaudit.errors import UserError
from topicaudit.inputs import integrity_key
from topicaudit.inputs.user_model import load_user_model
from topicaudit.inputs.vocabulary_file import read_vocabulary
from topicaudit.targets.learners.lda import VariationalLDA

# The supervised stand-in for `check`: after ~3 s it gives a VIOLATED verdict (exit 1), unless stopped first.
SESSION_LEADER = textwrap.dedent("""
    import os, sys, time
    from topicaudit.cli import supervisor

    def command():
        os.write(1, b"ready\\n")
        time.sleep(3)
        supervisor.tell(supervisor.VERDICT)
        return 1

    sys.exit(supervisor.supervise(command))
""")


# A fresh terminal session around it (forked from a clean process: pytest's own holds threads and signal settings).
TERMINAL = textwrap.dedent("""
    import os, pty, select, sys, time
    pid, master = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
    seen, deadline = b"", time.monotonic() + 30
    while b"ready" not in seen and time.monotonic() < deadline:
        if select.select([master], [], [], 1)[0]:
            try:
                seen += os.read(master, 1024)
            except OSError:
                break
    os.close(master)  # the terminal goes away
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status) if b"ready" in seen else f"never ready: {seen!r}")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal's hang-up, as Linux sends it")
def test_a_terminal_hang_up_stops_a_command_whose_supervisor_leads_the_session():
    """A closed terminal (`ssh -t HOST topicaudit check …`, `setsid`, `pty.fork`) sends SIGHUP to the session leader
    alone, with si_code SI_KERNEL, like a terminal's Ctrl-C. The supervisor took it for one that had reached the
    command already and did not pass it on: the command ran to its end (exit 1 here, VIOLATED) where
    docs/exit-codes.md promises a hang-up stops it as SIGTERM does (130)."""
    ended = subprocess.run([sys.executable, "-c", TERMINAL, SESSION_LEADER], capture_output=True, text=True,
                           timeout=60)
    assert ended.stdout.strip() == "130", (ended.stdout, ended.stderr)


class LearnerWithAFailingAssert(VariationalLDA):
    """A user's learner whose own sanity check fails in its fit."""

    def fit(self, X, seed):
        assert X.shape[0] < 0, "the learner's own sanity check failed"
        return super().fit(X, seed)


def test_a_learners_own_failing_assert_is_no_violated_verdict_from_assert_privacy(tmp_path, monkeypatch):
    """`assert_privacy` raises AssertionError for VIOLATED, and the docs say so: a learner's `assert` failing inside
    its fit came out as that same AssertionError (in pytest, the privacy test failing as if the claim were refuted;
    to code catching AssertionError, a refuted claim). Now an error that says no verdict was given."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    config = {"target": {"k": 3}, "attack": {"shadows": 0, "canaries": {"count": 20}}}
    with pytest.raises(Exception) as raised:
        assert_privacy(config, epsilon=50, learner=LearnerWithAFailingAssert(k=3), cache=False,
                       output=tmp_path / "run")
    assert not isinstance(raised.value, AssertionError), raised.value
    assert "sanity check" in str(raised.value) and "not topicaudit's" in str(raised.value)  # the learner's, named


@pytest.mark.parametrize("tolerance", [float("inf"), float("nan"), 0.0, -1.0])
def test_an_infinite_row_sum_tolerance_is_refused(tmp_path, tolerance):
    """`audit --tolerance inf` turned the row-sum check off: any non-negative matrix was taken as Φ."""
    phi = np.full((2, 3), 5.0)  # rows sum to 15
    np.save(tmp_path / "phi.npy", phi)
    (tmp_path / "vocab.txt").write_text("a\nb\nc\n")
    with pytest.raises(UserError, match="tolerance"):
        load_user_model(tmp_path / "phi.npy", tmp_path / "vocab.txt", tolerance=tolerance)


def test_a_json_corpus_or_vocabulary_holding_a_5000_digit_number_is_one_line_not_an_internal_error(tmp_path):
    """Python refuses to read an integer of over 4,300 digits (a ValueError that is no JSONDecodeError): a JSON
    corpus with one in any field was exit 3, "internal error (a bug)"."""
    corpus = tmp_path / "c.json"
    corpus.write_text('{"text": ["alpha beta", "gamma delta"], "n": ' + "9" * 5000 + "}")
    assert main(["run", "--corpus", str(corpus), "--no-preprocess", "--shadows", "0", "--canaries", "20", "--k", "2",
                 "--output", str(tmp_path / "out"), "--quiet"]) == 2
    vocabulary = tmp_path / "v.json"
    vocabulary.write_text('["alpha", ' + "9" * 5000 + "]")
    with pytest.raises(UserError, match="v.json"):
        read_vocabulary(vocabulary)
