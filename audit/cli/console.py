"""The ``topicaudit`` console script's entry point: SIGINT, SIGTERM and SIGCHLD are held from this module's import.

A signal that arrives before the command's supervisor is in place kills the
process by the default disposition: SIGTERM was exit 143 with no line, a
Ctrl-C a KeyboardInterrupt traceback. Held here, with the C module
``_signal`` (``signal`` would first import enum), they stay pending until
``topicaudit.cli.supervisor`` waits for them, and end as exit 130 with the
interrupted line. Only the console script imports this module: importing it
holds those signals in the importing process. What runs before it —
Python's own start-up and the script's ``import re`` — cannot be covered by
any code of the package (docs/exit-codes.md, "Signals").
"""
import _signal
import os as _os

_HOLDS = hasattr(_signal, "pthread_sigmask")
# SIGHUP (a closed terminal or SSH session), SIGQUIT (Ctrl-\\), SIGUSR1/2 and SIGALRM end a process by default too:
# the supervisor turns them into a stop of the command (exit 130), as for SIGTERM (topicaudit.cli.supervisor.STOPS).
_MASK = (_signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT, _signal.SIGTERM, _signal.SIGCHLD, *(
    getattr(_signal, name) for name in ("SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
    if hasattr(_signal, name))}) if _HOLDS else None)

# The `topicaudit` launcher ignores SIGINT across its exec (a Ctrl-C inside Python's start-up was exit 1): Python's
# own handler back, now that SIGINT is held, as if started directly.
if _HOLDS and _os.environ.pop("TOPICAUDIT_LAUNCHER_SIGINT", None) == "ignored":
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)

from topicaudit.cli.supervisor import console  # noqa: E402 — after the signals are held, never before


def main() -> int:
    """The console script: the supervised command, the signals already held (the mask before, to restore)."""
    return console(mask=_MASK)
