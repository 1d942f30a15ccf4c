"""A function of topicaudit's run in a new Python process, which imports every module from its files.

Why: the run cache keys a run by the files of the code that fits it (``engine.storage.run_cache``), but a long
process (a test session) may run other code than its files say: a method replaced by ``monkeypatch`` or
``mock.patch``, a constant set over, a library patched where it lives. A run fitted there and stored under the
files' key was reused later as the files' own run: a stub's verdict for the real learner. Looking for every way
code can be replaced in memory cannot be complete; a new interpreter started from the same executable, flags,
environment, working directory and ``sys.path`` runs the files, whatever the caller's process holds.

The child reads its job (JSON) on stdin and answers on a pipe of its own: the function's JSON result, or the
exception it raised (re-raised here as the same kind: a ``UserError`` as one, a learner's ``AssertionError`` or
``sys.exit`` as those, Ctrl-C as ``KeyboardInterrupt``), and the warnings it raised (re-issued here, each once).
"""
from __future__ import annotations

import builtins
import ctypes
import importlib
import json
import os
import signal
import stat
import subprocess
import sys
import traceback
import warnings
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no F_DUPFD (and no pass_fds: the new process is for POSIX)
    fcntl = None  # type: ignore[assignment]

from topicaudit.engine.execution.parallel import wait_for_stop
from topicaudit.errors import UserError, developer_warning, said
from topicaudit.folder_anchors import command_scope

# The child's first lines: nothing is imported from the working directory (-P) before the caller's sys.path is
# in place, and the caller's sys.argv (as multiprocessing gives the processes it spawns: a script that defines the
# learner and reads its settings from its command line at import, loaded here for that class, fitted with its
# defaults, hostile pass XIX-zf), then the job is served.
_BOOT = ("import json, sys\n"
         "job = json.loads(sys.stdin.buffer.read())\n"
         "sys.path[:] = job['path']\n"
         "sys.argv[:] = job.get('argv') or sys.argv\n"
         "from topicaudit.engine.execution.fresh_process import serve\n"
         "serve(job)\n")


def available() -> bool:
    """Whether a new interpreter can be started: an embedding application may have no executable of Python."""
    return bool(sys.executable) and os.path.isfile(sys.executable) and os.access(sys.executable, os.X_OK)


def call_fresh(function: str, arguments: dict[str, Any], environment: dict[str, str] | None = None) -> Any:
    """``function`` (``module:name``, of topicaudit) called with ``arguments`` (JSON) in a new process; its
    result, or its exception raised here. environment: variables set for the child beyond this process's."""
    reply_read, reply_write = (_above_standard(fd) for fd in os.pipe())
    job = {"path": list(sys.path), "argv": [str(a) for a in sys.argv], "function": function,
           "arguments": arguments, "reply": reply_write, "parent": os.getpid()}
    env = {**os.environ, **(environment or {})}
    try:
        child = subprocess.Popen([sys.executable, *interpreter_flags(), "-P", "-c", _BOOT],
                                 stdin=subprocess.PIPE, pass_fds=(reply_write,), env=env,
                                 stdout=None if _open(1) else subprocess.DEVNULL,
                                 stderr=None if _open(2) else subprocess.DEVNULL)
    except OSError as error:
        os.close(reply_read)
        os.close(reply_write)
        raise RuntimeError(f"could not start a Python process for the audit ({sys.executable}): "
                           f"{error.strerror or error}") from None
    os.close(reply_write)
    try:
        with os.fdopen(reply_read, "rb") as reply:
            assert child.stdin is not None
            try:
                child.stdin.write(json.dumps(job).encode())
                child.stdin.close()
            except BrokenPipeError:
                pass  # the child ended before reading: said by its exit below
            answer = reply.read()
        code = child.wait()
    except BaseException:
        _stop(child)
        raise
    return _answered(answer, code)


def _above_standard(fd: int) -> int:
    """``fd``, moved above 0–2 when it is one of them: with standard output and error closed, os.pipe() gave the
    answer's pipe descriptors 1 and 2, the new process wrote its notes into its answer, and every cached
    assert_privacy failed (hostile pass XIX-zi)."""
    if fd > 2 or fcntl is None:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def _open(fd: int) -> bool:
    """Whether this process's descriptor ``fd`` is a stream the new process can inherit: one closed here, or whose
    number a folder this process opened has taken (it was the new process's stderr, a directory: it exited 1 before
    it answered), is the new process's /dev/null."""
    try:
        return os.get_inheritable(fd) and not stat.S_ISDIR(os.fstat(fd).st_mode)
    except OSError:
        return False


def interpreter_flags() -> list[str]:
    """This interpreter's flags (-O, -W, -X, -s, -E, …), as multiprocessing passes them to its children."""
    try:
        return list(subprocess._args_from_interpreter_flags())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a private helper of the standard library: without it, default flags
        return []


def _stop(child: subprocess.Popen) -> None:
    """The child ended with this process's wait (Ctrl-C reached this process alone, or an error here): asked to
    stop as Ctrl-C asks (it releases its run directory's lock and its Ray instance), then killed."""
    if child.poll() is None:
        try:
            child.send_signal(signal.SIGINT)
            child.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()
            child.wait()


def _answered(answer: bytes, code: int) -> Any:
    """The child's answer as a result, or as its exception raised here."""
    try:
        reply = json.loads(answer.decode("utf-8"))
    except ValueError:
        ended = f"signal {-code}" if code < 0 else f"exit code {code}"
        raise RuntimeError(f"the audit's Python process ended ({ended}) before it answered; this is no result "
                           "and no verdict") from None
    for category, message in reply.get("warnings", []):
        warnings.warn(message, _warning_class(category), stacklevel=4)
    kind = reply.get("kind")
    if kind == "result":
        return reply["result"]
    message = reply.get("message", "")
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "exit":
        raise SystemExit(reply.get("code"))
    if kind == "assertion":
        raise AssertionError(message)
    found = _exception_class(reply.get("class", ""))
    if kind == "user":
        raise (found if found is not None and issubclass(found, UserError) else UserError)(message)
    if found is not None and found.__module__ == "builtins":
        raise found(message)
    raise RuntimeError(f"the audit's Python process failed: {reply.get('class')}: {message}\n"
                       f"{reply.get('traceback', '')}")


def _exception_class(name: str) -> type[BaseException] | None:
    """The class named ``module:qualname`` when it is a builtin or topicaudit's own exception, else None."""
    module, _, qualname = name.partition(":")
    if module != "builtins" and not module.startswith("topicaudit."):
        return None
    try:
        found = getattr(builtins if module == "builtins" else importlib.import_module(module), qualname)
    except (ImportError, AttributeError):
        return None
    return found if isinstance(found, type) and issubclass(found, Exception) else None


def _warning_class(name: str) -> type[Warning]:
    """The warning class named ``module:qualname`` when it is a builtin or topicaudit's own, else RuntimeWarning."""
    module, _, qualname = name.partition(":")
    try:
        if module == "builtins" or module.startswith("topicaudit."):
            found = getattr(builtins if module == "builtins" else importlib.import_module(module), qualname)
            if isinstance(found, type) and issubclass(found, Warning):
                return found
    except (ImportError, AttributeError):
        pass
    return RuntimeWarning


def _stop_with_parent(parent: int | None) -> None:
    """Ctrl-C for this process when the caller dies (Linux's parent-death signal): a caller killed mid-audit left
    its new process fitting to the end, keeping the cores (hostile pass XIX-ze, N3). Elsewhere, nothing."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:  # died before the signal was asked for
        os.kill(os.getpid(), signal.SIGINT)


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def serve(job: dict[str, Any]) -> None:
    """The child's side: call the job's function, answer on the job's pipe, exit 0 (the answer says the rest)."""
    os.set_inheritable(job["reply"], False)  # a process the job starts (Ray's) never holds the answer open
    _stop_with_parent(job.get("parent"))
    reply: dict[str, Any]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module, _, name = job["function"].partition(":")
            with command_scope():
                reply = {"kind": "result", "result": getattr(importlib.import_module(module), name)(
                    **job["arguments"])}
        except KeyboardInterrupt:
            reply = {"kind": "interrupt"}
        except SystemExit as error:
            code = error.code
            reply = {"kind": "exit", "code": code if code is None or isinstance(code, (int, str)) else repr(code)}
        except AssertionError as error:
            reply = {"kind": "assertion", "message": said(error)}
        except UserError as error:
            reply = {"kind": "user", "class": _name(type(error)), "message": str(error)}
        except BaseException as error:  # noqa: BLE001 - every failure is answered, never a bare exit
            reply = {"kind": "error", "class": _name(type(error)), "message": said(error, 4000),
                     "traceback": "".join(traceback.format_exception(error))[-20000:]}
        finally:
            try:
                wait_for_stop()  # a Ray instance the job started, stopped before the process ends
            except BaseException:  # noqa: BLE001 - the answer is given whatever the stop does
                pass
    seen = dict.fromkeys((_name(w.category), str(w.message)) for w in caught if not developer_warning(w.category))
    reply["warnings"] = list(seen)
    try:
        with os.fdopen(job["reply"], "wb") as answer:
            answer.write(json.dumps(reply, default=str).encode())
    except OSError:
        pass  # the caller stopped listening (Ctrl-C there): nothing to tell, and no traceback (XIX-ze N2)
    if sys.stdout is not None:  # None when started without a standard output
        sys.stdout.flush()
    os._exit(0)  # Ray's and the learner's threads are not waited for: the answer is given
