"""A second stop ends the command at once (exit 130), and a new output folder holding only its ``.lock`` goes with
it (hostile pass XIX-m, SG-AU: one stop to a command's process group while its local Ray started came back as a
second one, and the new folder was left holding only ``.lock``)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from topicaudit.cli.main import _signals
    from topicaudit.engine.storage.lock import writer_lock

    with _signals("run"):
        with writer_lock(sys.argv[1]):
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # the first stop: unwinds
                time.sleep(5)
            except KeyboardInterrupt:
                os.kill(os.getpid(), signal.SIGTERM)  # the second, during that clean-up: exit 130 at once
                time.sleep(5)
    sys.exit(9)  # never reached
""")


def test_a_second_stop_removes_the_new_folder_holding_only_its_lock(tmp_path):
    output = tmp_path / "new" / "out"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(output)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert not output.exists() and not (tmp_path / "new").exists(), sorted(p.name for p in tmp_path.rglob("*"))


def test_a_folder_that_was_there_keeps_what_it_held(tmp_path):
    output = tmp_path / "mine"
    output.mkdir()
    (output / "notes.txt").write_text("the user's\n")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(output)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert sorted(p.name for p in output.iterdir()) == ["notes.txt"]  # no .lock left in the user's folder
    assert (output / "notes.txt").read_text() == "the user's\n"
