"""Hostile pass XIII (tests/hostile_xiii_cases.md): the launcher and the supervising process under environments that
end Python differently — PYTHONINSPECT, an inherited ignored SIGCHLD, a process limit met at the fork, ``python -O``.
Each case gave an exit code that was no verdict (1 for a consistent claim), or none at all (a hang)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LAUNCHER, ENTRY = BIN / "topicaudit", BIN / "topicaudit-python"
ENV = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, signals and a POSIX launcher")


def _run(args, env=None, timeout=300, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          env={**ENV, **(env or {})}, **kwargs)


@pytest.fixture(scope="module")
def refuted_run(tmp_path_factory) -> Path:
    """A run whose canaries prove ε ≥ 2.2: `check --epsilon 0.01` is VIOLATED, `--epsilon 5` CONSISTENT."""
    out = tmp_path_factory.mktemp("xiii") / "run"
    _run([LAUNCHER, "run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", out, "--quiet"],
         timeout=600).check_returncode()
    return out


# -- PYTHONINSPECT: the interpreter took no SystemExit, read stdin as Python and exited 1 -----------------------
@pytest.mark.parametrize("args, code", [(["--version"], 0), (["check", "no-such-run"], 2), (["--no-such-flag"], 2)],
                         ids=["version", "bad-path", "bad-flag"])
@pytest.mark.parametrize("program", [LAUNCHER, ENTRY], ids=["launcher", "console-script"])
def test_pythoninspect_leaves_every_exit_code_as_it_is(args, code, program, tmp_path):
    """With PYTHONINSPECT=1 every command exited 1 (`--version`, a bad path: the code of a refuted claim)."""
    done = _run([program, *args], env={"PYTHONINSPECT": "1"}, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and ">>>" not in done.stderr


def test_pythoninspect_keeps_a_consistent_check_0_and_a_refuted_one_1(refuted_run, tmp_path):
    run = tmp_path / "run"
    subprocess.run(["cp", "-a", str(refuted_run), str(run)], check=True)
    for claim, code, verdict in (("0.01", 1, "VIOLATED"), ("5", 0, "CONSISTENT")):
        # what stdin holds is not run as Python either (it was, in the supervising process, after the command)
        done = _run([LAUNCHER, "check", run, "--epsilon", claim], env={"PYTHONINSPECT": "1"},
                    input="import os; os._exit(1)\n")
        assert done.returncode == code, (claim, done.returncode, done.stderr)
        assert done.stdout.startswith(verdict) and json.loads((run / "check.json").read_text())["verdict"] == verdict


def test_the_launchers_interpreter_check_does_not_read_standard_input(tmp_path):
    """With PYTHONINSPECT the check's `python -c` went on to read stdin as Python: at a terminal it waited, unseen."""
    witness = tmp_path / "read"
    done = _run([LAUNCHER, "--version"], env={"PYTHONINSPECT": "1"},
                input=f"open({str(witness)!r}, 'w').close()\n")
    assert done.returncode == 0 and done.stdout.startswith("topicaudit "), done.stderr
    assert not witness.exists()


# -- SIGCHLD ignored by whoever started the command: the child was reaped unseen, the parent waited forever ------
IGNORING = "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"


@pytest.mark.parametrize("program", [LAUNCHER, ENTRY], ids=["launcher", "console-script"])
def test_an_inherited_ignored_sigchld_does_not_hang_the_command(program, tmp_path):
    for args, code in ((["--version"], 0), (["check", tmp_path / "no-such-run"], 2)):
        done = _run([sys.executable, "-c", IGNORING, program, *args], timeout=60)
        assert done.returncode == code, (args, done.returncode, done.stderr)


# -- the supervising process itself fails: never a traceback's exit 1 -----------------------------------------
def _console_with(patch: str, *args: str):
    """The console script's own entry, in a process where ``patch`` ran first (no launcher: it is not the subject)."""
    script = "\n".join(["import os, sys", patch, "from topicaudit.cli.console import main",
                         f"sys.argv = ['topicaudit', *{list(args)!r}]", "sys.exit(main())"])
    return _run([sys.executable, "-c", script], timeout=120)


def test_a_process_limit_met_at_the_fork_is_exit_2_not_1():
    """`ulimit -u` met between the launcher's check and the fork (another process of the user started): the
    traceback of BlockingIOError was exit 1 (55 of 60 such races, measured as user nobody with RLIMIT_NPROC 3)."""
    patch = "def _fork(): raise BlockingIOError(11, 'Resource temporarily unavailable')\nos.fork = _fork"
    done = _console_with(patch, "--version")
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert "ulimit -u" in done.stderr and "no verdict" in done.stderr


def test_no_pipe_to_be_had_is_exit_2_not_1():
    patch = "def _pipe(): raise OSError(24, 'Too many open files')\nos.pipe = _pipe"
    done = _console_with(patch, "--version")
    assert done.returncode == 2 and "Traceback" not in done.stderr and "ulimit -n" in done.stderr, done.stderr


def test_any_failure_of_the_supervising_process_is_exit_3_not_1():
    patch = ("import topicaudit.cli.supervisor as s\n"
             "def _broken(): raise RuntimeError('planted')\ns.standard_streams = _broken")
    done = _console_with(patch, "--version")
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "planted" in done.stderr and "no verdict" in done.stderr


# -- python -O: the conformance suite's checks were assert statements -------------------------------------------
def test_check_learner_fails_a_broken_learner_under_python_O(tmp_path):
    """Under `python -O` every check of check_learner vanished: a noiseless learner claiming ε = 1 passed."""
    script = textwrap.dedent("""\
        import numpy as np
        from topicaudit.testing import check_learner
        from topicaudit.targets.base import NO_GUARANTEE

        class Float64:
            def __init__(self, k):
                self.k = k
            def fit(self, X, seed):
                counts = np.asarray(X.sum(axis=0)).ravel() + 0.5
                return np.random.default_rng(seed).dirichlet(counts, size=self.k)  # float64: not what is asked
            def guarantee(self):
                return NO_GUARANTEE

        try:
            check_learner(Float64(3))
        except AssertionError as error:
            print("failed:", error)
        else:
            print("passed")
        """)
    done = _run([sys.executable, "-O", "-c", script], timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("failed:") and "float64, not float32" in done.stdout, done.stdout


def test_the_conformance_suite_holds_no_assert_statement():
    import ast

    tree = ast.parse((REPO / "audit" / "learner_checks.py").read_text())
    assert not [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]


# -- the launcher's interpreter check ran modules of the current directory ---------------------------------------
def test_the_interpreter_check_does_not_import_from_the_current_directory(tmp_path):
    """`python -c` puts the current directory first on sys.path, the console script its own folder: a signal.py or
    __future__.py in the directory the command was started from was run by the check, and taken for an
    interpreter that cannot start (exit 2), while the command itself would not have imported it."""
    for name in ("signal.py", "__future__.py"):
        (tmp_path / name).write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\nraise SystemExit(1)\n")
    done = _run([LAUNCHER, "--version"], cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("topicaudit "), done.stderr
    assert not (tmp_path / "ran").exists()


def test_a_console_script_naming_a_program_that_is_not_python_is_exit_2(tmp_path):
    """A console script whose first line names /bin/true passed the check (exit 0) and the command exited 0 with
    nothing printed: a `check` exit 0 with no verdict."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "topicaudit").write_bytes(LAUNCHER.read_bytes())
    body = ENTRY.read_text().split("\n", 1)[1]
    (folder / "topicaudit-python").write_text(f"#!/bin/true\n{body}")
    for path in folder.iterdir():
        path.chmod(0o755)
    done = _run([folder / "topicaudit", "check", tmp_path / "run", "--epsilon", "50"])
    assert done.returncode == 2 and "/bin/true" in done.stderr and "no verdict" in done.stderr, done


# -- a SIGINT its starter ignored (a script's background job) -----------------------------------------------------
def test_a_sigint_ignored_by_whoever_started_the_command_stays_ignored(refuted_run, tmp_path):
    """`topicaudit check … &` in a script: SIGINT is ignored, and the console script run directly keeps ignoring it.
    Through the launcher Python's handler was put back, so a Ctrl-C meant for the script's foreground job stopped
    the check (exit 130) instead of letting it give its verdict."""
    import signal
    import time

    run = tmp_path / "run"
    subprocess.run(["cp", "-a", str(refuted_run), str(run)], check=True)
    process = subprocess.Popen([str(LAUNCHER), "check", str(run), "--epsilon", "0.01"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=ENV,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    time.sleep(1.5)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 1 and out.startswith("VIOLATED"), (process.returncode, err)


# -- python -m topicaudit, which the documentation names -----------------------------------------------------------
def test_python_m_topicaudit_runs_the_command_with_its_codes(tmp_path):
    """There was no topicaudit.__main__: every `python -m topicaudit …` exited 1, the code of a refuted claim."""
    version = _run([sys.executable, "-m", "topicaudit", "--version"], cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("topicaudit "), version.stderr
    missing = _run([sys.executable, "-m", "topicaudit", "check", tmp_path / "no-such-run"], cwd=tmp_path)
    assert missing.returncode == 2 and "no-such-run" in missing.stderr, missing.stderr
