"""The ``topicaudit`` command line.

Each subcommand lives in ``audit/cli/<name>.py``. Exit codes (docs/exit-codes.md):

    0    success; for ``check``, the claim is consistent with the audit
    1    ``check`` only: the claim is refuted (printed after a VIOLATED verdict, never otherwise)
    2    bad input or configuration: one message, no traceback, nothing half-written
    3    internal error (a bug): one line; the traceback is saved to a file (TOPICAUDIT_DEBUG=1 prints it)
    4    Ray failed (did not start, or its raylet died under the run): rerun the same command to resume
    130  interrupted (Ctrl-C or SIGTERM): rerun the same command to resume

A crash, a kill or a bad path can therefore never read as "privacy claim refuted".
"""
from __future__ import annotations

import argparse
import datetime
import errno
import importlib
import os
import signal
import stat
import sys
import tempfile
import threading
import traceback
import warnings
from contextlib import contextmanager

from topicaudit.cli import supervisor
from topicaudit.folder_anchors import temporary_folder, tempfile_without_planted_links
from topicaudit.process_state import command_process, only_the_command, the_commands_process
from topicaudit.engine.execution import parallel, phases, ray_local
from topicaudit.engine.execution.progress import Heartbeat, noted
from topicaudit.engine.storage.lock import at_first_stop, before_exit_now, in_uninterrupted
from topicaudit.engine.storage.durable_write import disk_full
from topicaudit.memory import address_space_too_small, out_of_memory
from topicaudit.errors import (  # noqa: F401
    default_output_named, deleted_working_directory, developer_warning, EXIT_INTERNAL_ERROR, EXIT_INTERRUPTED, EXIT_OK,
    EXIT_RAY_FAILED, EXIT_REFUTED, EXIT_USER_ERROR, UserError, printable, user_message)
from topicaudit.version import __version__

# Commands that may work for minutes: a heartbeat line on stderr whenever they were silent for 5 s.
LONG_COMMANDS = ("run", "check", "sweep", "audit")

# subcommand → module under topicaudit.cli, in the order ``--help`` lists them
COMMANDS = ("run", "check", "sweep", "audit", "report")

DEBUG_VARIABLE = "TOPICAUDIT_DEBUG"
INTERRUPTED = supervisor.interrupted_message(None)


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken through the same clean path as Ctrl-C (a CI timeout is not a verdict)."""


class _Parser(argparse.ArgumentParser):
    """A parser without argparse's prefix matching, for every command (subparsers are made of the same class):
    ``--eps 1`` was taken as ``--epsilon 1``, so a later flag beginning ``--eps`` would change what old scripts
    mean, or make them fail."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def _build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; ``command`` (a known subcommand): only that one's module is imported and
    registered (the others' imports cost a command that does not use them), else every one."""
    parser = _Parser(
        prog="topicaudit",
        description="Measure how much a released topic model reveals about its training documents.",
        epilog="exit codes: 0 success/consistent, 1 claim refuted (check), 2 bad input, 3 internal error, "
               "4 Ray failed, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"topicaudit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in (command,) if command in COMMANDS else COMMANDS:
        importlib.import_module(f"topicaudit.cli.{name}").register(commands)
    return parser


def _requested(argv: list[str] | None) -> str | None:
    """The subcommand the arguments name (the first that is not an option), if any."""
    return next((a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")), None)


def _show_note(message, category, filename, lineno, file=None, line=None):
    """Loaders' warnings about the user's input as notes; libraries' deprecation notices are not the user's."""
    if developer_warning(category):
        return
    say(f"topicaudit: note: {printable(str(message))}")


@contextmanager
def _signals(command: str | None = None):
    """SIGTERM raises ``Terminated``; a second Ctrl-C or SIGTERM during clean-up exits 130 at once.

    The first signal unwinds normally (Ray is shut down, finished models are
    already on disk); a second one means the user will not wait for that.
    """
    if sys.platform == "win32" or not _in_main_thread():
        yield
        return
    received, later, copies, in_hook = [], [], [0], [False]

    def handler(signum, frame):
        if not the_commands_process():
            # A worker a learner's fit forked (a multiprocessing pool, ended by SIGTERM when the pool closes) is
            # not the command: it printed Terminated's traceback. The signal does there what it does by default.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if _ENDING.is_set():  # the interrupted line is being printed and 130 returned: nothing more to do
            return
        if in_hook[0] or (not received and (_in_import_machinery(frame) or in_uninterrupted())):
            # not now: an exception here is lost, or leaves importlib's locks held, or half a record written
            later.append(_take_later(signum))
            return
        passed, forced = supervisor.stops_passed_on()
        if received and passed == 1 and not forced and not copies[0]:
            # One stop sent to the process group reaches the command twice, directly and passed on by the
            # supervisor: taken for a second one, it ended the clean-up of the first (a report's staging left).
            copies[0] = 1
            return
        received.append(signum)
        if len(received) > 1:
            say(f"\n{supervisor.interrupted_message(command)}")
            supervisor.tell(supervisor.SAID_INTERRUPTED)
            before_exit_now()  # a new folder holding only its .lock is removed, as the block's end would have
            os._exit(EXIT_INTERRUPTED)
        at_first_stop()  # a lock whose folder holds nothing else is undone now: Ray may end the process first
        raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated()

    def unraisable(info):
        """The handler's exception raised where Python cannot propagate it (a ctypes callback: numba's JIT
        compiling a kernel through llvmlite's object-cache hook; a weakref callback; ``__del__``) is printed as
        "Exception ignored in …" and lost: a first SIGTERM 0.5 s into a CGS fit was, and the command fitted on
        until the supervisor forced it 30 s later. Take that signal again, as the first, once out of there."""
        if isinstance(info.exc_value, KeyboardInterrupt) and received and not _ENDING.is_set():
            in_hook[0] = True  # a signal now (the copy passed on) is taken later too: raised here, it was lost
            try:
                signum = received.pop()
                later.append(_take_later(signum))
            finally:
                in_hook[0] = False
            return
        previous_hook(info)

    # A hang-up (a closed terminal or SSH session) and Ctrl-\\ stop the command as SIGTERM does: it unwinds. A
    # signal the command was started with ignored stays ignored (`nohup`'s SIGHUP: a closed terminal stopped the run).
    stops = [s for s in (signal.SIGINT, signal.SIGTERM, *(getattr(signal, n) for n in ("SIGHUP", "SIGQUIT")
                                                          if hasattr(signal, n))) if signal.getsignal(s) != signal.SIG_IGN]
    previous = {s: signal.signal(s, handler) for s in stops}
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    _ENDING.clear()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, supervisor.HELD_IN_CHILD)  # held by the supervised child until now
    try:
        yield
    finally:
        for timer in later:
            timer.cancel()
        for s, h in previous.items():
            signal.signal(s, h)
        sys.unraisablehook = previous_hook


# Retry delay of a signal that landed inside importlib's own code.
RETAKE_SECONDS = 0.01


def _in_import_machinery(frame) -> bool:
    """Whether the signal interrupted importlib's bootstrap code (module locks, finders, a lock's weakref callback).

    An exception raised there is not one an import can unwind: raised in ``_get_module_lock``'s weakref callback
    it is printed ("Exception ignored in … _get_module_lock … Terminated") and lost, and it can leave the global
    import lock or a module lock held, so the next import by another thread (Ray's, started in the background)
    waits forever, and the command with it: a first SIGTERM ~5 s into `run` hung for over 4 minutes, until a
    second one (issue 32, item 4). Module code being imported is not importlib's: a signal there raises as usual.
    """
    return frame is not None and frame.f_code.co_filename.startswith("<frozen importlib.")


def _take_later(signum: int) -> threading.Timer:
    """Deliver ``signum`` to the main thread again in RETAKE_SECONDS (taken once it is out of importlib's code)."""
    main = threading.main_thread().ident
    timer = threading.Timer(RETAKE_SECONDS, signal.pthread_kill, (main, signum))
    timer.daemon = True
    timer.start()
    return timer


# Set once the command prints its interrupted line: a signal after that (the same Ctrl-C passed on by the
# supervisor, or one taken again after an import) would print the line a second time.
_ENDING = threading.Event()


def say(line: str) -> None:
    """One line on stderr, if it can still be written: a closed or broken stderr never changes the exit code."""
    only_the_command()
    try:
        print(line, file=sys.stderr, flush=True)
        noted()
    except (OSError, ValueError):
        pass


def _in_main_thread() -> bool:

    return threading.current_thread() is threading.main_thread()


def _save_traceback(error: BaseException) -> str | None:
    """The traceback in a file under the temporary directory; its path (None if it cannot be written)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        temporary = temporary_folder()  # never through another user's link ($TMPDIR=/tmp/L)
        if temporary is None:
            return None
        fd, path = tempfile.mkstemp(prefix=f"topicaudit-crash-{stamp}-", suffix=".txt", dir=temporary)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"topicaudit {' '.join(sys.argv[1:])}\n\n")
            handle.write("".join(traceback.format_exception(error)))
        return path
    except OSError:
        return None


def _ray_failure(error: BaseException) -> bool:
    """True for Ray's own failures (raylet, worker node or object store gone), not our code's exceptions.

    A SystemExit while Ray is in use is Ray's (its handlers call sys.exit), never a verdict.
    """
    if isinstance(error, ray_local.RayFailure):
        return True
    if isinstance(error, SystemExit):
        return supervisor.said(supervisor.RAY_IN_USE)
    ray_exceptions = sys.modules.get("ray.exceptions")
    if ray_exceptions is None:
        return False
    if isinstance(error, getattr(ray_exceptions, "RayTaskError", ())):
        return False  # an exception raised by our code inside a task: a bug, reported as such
    return isinstance(error, getattr(ray_exceptions, "RayError", ()))


def _internal_error(error: BaseException) -> int:
    named = str(error) if isinstance(error, ray_local.RayFailure) else f"{type(error).__name__}: {error}"
    summary = " ".join(named.split())[:300]
    if isinstance(error, ray_local.RayCannotStart):
        say(f"topicaudit: error: {printable(str(error))}")
        return EXIT_RAY_FAILED
    if _ray_failure(error):
        say(f"topicaudit: error: the Ray runtime failed under the run ({summary}); finished models are kept — "
            "rerun the same command to resume")
        return EXIT_RAY_FAILED
    if os.environ.get(DEBUG_VARIABLE):
        say("".join(traceback.format_exception(error)).rstrip("\n"))
        where = "traceback above"
    else:
        path = _save_traceback(error)
        where = f"traceback in {path}" if path else f"set {DEBUG_VARIABLE}=1 to print the traceback"
    say(f"topicaudit: internal error (a bug, please report it): {summary} ({where})")
    return EXIT_INTERNAL_ERROR


def _stdout_broken() -> bool:
    """Whether a write refused for room that names no file was standard output's: stdout is a device other
    than a terminal (/dev/full; no file on a disk). A report whose stdout was /dev/full blamed "the disk mounted
    at /"."""
    try:
        fd = sys.stdout.fileno()
        return stat.S_ISCHR(os.fstat(fd).st_mode) and not os.isatty(fd)
    except (OSError, ValueError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> int:
    """The command line. As the console script (no ``argv``) it runs in a supervised child process
    (``topicaudit.cli.supervisor``), so no crash of Ray's C++ layer can exit 1."""
    if argv is None and supervisor.available():
        return supervisor.supervise(lambda: run_command(None), hold=supervisor.HELD_IN_CHILD)
    if argv is None:
        supervisor.standard_streams()
    return run_command(argv)


def run_command(argv: list[str] | None) -> int:
    """The command line in this process (the supervised child, or a test). The process is left as it was
    found: a library call after it behaves as in a fresh process."""
    with _command_behaviour(), command_process(), tempfile_without_planted_links():
        return _run_command(argv)


@contextmanager
def _command_behaviour():
    """What only the command line does, for the length of one command: warnings printed as one-line notes
    (loaders warn about tolerated oddities in input files), a dead local raylet as one line and exit 4 (not
    Ray's errors and exit 1), Ray's start told to the supervisor."""
    saved = warnings.showwarning
    warnings.showwarning = _show_note
    try:
        with parallel.ray_behaviour(parallel.RayBehaviour(exit_when_raylet_dies=True, on_start=_tell_ray_started)):
            yield
    finally:
        warnings.showwarning = saved


def _tell_ray_started() -> None:
    supervisor.tell(supervisor.RAY_IN_USE)


def _run_command(argv: list[str] | None) -> int:
    supervisor.reset()
    too_small = address_space_too_small() if _requested(argv) else None  # --version and --help load no library
    if too_small is not None:
        say(f"topicaudit: error: {printable(str(too_small))}")
        return EXIT_USER_ERROR
    try:
        args = _build_parser(_requested(argv)).parse_args(argv)  # imports the command's modules: scipy, numba
    except Exception as error:  # noqa: BLE001 — memory is said as such; anything else goes on as before
        memory = out_of_memory(error)
        if memory is None:
            raise
        say(f"topicaudit: error: {printable(str(memory))}")
        return EXIT_USER_ERROR
    phases.mark("imports")
    with _signals(args.command):
        try:
            try:
                # No silent stretch over 5 s on stderr while a long command works (not with --quiet).
                with Heartbeat(quiet=args.command not in LONG_COMMANDS or bool(getattr(args, "quiet", False))):
                    code = importlib.import_module(f"topicaudit.cli.{args.command}").execute(args)
            finally:
                parallel.wait_for_stop()  # a Ray instance still stopping in the background (run)
        except UserError as error:
            message = default_output_named(user_message(error), getattr(args, "output", ""))
            say(f"topicaudit: error: {printable(message)}")
            return EXIT_USER_ERROR
        except KeyboardInterrupt:
            _ENDING.set()
            say(f"\n{supervisor.interrupted_message(args.command)}")
            supervisor.tell(supervisor.SAID_INTERRUPTED)
            return EXIT_INTERRUPTED
        except SystemExit as exit_:
            # Only argparse (before this block) may exit on its own; anything else exiting is a bug, or Ray's. Not
            # even sys.exit(0): a learner calling it mid-fit made `check CONFIG` exit 0 with no verdict.
            return _internal_error(exit_)
        except Exception as error:  # noqa: BLE001 — the one place every unexpected failure becomes exit 3
            memory = out_of_memory(error)
            if memory is not None:  # an address-space limit (ulimit -v), or a machine out of memory
                say(f"topicaudit: error: {printable(str(memory))}")
                return EXIT_USER_ERROR
            if isinstance(error, OSError) and disk_full(error, None) and not error.filename and _stdout_broken():
                sys.stdout = open(os.devnull, "w")  # nothing more is written to the full stream, not even at exit
                say(f"topicaudit: error: the standard output could not be written ({error.strerror}: it is a device "
                    "that takes no more, such as /dev/full); files already written are kept — rerun the same "
                    "command with its output going somewhere with room")
                return EXIT_USER_ERROR
            full = disk_full(error, None) if isinstance(error, OSError) else None
            if full is not None:  # a write outside the run directory's own writer (a report, a figure)
                say(f"topicaudit: error: {full}")
                return EXIT_USER_ERROR
            if isinstance(error, OSError) and error.errno == errno.ENAMETOOLONG:  # a path the user gave
                name = error.filename if isinstance(error.filename, str) else ""
                say(f"topicaudit: error: a file name is too long for the file system"
                    f"{': ' + (name if len(name) <= 80 else name[:77] + '...') if name else ''}; give a shorter path")
                return EXIT_USER_ERROR
            if isinstance(error, PermissionError) and isinstance(error.filename, str):  # a folder on the way that
                say(f"topicaudit: error: cannot reach {printable(error.filename)}: permission denied (a folder on the "
                    "way cannot be searched or written by this user); choose another place, or give the user "
                    "those rights")  # cannot be searched (chmod a-x): was an internal error, exit 3
                return EXIT_USER_ERROR
            if isinstance(error, ValueError) and str(error) == "embedded null byte":  # a path the user gave
                say("topicaudit: error: a path given contains a NUL character, which no file name may; give another "
                    "path")
                return EXIT_USER_ERROR
            if deleted_working_directory(error) is not None:
                say(f"topicaudit: error: {deleted_working_directory(error)}")
                return EXIT_USER_ERROR
            if isinstance(error, OSError) and error.errno in (errno.EPIPE, errno.EBADF):
                say("topicaudit: error: the output stream was closed before the command finished (its reader "
                    f"exited: {error.strerror}); nothing was lost — files already written are kept, rerun the same "
                    "command with its output going somewhere that stays open")
                return EXIT_USER_ERROR
            return _internal_error(error)
    if code == EXIT_REFUTED and not supervisor.said(supervisor.VERDICT):
        return _internal_error(RuntimeError("exit 1 without a printed VIOLATED verdict"))
    return code


if __name__ == "__main__":
    sys.exit(main())
