"""A second stop ends the command at once (exit 130), and a new output folder holding only its ``.lock`` goes with
it (hostile pass XIX-m, SG-AU: one stop to a command's process group while its local Ray started came back as a
second one, and the new folder was left holding only ``.lock``)."""
from __future__ import annotations

import os
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


ENDED_BY_ANOTHER = textwrap.dedent("""
    import os, signal, sys, time
    from topicaudit.cli.main import _signals
    from topicaudit.engine.storage.lock import writer_lock

    with _signals("run"):
        with writer_lock(sys.argv[1]):
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # the first stop
                time.sleep(5)
            except KeyboardInterrupt:
                os._exit(1)  # ended before any block's end runs, as Ray's own code did after a group stop
""")


def test_a_first_stop_undoes_a_lock_whose_folder_holds_nothing_else(tmp_path):
    """Hostile pass XIX-w (SRy6): a stop to the process group while Ray started ended Ray's processes, and Ray's code
    ended the command before any clean-up: the user's empty .lock in --output was left holding the command's PID."""
    output = tmp_path / "U"
    output.mkdir()
    lock = output / ".lock"
    lock.write_text("")
    os.utime(lock, (1_600_000_000, 1_600_000_000))
    os.utime(output, (1_600_000_000, 1_600_000_000))
    done = subprocess.run([sys.executable, "-c", ENDED_BY_ANOTHER, str(output)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert lock.read_text() == "" and lock.stat().st_mtime == 1_600_000_000
    assert sorted(p.name for p in output.iterdir()) == [".lock"] and output.stat().st_mtime == 1_600_000_000
    new = tmp_path / "new" / "out"
    done = subprocess.run([sys.executable, "-c", ENDED_BY_ANOTHER, str(new)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and not (tmp_path / "new").exists(), done.stderr


ENDED_ABRUPTLY = textwrap.dedent("""
    import os, sys
    from topicaudit.engine.storage.lock import writer_lock

    with writer_lock(sys.argv[1]):
        os._exit(1)  # no block's end, no handler: as SIGKILL, or Ray's own code ending the process
""")


def test_an_empty_lock_that_was_there_is_never_written(tmp_path):
    """Whatever ends the command, a user's empty .lock keeps its content and time: the lock is taken on it as it is."""
    output = tmp_path / "U"
    output.mkdir()
    lock = output / ".lock"
    lock.write_text("")
    os.utime(lock, (1_600_000_000, 1_600_000_000))
    done = subprocess.run([sys.executable, "-c", ENDED_ABRUPTLY, str(output)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert lock.read_text() == "" and lock.stat().st_mtime == 1_600_000_000
