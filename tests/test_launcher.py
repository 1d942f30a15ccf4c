"""The `topicaudit` command is a shell launcher (audit/cli/topicaudit): an interpreter that cannot start is exit 2,
never the 1 of a refuted claim, and what starts is the console script itself (exec: same process, streams and
signals). Every test runs the installed launcher, or a copy of it beside an entry script of our own making."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LAUNCHER = BIN / "topicaudit"
CLAIM = "0.01"  # plain LDA's canaries prove more than this: VIOLATED

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a POSIX shell launcher")


def _launch(args, env=None, limits=(), **kwargs):
    def set_limits():
        for which, value in limits:
            resource.setrlimit(which, (value, value))

    return subprocess.run([str(LAUNCHER), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, preexec_fn=set_limits if limits else None, **kwargs)


def test_the_installed_command_is_the_launcher_shipped():
    assert LAUNCHER.read_bytes() == (REPO / "audit" / "cli" / "topicaudit").read_bytes()
    assert (BIN / "topicaudit-python").is_file()


@pytest.mark.parametrize("variable, value", [
    ("PYTHONIOENCODING", "bogus"), ("PYTHONHASHSEED", "4294967296"), ("PYTHONHOME", "/nonexistent"),
    ("PYTHONINTMAXSTRDIGITS", "99"),
])
def test_an_interpreter_rejecting_its_environment_is_exit_2_not_a_verdict(variable, value, tmp_path):
    """Python exits 1 on these before any code runs; through the launcher it is 2, with the interpreter's reason."""
    done = _launch(["check", tmp_path / "no-run", "--epsilon", CLAIM], env={variable: value})
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and "cannot start" in done.stderr and "no verdict" in done.stderr
    assert "Fatal Python error" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("limit", [(resource.RLIMIT_NOFILE, 4), (resource.RLIMIT_AS, 10_000_000),
                                   (resource.RLIMIT_DATA, 5_000_000)], ids=["ulimit-n-4", "ulimit-v", "ulimit-d"])
def test_limits_too_small_for_the_interpreter_are_exit_2(limit):
    """Under a limit of 4 open files the shell itself cannot read the launcher (it moves the script's descriptor
    above 9) and exits 2 with its own line; larger limits that Python cannot start under are our message."""
    done = _launch(["--version"], limits=[limit])
    assert done.returncode == 2 and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    if limit[0] != resource.RLIMIT_NOFILE:
        assert "cannot start" in done.stderr and "ulimit" in done.stderr


@pytest.fixture(scope="module")
def violated_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("launcher") / "run"
    subprocess.run([str(LAUNCHER), "run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(out),
                    "--quiet"], check=True, capture_output=True, timeout=600,
                   env={**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off"})
    return out


@pytest.mark.parametrize("streams", ["open", "stdout closed", "stderr closed"])
def test_a_refuted_claim_is_exit_1_and_a_kept_one_0_through_the_launcher(violated_run, streams, tmp_path):
    """exec keeps the one process: the supervisor's mapping of streams and verdicts is what the caller sees."""
    run = tmp_path / "run"
    subprocess.run(["cp", "-a", str(violated_run), str(run)], check=True)
    closes = {"stdout closed": "1>&-", "stderr closed": "2>&-"}.get(streams, "")
    env = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off"}
    for claim, code, verdict in ((CLAIM, 1, "VIOLATED"), ("5", 0, "CONSISTENT")):  # 5: above its ceiling, 2.2
        done = subprocess.run(f'"{LAUNCHER}" check "{run}" --epsilon {claim} {closes}', shell=True,
                              capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == code, (claim, streams, done.returncode, done.stderr)
        assert json.loads((run / "check.json").read_text())["verdict"] == verdict


def test_a_linked_launcher_finds_its_console_script(tmp_path):
    """`ln -s .venv/bin/topicaudit ~/bin/`: the console script is found beside the file the link names."""
    (tmp_path / "topicaudit").symlink_to(LAUNCHER)
    done = subprocess.run([str(tmp_path / "topicaudit"), "--version"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("topicaudit "), done.stderr


def _beside(tmp_path: Path, entry_text: str) -> Path:
    """A copy of the launcher in a folder of its own, beside an entry script whose text we choose."""
    folder = tmp_path / "bin"
    folder.mkdir()
    launcher = folder / "topicaudit"
    launcher.write_bytes(LAUNCHER.read_bytes())
    entry = folder / "topicaudit-python"
    entry.write_text(entry_text)
    for path in (launcher, entry):
        path.chmod(0o755)
    return launcher


ENTRY = "import re, sys\nfrom topicaudit.cli.console import main\nsys.exit(main())\n"


def test_an_interpreter_path_with_blanks_is_read_from_pips_second_line(tmp_path):
    """pip cannot put a path with blanks on a #! line: it writes `#!/bin/sh` and the path on the next line."""
    spaced = tmp_path / "a venv with blanks"
    spaced.symlink_to(BIN.parent, target_is_directory=True)
    python = spaced / "bin" / Path(sys.executable).name
    launcher = _beside(tmp_path, f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n{ENTRY}")
    done = subprocess.run([str(launcher), "--version"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("topicaudit "), done.stderr
    broken = subprocess.run([str(launcher), "--version"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONIOENCODING": "bogus"})
    assert broken.returncode == 2 and str(python) in broken.stderr


def test_a_missing_or_unreadable_console_script_is_exit_2_naming_it(tmp_path):
    launcher = _beside(tmp_path, "not a script\n")
    done = subprocess.run([str(launcher), "--version"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "topicaudit-python" in done.stderr and "reinstall" in done.stderr
    (launcher.parent / "topicaudit-python").unlink()
    done = subprocess.run([str(launcher), "--version"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "is missing" in done.stderr and "reinstall" in done.stderr


def test_a_signal_while_the_interpreter_is_checked_is_exit_130_with_the_line(tmp_path):
    """The check takes tens of milliseconds; one slowed to seconds shows that a SIGTERM in it is exit 130 with the
    interrupted line, not the shell's silent 143."""
    slow = tmp_path / "slow-python"
    slow.write_text(f"#!/bin/sh\nsleep 2\nexec \"{sys.executable}\" \"$@\"\n")
    slow.chmod(0o755)
    launcher = _beside(tmp_path, f"#!{slow}\n{ENTRY}")
    process = subprocess.Popen([str(launcher), "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130 and err.count("interrupted") == 1 and out == "", (process.returncode, err)


def test_a_ctrl_c_in_the_first_milliseconds_is_never_exit_1():
    """Python's KeyboardInterrupt inside `site` exits 1 (35 of 300 early Ctrl-Cs did, run directly): through the
    launcher a Ctrl-C is 130 with the interrupted line, a death by SIGINT before its first instruction, or lost
    while the new interpreter starts (the command goes on; pressed again, it stops)."""
    ends = []
    for trial in range(15):  # Ctrl-Cs 0 to 0.112 s after the start, 8 ms apart
        process = subprocess.Popen([str(LAUNCHER), "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        time.sleep(trial * 0.008)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        ends.append((process.returncode, err))
    assert not [end for end in ends if end[0] not in (0, 130, -signal.SIGINT) or "Traceback" in end[1]], ends
    assert all(err.count("interrupted") == 1 for code, err in ends if code == 130)
