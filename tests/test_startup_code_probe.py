"""The start-up probe answers when the bare start has ended, not when its output closes (hostile pass XIX-zg, N1)."""
import os
import signal
import subprocess
import sys

SIDECAR = """import os, time
if os.fork() == 0:  # a helper that inherits stdout and outlives the start (a log shipper, a metrics agent)
    open(os.path.join(os.path.dirname(__file__), f"sidecar-{os.getpid()}"), "w").close()
    time.sleep(300)
    os._exit(0)
"""
ASK = ("import sys\nfrom topicaudit.engine.storage import startup_code\n"
       "open(sys.argv[1], 'w').write(repr(sorted(startup_code.startup_code())))\n")


def test_a_start_up_helper_holding_stdout_does_not_make_the_probe_wait(tmp_path):
    """Before: the probe read to the end of its output, which the helper held for 300 s; after two minutes it gave
    up and the start was keyed by nothing (no run reused, silently). Now the key is there as soon as the start ends."""
    (tmp_path / "sitecustomize.py").write_text(SIDECAR)
    others = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [others])])}
    answer = tmp_path / "answer"
    try:
        subprocess.run([sys.executable, "-c", ASK, str(answer)], env=env, cwd=tmp_path, timeout=200,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        assert answer.read_text() == "['modules', 'pth']"
        assert len(list(tmp_path.glob("sidecar-*"))) >= 2  # the caller's start and the probe's forked one each
    finally:
        for mark in tmp_path.glob("sidecar-*"):
            try:
                os.kill(int(mark.name.split("-")[1]), signal.SIGKILL)
            except ProcessLookupError:
                pass


THREAD = """import threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # it could read and run a patch file later
"""


def test_a_start_that_leaves_a_thread_running_keys_no_run(tmp_path):
    """Hostile pass XIX-zk, T21: a thread a sitecustomize leaves read a patch file 20 ms after the start, after the
    probe had ended and before topicaudit's audit hook was installed; its edit reused the run of the patched fit."""
    (tmp_path / "sitecustomize.py").write_text(THREAD)
    others = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [others])])}
    answer = tmp_path / "answer"
    done = subprocess.run([sys.executable, "-c", ASK, str(answer)], env=env, cwd=tmp_path, timeout=200,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True)
    assert answer.read_text() == "[]"
    assert "leaves a thread running (_thread:a thread left running)" in done.stderr
