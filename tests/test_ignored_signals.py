"""A signal the command was started with ignored stays ignored, at every moment of the command.

``nohup topicaudit run …`` starts it with SIGHUP ignored, a script's background job (``topicaudit check … &``) with
SIGINT ignored. The console script holds its signals from its first instruction, and Linux keeps a held signal
pending even when it is ignored: the supervising parent's ``sigwaitinfo`` took it for a stop (exit 130, "interrupted"),
and the command itself installed its own handlers over the ignored ones. Only a signal that landed before the
signals were held was lost, as it should be — so the earlier test, one signal at 1.5 s, passed or failed with the
machine's speed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
LAUNCHER, ENTRY = BIN / "topicaudit", BIN / "topicaudit-python"
ENV = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, signals and a POSIX launcher")


@pytest.fixture(scope="module")
def refuted_run(tmp_path_factory) -> Path:
    """A run whose canaries prove ε ≥ 2.2: `check --epsilon 0.01` is VIOLATED."""
    out = tmp_path_factory.mktemp("ignored") / "run"
    subprocess.run([str(LAUNCHER), "run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(out),
                    "--quiet"], capture_output=True, env=ENV, timeout=600, check=True)
    return out


def _check_under_a_stream_of(sig: int, program: Path, run: Path, group: bool) -> tuple[int, str, str]:
    """`check RUN --epsilon 0.01` started with ``sig`` ignored, sent ``sig`` every 50 ms from its start to its end
    (to its process, or to its whole process group as a terminal does)."""
    process = subprocess.Popen([str(program), "check", str(run), "--epsilon", "0.01"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True,
                               preexec_fn=lambda: signal.signal(sig, signal.SIG_IGN))
    sent, deadline = 0, time.monotonic() + 240
    while process.poll() is None and time.monotonic() < deadline:
        try:
            os.killpg(process.pid, sig) if group else process.send_signal(sig)
            sent += 1
        except ProcessLookupError:
            break
        time.sleep(0.05)
    out, err = process.communicate(timeout=60)
    assert sent > 5, "the command ended before the signals were sent"
    return process.returncode, out, err


@pytest.mark.parametrize("sig", ["SIGINT", "SIGHUP"])
@pytest.mark.parametrize("program", [LAUNCHER, ENTRY], ids=["launcher", "console-script"])
def test_a_signal_ignored_by_the_starter_never_stops_the_command(refuted_run, tmp_path, sig, program):
    run = tmp_path / "run"
    subprocess.run(["cp", "-a", str(refuted_run), str(run)], check=True)
    code, out, err = _check_under_a_stream_of(getattr(signal, sig), program, run, group=False)
    assert code == 1 and out.startswith("VIOLATED"), (code, err)


def test_nohups_sighup_to_the_whole_group_never_stops_the_command(refuted_run, tmp_path):
    """A closed terminal sends SIGHUP to the foreground group: under nohup the command and its child go on."""
    run = tmp_path / "run"
    subprocess.run(["cp", "-a", str(refuted_run), str(run)], check=True)
    code, out, err = _check_under_a_stream_of(signal.SIGHUP, LAUNCHER, run, group=True)
    assert code == 1 and out.startswith("VIOLATED"), (code, err)
