"""Hardening X' (issue 32, a second independent fresh hostile pass: processes, terminals, parsing, the API boundary).

Every case the pass ran, with what was expected and what happened, is in tests/hostile_x2_cases.md.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

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
