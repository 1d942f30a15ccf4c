"""The process that owns a ``topicaudit`` command's exit code, so a crash can never read as a verdict.

Exit 1 means "the privacy claim is refuted" (docs/exit-codes.md). Code we do
not control can end the process too: Ray's C++ core worker exits 1 when it
loses its GCS server ("Failed to connect to GCS within 60 seconds"), and
aborts (SIGABRT, exit 134) under an address-space limit. No handler inside the
process sees either, so the console script forks before anything else: the
child runs the command; this small parent waits for it and maps its end:

- exit 1 counts only when the child said, through a pipe, that it gave a
  VIOLATED verdict (printed, or recorded in check.json when stdout could not
  take it); any other exit 1 becomes 4 (Ray was in use) or 3;
- exit 0 counts only when the child said that its command returned (or argparse
  ended it: --help, --version): code the command ran (a learner's ``os._exit(0)``,
  a native library's ``exit(0)``) ended `check CONFIG` with exit 0 and no verdict;
  it becomes 4 (Ray was in use) or 3;
- a closed standard descriptor is /dev/null before anything runs, so a closed
  stderr (``2>&-``) can no longer crash this parent into exit 1;
- death by SIGINT or SIGTERM (even before the child's own handlers are in
  place) becomes 130 with the interrupted line; so do SIGHUP (a closed
  terminal), SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM (``STOPS``), which the
  parent passes on as SIGTERM — they killed the parent alone, and left the
  command running in the background;
- a signal the command was started with ignored (``nohup``'s SIGHUP, a script's background job's SIGINT) stays
  ignored: held, it stayed pending and was taken for a stop (exit 130 from ``nohup topicaudit run`` on a closed
  terminal);
- death by any other signal becomes 4 when Ray was in use, else 3;
- after the command was interrupted (Ctrl-C, SIGTERM), a death by any signal
  or an exit 1 without a verdict is 130 too: Ray's C++ runtime can crash
  while it is stopped mid-work, and the user asked for the stop, not a result.
- after the command was interrupted, it has STOP_GRACE seconds to stop cleanly;
  then the signal is sent again (the command's handler exits 130 at once) and,
  KILL_GRACE seconds later, SIGKILL: a first interrupt always ends the command.

Signals sent to the parent's PID (a CI timeout, ``kill``) are passed on to
the child; a terminal's Ctrl-C already reaches both, so it is not passed twice.
If the parent is killed with SIGKILL, the child gets SIGKILL too (Linux), as
before there was a parent. Only the standard library is imported here.

Longer than 400 lines because every way the process can end is mapped here,
in the one module the parent runs, each with the case that made it needed.
"""
from __future__ import annotations

import mmap
import os
import shutil
import signal
import stat
import sys
import time

EXIT_OK, EXIT_REFUTED, EXIT_USER_ERROR, EXIT_INTERNAL_ERROR, EXIT_RAY_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

RAY_IN_USE, VERDICT, SAID_INTERRUPTED, FINISHED = b"R", b"V", b"I", b"F"  # what the child tells the parent
_SI_KERNEL = 0x80  # si_code of a signal the kernel sent to a whole process group (a terminal's Ctrl-C)
_PR_SET_PDEATHSIG = 1
# After a Ctrl-C or SIGTERM reached the command, its clean stop (Ray shut down, models kept) has STOP_GRACE
# seconds; then the stop is forced (the signal again: the child's handler exits 130 at once), and after
# KILL_GRACE more seconds the child is killed (SIGKILL; the Ray reaper stops what it had started). Either way
# the command ends with 130. A first SIGTERM that left the child hung (an exception raised inside importlib's
# module locks; issue 32, item 4) had waited for a second one for over 4 minutes.
STOP_GRACE, KILL_GRACE = 30.0, 10.0

# Signals whose default action ends a process, besides SIGINT and SIGTERM: sent to the command's PID they killed this
# parent alone (exit 129 for a closed terminal's SIGHUP) and left the child running, orphaned, in the background.
# The parent now stops the command with them as with SIGTERM: passed on as SIGTERM, exit 130.
STOPS = frozenset(getattr(signal, name) for name in ("SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
                  if hasattr(signal, name))
_WATCHED = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGCHLD}) | STOPS
# The stops the command answers, held in the child until its handlers are in place (``cli.main._signals``): a
# Ctrl-C during the child's imports was Python's KeyboardInterrupt inside importlib's own code, printed as
# "Exception ignored in … _get_module_lock" and lost (`--version` then exited 0 with that traceback).
HELD_IN_CHILD = frozenset({signal.SIGINT, signal.SIGTERM} | {getattr(signal, name) for name in ("SIGHUP", "SIGQUIT")
                                                             if hasattr(signal, name)})

_status_fd: int | None = None  # the child's end of the pipe (None: not supervised)
# Shared with the child (an anonymous shared mapping made before the fork): how many stops this parent passed on,
# and whether it forced one. One SIGTERM sent to the process group reaches the child twice, directly and passed on;
# the child took the second for a user's "stop now", exited at once, and left what its first one was undoing (a
# report's staging folder in the user's folder).
_STOPS_PASSED: mmap.mmap | None = None
_said: set[bytes] = set()      # what this process has told (also kept when not supervised)


def tell(state: bytes) -> None:
    """Record ``state`` (RAY_IN_USE, VERDICT) and pass it to the supervising parent, if any."""
    _said.add(state)
    if _status_fd is not None:
        try:
            os.write(_status_fd, state)
        except OSError:
            pass


def reset() -> None:
    """Forget what was told (one command line per call of ``main``, e.g. in tests)."""
    _said.clear()


def stops_passed_on() -> tuple[int, bool]:
    """How many stop signals the supervising parent passed on to this process, and whether it forced a stop after
    its grace period; (0, False) when not supervised."""
    if _STOPS_PASSED is None:
        return 0, False
    return _STOPS_PASSED[0], bool(_STOPS_PASSED[1])


def supervised() -> bool:
    """Whether this process is the supervised child of a console command, which exits when the command returns."""
    return _status_fd is not None


def said(state: bytes) -> bool:
    return state in _said


def refuted() -> int:
    """The exit code of a VIOLATED verdict printed, or recorded in check.json; the only way to exit 1."""
    tell(VERDICT)
    return EXIT_REFUTED


def interrupted_message(command: str | None) -> str:
    """The one line an interrupted command prints (what is kept depends on the command)."""
    if command == "report":
        return "topicaudit: interrupted; no report was written — rerun the same command"
    if command == "check":
        return "topicaudit: interrupted; no verdict was given — finished models are kept, rerun the same command"
    return "topicaudit: interrupted; finished models are kept — rerun the same command to resume"


def standard_streams() -> None:
    """A closed standard descriptor (``2>&-``) becomes /dev/null, before anything else runs.

    Python starts with ``sys.stderr = None`` then, and the first write (the
    supervisor's own flush) raised AttributeError: exit 1 with nothing printed.
    Worse, the next file opened (a lock, a model) would take descriptor 2 and
    receive every message. The streams are rebuilt on /dev/null instead.
    """
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, os.fdopen(fd, "r" if fd == 0 else "w", buffering=1, closefd=False,
                                         encoding="utf-8", errors="backslashreplace"))
    # An ASCII standard output (PYTHONIOENCODING=ascii, a CI console) could not take "ε" or "≥": every verdict
    # line was "could not be printed" (UnicodeEncodeError), only recorded. Escaped instead, as stderr is.
    reconfigure = getattr(sys.stdout, "reconfigure", None)  # a TextIOWrapper's; not every stream has it
    try:
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    except (OSError, ValueError):
        pass


def available() -> bool:
    return hasattr(os, "fork") and hasattr(signal, "sigwaitinfo") and sys.platform != "win32"


def console(mask=None) -> int:
    """The ``topicaudit`` console script: signals are held from its first instruction, then the command runs
    supervised (a SIGTERM during the ~1 s of imports is exit 130, not 143) and the process leaves with the code
    its end maps to (``leave``: it does not return where a child can be forked).

    mask: the signal mask before ``topicaudit.cli.console`` held SIGINT, SIGTERM and SIGCHLD on its import
    (None: they are held here).
    """
    if not available():
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        standard_streams()
        from topicaudit.cli.main import main  # imported after the signals are held, never before the fork

        return main()

    def command_main() -> int:
        from topicaudit.cli.main import run_command  # in the child: the parent stays free of the package

        return run_command(None)

    try:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
        standard_streams()
        code = supervise(command_main, mask=held if mask is None else mask, hold=HELD_IN_CHILD)
    except BaseException as error:  # noqa: BLE001 — a traceback here was exit 1, the code of a refuted claim
        code = _say(EXIT_INTERNAL_ERROR, f"internal error (a bug, please report it): the supervising process "
                                         f"failed ({type(error).__name__}: {error}); this is no verdict",
                    prefix="topicaudit: ")
    leave(code)


def leave(code: int) -> None:
    """End the supervising process with ``code``, whatever the interpreter would make of a ``sys.exit``.

    With ``PYTHONINSPECT`` set (or ``python -i``) the interpreter takes no ``SystemExit``: it printed a traceback,
    read standard input as Python and exited 1, so every command — ``--version``, a CONSISTENT check, a bad path —
    ended with the code of a refuted claim (hostile pass XIII). Nothing of the package runs in this process after
    the child ended, so it leaves at once.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def supervise(command_main, argv: list[str] | None = None, mask=None, hold: frozenset = frozenset()) -> int:
    """Run ``command_main()`` in a child process and return the exit code its end maps to.

    mask: the signal mask before the caller blocked SIGINT, SIGTERM and SIGCHLD (None: block them here).
    hold: signals the child keeps blocked until the command unblocks them itself (the console's
    ``HELD_IN_CHILD``, which ``cli.main._signals`` lets go once its handlers are in place).
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED) if mask is None else mask
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)  # also when the caller held only some of them
    # Held, an ignored signal is kept pending (Linux never discards a blocked one) and sigwaitinfo took it for a
    # stop; let go, what is pending is discarded and what comes later too.
    ignored = {sig for sig in _WATCHED - {signal.SIGCHLD} if signal.getsignal(sig) == signal.SIG_IGN}
    signal.pthread_sigmask(signal.SIG_UNBLOCK, ignored)
    standard_streams()
    # Inherited as ignored (exec keeps SIG_IGN: a program that ignores SIGCHLD started us), the child was reaped by
    # the kernel and no SIGCHLD came: this parent waited forever, through every SIGTERM (hostile pass XIII).
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a broken or closed stream is the command's to report, not ours
            pass
    global _STOPS_PASSED
    try:
        _STOPS_PASSED = mmap.mmap(-1, 2)
    except (OSError, ValueError):  # no shared memory to be had: every signal counts, as before
        _STOPS_PASSED = None
    try:
        read_fd, write_fd = os.pipe()
    except OSError as error:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        return _cannot_start("a pipe", error)
    try:
        pid = os.fork()
    except OSError as error:  # ulimit -u met (EAGAIN), or no memory: a traceback here was exit 1
        for fd in (read_fd, write_fd):
            os.close(fd)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        return _cannot_start("its process", error)
    if pid == 0:  # the child: runs the command, never returns
        os.close(read_fd)
        _run_child(command_main, write_fd, previous, hold)
    os.close(write_fd)
    try:
        status, interrupted = _wait(pid, _WATCHED - ignored)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return _exit_code(status, _read_all(read_fd), _command(argv if argv is not None else sys.argv[1:]),
                      interrupted)


def _run_child(command_main, write_fd: int, mask, hold: frozenset) -> None:
    global _status_fd
    code = EXIT_INTERNAL_ERROR
    config_folder = os.environ.get("MPLCONFIGDIR")
    try:
        _die_with_parent()
        _status_fd = write_fd
        signal.pthread_sigmask(signal.SIG_SETMASK, set(mask) | hold)
        code = command_main()
        tell(FINISHED)  # an exit 0 the parent sees without it was not the command's own
    except SystemExit as exit_:  # only from argparse: its code is kept
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
        tell(FINISHED)
    except KeyboardInterrupt:  # before main's own handler was in place
        # The code first, then no more signals: a second SIGINT (one sent to the process group is passed on by
        # the parent too) interrupted the print, and the child exited 3 with the line cut.
        code = EXIT_INTERRUPTED
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        # A second signal already caught (its handler pending) would raise between the print and tell(), and the
        # parent, told nothing, print the line again: from here on it is ignored (the child exits right after).
        for stop in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop, signal.SIG_IGN)
        if not said(SAID_INTERRUPTED):  # main printed it already: this is the same Ctrl-C, passed on again
            print(f"\n{interrupted_message(_command(sys.argv[1:]))}", file=sys.stderr)
            tell(SAID_INTERRUPTED)
    except BaseException as error:  # noqa: BLE001 — nothing may leave the child but an exit code
        memory = _out_of_memory(error)
        if memory is not None:  # importing the command under `ulimit -v` (scipy, numba): exit 2 naming memory
            code = EXIT_USER_ERROR
            print(f"topicaudit: error: {memory}", file=sys.stderr)
        else:
            print(f"topicaudit: internal error (a bug, please report it): {type(error).__name__}: {error}",
                  file=sys.stderr)
    finally:
        try:
            _remove_matplotlib_temporary(config_folder)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _remove_matplotlib_temporary(before: str | None) -> None:
    """matplotlib, finding no writable config folder (no home directory, ``MPLCONFIGDIR`` naming a file), makes
    ``$TMPDIR/matplotlib-XXXXXXXX``, names it in ``MPLCONFIGDIR`` and removes it at exit with ``atexit``, which
    ``os._exit`` does not run: every report, and every run with shadows, left one. Removed here when this process
    made it."""
    made = os.environ.get("MPLCONFIGDIR")
    if not made or made == before:
        return
    try:
        folder = os.path.dirname(made)
        if os.path.basename(made).startswith("matplotlib-") and any(
                os.path.isdir(place) and os.path.samefile(folder, place) for place in _temporary_places()):
            info = os.lstat(made)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
                shutil.rmtree(made)
    except Exception:  # noqa: BLE001 — a folder left in the temporary directory is no reason to change the code
        pass


def _temporary_places() -> list[str]:
    """The places Python's tempfile tries, without ``tempfile.gettempdir()``, which creates and removes a file in
    its choice to test it (through another user's link: in a folder of this user's)."""
    return [*(os.environ[name] for name in ("TMPDIR", "TEMP", "TMP") if os.environ.get(name)),
            "/tmp", "/var/tmp", "/usr/tmp"]


def _out_of_memory(error: BaseException) -> str | None:
    """``topicaudit.memory.out_of_memory``'s message for ``error``, imported only in the child and only now (the
    parent imports nothing of the package); None when it is no memory failure, or when even that import fails."""
    try:
        from topicaudit.memory import out_of_memory  # in the child only: the parent stays free of the package
        found = out_of_memory(error)
    except BaseException:  # noqa: BLE001 — out of memory for the import too: the message below still goes out
        return None if not isinstance(error, MemoryError) else (
            "out of memory (MemoryError); raise the address-space limit (`ulimit -v unlimited`) or free memory, "
            "and rerun the same command")
    return None if found is None else str(found)


def _die_with_parent() -> None:
    """Linux: SIGKILL this child when the parent dies (a ``kill -9`` of the command ends the child too)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes  # Linux only, and only in the child

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(EXIT_INTERRUPTED)


def _wait(pid: int, watched: frozenset) -> tuple[int, bool]:
    """Wait for the child, passing on the ``watched`` signals sent to this process alone; its wait status, and
    whether an interrupt (SIGINT, SIGTERM) reached the command meanwhile.

    Once interrupted, the child has STOP_GRACE seconds to end; then the stop is forced (the signal again,
    then SIGKILL after KILL_GRACE), so a first interrupt always ends the command within a bounded time."""
    interrupted, deadline, forced = False, None, None
    info: signal.struct_siginfo | None  # sigtimedwait's is None when it timed out
    while True:
        if deadline is None:
            info = signal.sigwaitinfo(watched)
        else:
            info = signal.sigtimedwait(watched, max(0.0, deadline - time.monotonic()))
            if info is None:  # the child did not stop in time
                forced = signal.SIGTERM if forced is None else signal.SIGKILL
                _count(1, 1)
                _signal_child(pid, forced)
                deadline = time.monotonic() + KILL_GRACE if forced == signal.SIGTERM else None
                continue
        if info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return status, interrupted
            continue
        interrupted = True
        if deadline is None and forced is None:
            deadline = time.monotonic() + STOP_GRACE
        # A terminal's Ctrl-C (SI_KERNEL, sent to the foreground group) reached the child already; its hang-up did
        # not: the kernel sends that SIGHUP to the session leader alone, which this parent is under `setsid`,
        # `pty.fork` or `ssh -t HOST topicaudit …`. Not passed on, the command ran to its end on a closed terminal.
        if info.si_code != _SI_KERNEL or info.si_signo == getattr(signal, "SIGHUP", None):
            # SIGHUP, SIGQUIT, SIGUSR1…: the command is stopped as by SIGTERM (it unwinds, Ray stops)
            _count(0, min(stops_passed_on()[0] + 1, 255))
            _signal_child(pid, signal.SIGTERM if info.si_signo in STOPS else info.si_signo)


def _count(index: int, value: int) -> None:
    """Record in the mapping shared with the child, before the signal it describes is sent."""
    if _STOPS_PASSED is not None:
        _STOPS_PASSED[index] = value


def _signal_child(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def _command(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _exit_code(status: int, states: bytes, command: str | None, interrupted: bool = False) -> int:
    ray = RAY_IN_USE in states
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        if code == EXIT_INTERRUPTED and interrupted and SAID_INTERRUPTED not in states:
            # A second signal (one sent to the process group arrives twice) cut the child's line short.
            return _interrupted(command)
        if code == EXIT_OK and FINISHED not in states:
            # Ended by what the command ran (a learner's os._exit(0), a library's exit(0)): no verdict, no result.
            return _interrupted(command) if interrupted else _ended_early(ray, 0)
        if code != EXIT_REFUTED or VERDICT in states:
            return code
        if interrupted:
            return _interrupted(command)
        return _ended_early(ray, code)
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    if sig in (signal.SIGINT, signal.SIGTERM) or sig in STOPS or interrupted:
        return _interrupted(command)
    name = _signal_name(sig)
    if ray:
        return _say(EXIT_RAY_FAILED, f"the process was killed by {name} while Ray was in use (Ray's C++ runtime "
                                     "aborted, e.g. under an address-space limit such as `ulimit -v`, or the "
                                     "system ran out of memory); finished models are kept — rerun the same "
                                     "command to resume")
    return _say(EXIT_INTERNAL_ERROR, f"internal error (a bug, please report it): the process was killed by {name}",
                prefix="topicaudit: ")


def _ended_early(ray: bool, code: int) -> int:
    """An exit ``code`` (0 or 1) the command did not give: Ray's runtime (exit 4) or a bug (exit 3), no verdict."""
    if ray:
        return _say(EXIT_RAY_FAILED, f"the Ray runtime ended the process with exit {code} (e.g. its GCS server or "
                                     "raylet died); this is no verdict — finished models are kept, rerun the same "
                                     "command to resume")
    if code == 0:
        return _say(EXIT_INTERNAL_ERROR, "internal error: the process exited 0 before the command finished (code it "
                                         "ran, such as a learner or a native library, ended it); this is no verdict "
                                         "and no result — finished models are kept", prefix="topicaudit: ")
    return _say(EXIT_INTERNAL_ERROR, "internal error (a bug, please report it): the process exited 1 without a "
                                     "verdict", prefix="topicaudit: ")


def _cannot_start(what: str, error: OSError) -> int:
    """Exit 2: the command could not be started (no process or pipe to be had); no command ran."""
    why = os.strerror(error.errno) if error.errno else str(error)
    return _say(EXIT_USER_ERROR, f"cannot start the command: {what} could not be created ({why}: the limit of "
                                 "processes of this user, `ulimit -u`, or of open files, `ulimit -n`, was met, or "
                                 "the system is out of memory); no command ran and no verdict was given — raise "
                                 "the limit or wait for other processes to end, and rerun the same command")


def _interrupted(command: str | None) -> int:
    _print(f"\n{interrupted_message(command)}")
    return EXIT_INTERRUPTED


def _print(line: str) -> None:
    """A line on stderr, if it can still be written (a closed or broken stderr never changes the exit code)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _say(code: int, message: str, prefix: str = "topicaudit: error: ") -> int:
    _print(f"{prefix}{message}")
    return code


if __name__ == "__main__":
    from topicaudit.cli.supervisor import console as _console  # the module the command reports through

    sys.exit(_console())
