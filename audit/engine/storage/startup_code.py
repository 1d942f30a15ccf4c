"""The code Python runs at every start, before any script, for the run cache's key (``run_cache.cache_key``).

``site`` imports ``sitecustomize`` and ``usercustomize`` and runs the ``import`` lines of the ``.pth`` files in the
site folders; whatever they import runs in every process of that environment, the new process of a cached
``assert_privacy`` included. A patch kept there (a CI's sitecustomize.py on PYTHONPATH replacing a learner's
``fit``, or a module such a file imports) had its run kept under the files' key, and a process started without it
reused it: NO SIGNAL where the code gives VIOLATED (hostile pass XIX-ze, S1 and S1c). What a start loads is found
by asking: a bare interpreter (this executable, its flags, this environment) lists the module files it loaded
before running anything, and each file's content is digested, with the ``.pth`` files' ``import`` lines (code run
inline, in no module file). Every process of one environment asks the same question and gets the same answer.
"""
from __future__ import annotations

import hashlib
import json
import os
import site
import subprocess
import sys
import warnings

# What the bare interpreter runs: the module files loaded by then (site, its imports, the start-up modules), and
# every file opened for reading while ``site`` ran (its ``.pth`` files, and code a start-up file runs without
# importing it, ``exec(open(path).read())``: hostile pass XIX-zf, S3). ``site`` is run by hand (``-S``, then
# ``site.main()``, what a start runs) so that an audit hook sees its opens; a process's own state (``/proc``) is
# not code.
_MARK = "\0topicaudit-startup:"  # the answer follows it: a start-up file may print too (its lines come first)
_PROBE = (f"import sys, os\n_MARK = {_MARK!r}\n"
          "opened = []\n"
          "def _seen(event, args):\n"
          "    if event == 'open' and isinstance(args[0], str) and (\n"
          "            (isinstance(args[1], str) and not set(args[1]) & set('wax+'))\n"
          "            or (args[1] is None and isinstance(args[2], int) and args[2] & os.O_ACCMODE == os.O_RDONLY)):\n"
          "        opened.append(os.path.abspath(args[0]))\n"
          "sys.addaudithook(_seen)\n"
          "import site\n"
          "site.main()\n"
          "files = {getattr(m, '__file__', None) or '' for m in list(sys.modules.values())}\n"
          "files |= {f for f in opened if os.path.isfile(f) and not f.startswith(('/proc/', '/dev/', '/sys/'))}\n"
          "files = sorted(files - {''})\n"
          "import builtins, json\n"
          "def _named(o):\n"
          "    o = o if isinstance(o, type) or callable(o) and not hasattr(o, 'find_spec') else type(o)\n"
          "    return getattr(o, '__module__', '?') + ':' + getattr(o, '__qualname__', '?')\n"
          "hooks = [_named(f) for f in sys.meta_path] + [_named(h) for h in sys.path_hooks]\n"
          "if type(sys.modules) is not dict: hooks.append('sys.modules:' + _named(type(sys.modules)))\n"
          "if not type(builtins.__import__).__name__ == 'builtin_function_or_method':\n"
          "    hooks.append('builtins.__import__:' + _named(builtins.__import__))\n"
          "sys.stdout.write('\\n' + _MARK + json.dumps({'files': files, 'hooks': hooks}))\n")
# The import machinery a start leaves that changes no code: importlib's own finders and path hooks, setuptools'
# distutils shim and editable-install finders, virtualenv's distutils patch.
STANDARD_HOOKS = ("_frozen_importlib:", "_frozen_importlib_external:", "zipimport:", "_distutils_hack:",
                  "__editable___", "_virtualenv:")
_ASKED: dict[str, dict[str, str]] = {}  # per executable, flags and environment: asked once per process


def startup_code() -> dict[str, str]:
    """A digest of every module file a bare start of this interpreter loads, and of the site folders' ``.pth``
    ``import`` lines; empty when the start cannot be asked (the key is then never found again)."""
    # -P moves no start-up module; -S is the probe's own (``site`` run by hand), and a start without site runs none
    flags = [flag for flag in _interpreter_flags() if flag not in ("-P", "-S")]
    if sys.flags.no_site:
        return {"site": "off"}
    try:
        # A relative PYTHONPATH entry (`PYTHONPATH=.`, `sc`, or the empty one of `$PYTHONPATH:/x`) is found from the
        # working directory: the bare start is asked there, as every process of this one starts (hostile pass XIX-zf).
        where = os.getcwd()
    except OSError:
        return {}
    question = hashlib.sha256(json.dumps([sys.executable, flags, where,
                                          sorted(os.environ.items())]).encode()).hexdigest()
    if question not in _ASKED:
        _ASKED[question] = _asked(flags, where)
    return dict(_ASKED[question])


def _asked(flags: list[str], where: str) -> dict[str, str]:
    try:
        done = subprocess.run([sys.executable, *flags, "-P", "-S", "-c", _PROBE], capture_output=True, timeout=120,
                              stdin=subprocess.DEVNULL, cwd=where)
        answer = done.stdout.decode("utf-8", errors="replace").rpartition(_MARK)
        found = json.loads(answer[2]) if done.returncode == 0 and answer[1] else None
        files, hooks = found["files"], found["hooks"]
    except (OSError, ValueError, subprocess.SubprocessError, TypeError, KeyError):
        files = hooks = None
    if not isinstance(files, list) or not isinstance(hooks, list):
        return {}
    unknown = [hook for hook in hooks if not str(hook).startswith(STANDARD_HOOKS)]
    if unknown:
        # A hook start-up code leaves (ddtrace's, OpenTelemetry's, wrapt's post-import hooks) may import and run
        # any code when a module is imported later, the learner's included: that code is in no digest, and a run
        # of it was reused after it changed (hostile pass XIX-zf, S4). No run is kept for reuse in such a start.
        warnings.warn(f"code Python runs at every start here installs an import hook ({', '.join(unknown[:3])}), "
                      "which can change any module as it is imported; no run is reused from the run cache in "
                      "this environment (docs/check.md#the-run-cache-ci-runs-that-reuse-what-they-can)",
                      RuntimeWarning, stacklevel=4)
        return {}
    modules = hashlib.sha256()
    for file in files:
        modules.update(str(file).encode() + b"\0")
        try:
            with open(file, "rb") as handle:
                modules.update(hashlib.sha256(handle.read()).digest())
        except (OSError, TypeError):
            modules.update(b"unreadable")
    return {"modules": modules.hexdigest(), "pth": _pth_lines()}


def _pth_lines() -> str:
    """A digest of the ``import`` lines of the ``.pth`` files in the site folders (run at start, inline)."""
    lines = hashlib.sha256()
    folders = [*getattr(site, "getsitepackages", lambda: [])(), site.getusersitepackages()] \
        if sys.flags.no_site == 0 else []
    for folder in dict.fromkeys(folders):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
                    run = [line for line in handle if line.startswith(("import ", "import\t"))]
            except OSError:
                continue
            if run:
                lines.update(name.encode() + b"\0" + "".join(run).encode())
    return lines.hexdigest()


def _interpreter_flags() -> list[str]:
    try:
        return list(subprocess._args_from_interpreter_flags())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a private helper of the standard library: without it, default flags
        return []
