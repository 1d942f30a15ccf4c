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
import select
import site
import subprocess
import sys
import time
import warnings

from topicaudit.engine.execution.fresh_process import interpreter_flags

# What the bare interpreter runs: the module files loaded by then (site, its imports, the start-up modules), and
# every file opened for reading while ``site`` ran (its ``.pth`` files, and code a start-up file runs without
# importing it, ``exec(open(path).read())``: hostile pass XIX-zf, S3). ``site`` is run by hand (``-S``, then
# ``site.main()``, what a start runs) so that an audit hook sees its opens; a process's own state (``/proc``) is
# not code.
_MARK = "\0topicaudit-startup:"  # the answer follows it: a start-up file may print too (its lines come first)
_PATIENCE = 120.0  # seconds a start may take before it is not keyed
_MOST = 1 << 24  # bytes of a start's output kept: the answer is at its end
_PROBE = (f"import sys, os\n_MARK = {_MARK!r}\n"
          "_OWN = ('topicaudit.loaded_code', 'topicaudit.working_directory',\n"  # their hooks only record
          "        'topicaudit.environment_reads', 'topicaudit.files_read')\n"
          "opened, audited, texts, environ = [], [], [], {}\n"
          "_STD = os.path.dirname(os.__file__) + os.sep\n"  # the standard library's own code (not site-packages)
          "def _std(n):\n"
          "    return n.startswith('<frozen') or n.startswith(_STD) and 'site-packages' not in n\\\n"
          "        and 'dist-packages' not in n\n"
          "def _outside():\n"  # code of the start's own (not site, not this probe's frame) on the stack
          "    f = sys._getframe(2)\n"
          "    while f is not None and f.f_back is not None:\n"
          "        if not _std(f.f_code.co_filename): return True\n"
          "        f = f.f_back\n"
          "    return False\n"
          "_E = type(os.environ)\n"
          "_get, _iter = _E.__getitem__, _E.__iter__\n"
          "def _getitem(self, key):\n"  # an environment variable start-up code reads (get, in, getenv)
          "    if _outside():\n"
          "        try: environ[repr(key)] = repr(_get(self, key))\n"
          "        except KeyError: environ[repr(key)] = 'absent'\n"
          "    return _get(self, key)\n"
          "def _iterate(self):\n"  # the whole environment read (copy, items, iteration)
          "    if _outside(): environ['*'] = repr(sorted(self._data.items()))\n"
          "    return _iter(self)\n"
          "_E.__getitem__, _E.__iter__ = _getitem, _iterate\n"
          "def _seen(event, args):\n"
          "    if event in ('compile', 'marshal.loads') and args and isinstance(args[0], (str, bytes))\\\n"
          "            and not _std(sys._getframe(1).f_code.co_filename):\n"
          "        texts.append(args[0] if isinstance(args[0], bytes) else args[0].encode('utf-8', 'surrogatepass'))\n"
          "    if event == 'sys.addaudithook' and sys._getframe(1).f_globals.get('__name__') not in _OWN:\n"
          "        audited.append(event)\n"
          "    if event == 'open' and isinstance(args[0], str) and (\n"
          "            (isinstance(args[1], str) and not set(args[1]) & set('wax+'))\n"
          "            or (args[1] is None and isinstance(args[2], int) and args[2] & os.O_ACCMODE == os.O_RDONLY)):\n"
          "        opened.append(os.path.abspath(args[0]))\n"
          "sys.addaudithook(_seen)\n"
          "sys.argv[:] = sys.argv[1:]\n"  # the command line this process's start had (``_start_argv``)
          "import site\n"
          "_BEFORE = list(sys.path)\n"  # PYTHONPATH's folders: what site adds is the installed libraries' folders
          "site.main()\n"
          "_E.__getitem__, _E.__iter__ = _get, _iter\n"
          "files = {getattr(m, '__file__', None) or '' for m in list(sys.modules.values())}\n"
          "files |= {f for f in opened if os.path.isfile(f) and not f.startswith(('/proc/', '/sys/'))}\n"
          "files = sorted(files - {''})\n"
          "import builtins, json\n"
          "def _named(o):\n"
          "    o = o if isinstance(o, type) or callable(o) and not hasattr(o, 'find_spec') else type(o)\n"
          "    return getattr(o, '__module__', '?') + ':' + getattr(o, '__qualname__', '?')\n"
          "hooks = [_named(f) for f in sys.meta_path] + [_named(h) for h in sys.path_hooks]\n"
          "hooks += ['sys.addaudithook:an audit hook'] if audited else []\n"
          "import _thread\n"
          "hooks += ['_thread:a thread left running'] if _thread._count() else []\n"
          "_t = sys.modules.get('threading')\n"  # a profile or trace function runs code at every call of the fit
          "hooks += ['sys.setprofile:a profile function'] if sys.getprofile() or _t and _t.getprofile() else []\n"
          "hooks += ['sys.settrace:a trace function'] if sys.gettrace() or _t and _t.gettrace() else []\n"
          "if type(sys.modules) is not dict: hooks.append('sys.modules:' + _named(type(sys.modules)))\n"
          "import types\n"  # a library's (or topicaudit's) function replaced by start-up code's function
          "_SITES = tuple(os.path.join(os.path.realpath(p), '') for p in [*site.getsitepackages(),\\\n"  # and .pth's
          "    site.getusersitepackages(), *(p for p in sys.path if p not in _BEFORE and os.path.isdir(p))])\n"
          "def _lib(n): return _std(n) or os.path.realpath(n).startswith(_SITES)\n"
          "def _theirs(v):\n"  # a function of a start-up file, also behind a method, partial or callable object
          "    for _ in range(6):\n"
          "        c = getattr(v, '__code__', None)\n"
          "        if isinstance(c, types.CodeType):\n"  # a library's wrapper function: what it wraps (singledispatch)
          "            if c.co_filename in _own: return True\n"
          "            w = getattr(v, '__wrapped__', None)\n"
          "            if w is None or w is v: return False\n"
          "            v = w; continue\n"
          "        try:\n"  # a property's getter, lru_cache's __wrapped__ (hostile pass XIX-zo)
          "            w = getattr(v, '__func__', None) or getattr(v, 'func', None) or getattr(v, 'fget', None)\\\n"
          "                or getattr(v, '__wrapped__', None) or (None if isinstance(v, type)\\\n"
          "                else getattr(type(v), '__call__', None))\n"
          "        except Exception:\n"
          "            return False\n"
          "        if w is None or w is v: return False\n"
          "        v = w\n"
          "    return False\n"
          "def _ta(n): return n == 'topicaudit' or n.startswith('topicaudit.')\n"
          "_CUSTOM = ('sitecustomize', 'usercustomize')\n"  # wherever they are
          "_own = {f for n, m in list(sys.modules.items()) if not _ta(n) and n != '__main__'\\\n"  # the start's files
          "        and isinstance(f := getattr(m, '__file__', None), str) and (not _lib(f) or n in _CUSTOM)}\n"
          "for _n, _m in list(sys.modules.items()):\n"
          "    if _n in ('sys', '__main__', *_CUSTOM) or not (_ta(_n)\\\n"
          "            or _lib(getattr(_m, '__file__', None) or '<frozen>')): continue\n"
          "    for _k, _v in list(vars(_m).items()):\n"
          "        if _theirs(_v) or isinstance(_v, type) and any(_theirs(x) for x in list(vars(_v).values())):\n"
          "            hooks.append(f'replaced:{_n}.{_k} by start-up code'); break\n"
          "    if type(_m) is not types.ModuleType and any(_theirs(x) for x in list(vars(type(_m)).values())):\n"
          "        hooks.append(f'replaced:{_n}.__class__ by start-up code')\n"
          "import hashlib\n"
          "texts = sorted(hashlib.sha256(t).hexdigest() for t in texts)\n"
          "if not type(builtins.__import__).__name__ == 'builtin_function_or_method':\n"
          "    hooks.append('builtins.__import__:' + _named(builtins.__import__))\n"
          "custom = {n: os.path.abspath(sys.modules[n].__file__) for n in ('sitecustomize', 'usercustomize')\n"
          "          if getattr(sys.modules.get(n), '__file__', None)}\n"
          "sys.stdout.write('\\n' + _MARK + json.dumps({'files': files, 'hooks': hooks, 'custom': custom,\n"
          "                                            'texts': texts, 'environ': sorted(environ.items())}))\n")
# The import machinery a start leaves that changes no code: importlib's own finders and path hooks, setuptools'
# distutils shim and editable-install finders, virtualenv's distutils patch, and topicaudit's own (a start that
# imports topicaudit installs it: it notes the names a fit imports and finds nothing, ``loaded_code``).
STANDARD_HOOKS = ("_frozen_importlib:", "_frozen_importlib_external:", "zipimport:", "_distutils_hack:",
                  "__editable___", "_virtualenv:", "topicaudit.loaded_code:_FitImports")
# per executable, flags, working directory, command line and environment: asked once per process; with the files of
# the sitecustomize and usercustomize that start ran
_ASKED: dict[str, tuple[dict[str, str], dict[str, str]]] = {}


def startup_code() -> dict[str, str]:
    """A digest of every module file a bare start of this interpreter loads, and of the site folders' ``.pth``
    ``import`` lines; empty when the start cannot be asked (the key is then never found again)."""
    # -P moves no start-up module; -S is the probe's own (``site`` run by hand), and a start without site runs none
    flags = [flag for flag in interpreter_flags() if flag not in ("-P", "-S")]
    if sys.flags.no_site:
        return {"site": "off"}
    try:
        # A relative PYTHONPATH entry (`PYTHONPATH=.`, `sc`, or the empty one of `$PYTHONPATH:/x`) is found from the
        # working directory: the bare start is asked there, as every process of this one starts (hostile pass XIX-zf).
        where = os.getcwd()
    except OSError:
        return {}
    argv = _start_argv()
    question = hashlib.sha256(json.dumps([sys.executable, flags, where, argv,
                                          sorted(os.environ.items())]).encode()).hexdigest()
    if question not in _ASKED:
        _ASKED[question] = _asked(flags, where, argv)
        found, custom = _ASKED[question]
        ran = {name: os.path.abspath(file) for name in ("sitecustomize", "usercustomize")
               if isinstance(file := getattr(sys.modules.get(name), "__file__", None), str)}
        if found and custom != ran:
            # This process ran other start-up code than a start here runs now: a start-up file that changed the
            # working directory (`os.chdir`), where a relative PYTHONPATH entry names nothing, had its run kept under
            # the key of a start without it (hostile pass XIX-zg, S8); an environment changed since the start.
            warnings.warn(f"the start-up code this process ran ({_listed(ran)}) is not what a new start of Python "
                          f"runs here ({_listed(custom)}): the working directory or the environment changed since "
                          "it started; no run is reused from the run cache "
                          "(docs/check.md#the-run-cache-ci-runs-that-reuse-what-they-can)",
                          RuntimeWarning, stacklevel=3)
            _ASKED[question] = ({}, custom)
    return dict(_ASKED[question][0])


def _listed(modules: dict[str, str]) -> str:
    return ", ".join(f"{name} from {file}" for name, file in sorted(modules.items())) or "no sitecustomize"


def _asked(flags: list[str], where: str, argv: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    try:
        output, returncode = _answer([sys.executable, *flags, "-P", "-S", "-c", _PROBE, *argv], where)
        answer = output.decode("utf-8", errors="replace").rpartition(_MARK)
        found = json.loads(answer[2]) if returncode == 0 and answer[1] else None
        files, hooks, custom = found["files"], found["hooks"], found["custom"]
        ran = json.dumps([found["texts"], found["environ"]])
    except (OSError, ValueError, subprocess.SubprocessError, TypeError, KeyError):
        files = hooks = custom = None
    if not isinstance(files, list) or not isinstance(hooks, list) or not isinstance(custom, dict):
        return {}, {}
    unknown = [hook for hook in hooks if not str(hook).startswith(STANDARD_HOOKS)]
    if unknown:
        # A hook start-up code leaves (ddtrace's, OpenTelemetry's, wrapt's post-import hooks) may import and run
        # any code when a module is imported later, the learner's included: that code is in no digest, and a run
        # of it was reused after it changed (hostile pass XIX-zf, S4); so may an audit hook, called at every import
        # after it (XIX-zg, S6); so may a thread it leaves running, which can read and run a file before
        # topicaudit's audit hook sees any read (XIX-zk, T21); so may a profile or trace function, called at every
        # call of the fit, which ran code from an environment variable: the run it fitted was kept, noted as
        # code no later process can check, but a run fitted without it was reused (XIX-zm); so may a function of a
        # start-up file set in a library's or topicaudit's place (a learner's fit, importlib.import_module), whose
        # work a file's existence or a variable read only in the fit chooses, none of which the key holds (XIX-zn,
        # E4, E5, E9). No run is kept for reuse in such a start.
        warnings.warn(f"code Python runs at every start here installs an import hook, a profile or trace function, "
                      f"replaces a library's or topicaudit's function, or leaves a thread running "
                      f"({', '.join(unknown[:3])}), which can change any module as it is imported or run other code "
                      "unseen; no run is reused from the run cache in "
                      "this environment (docs/check.md#the-run-cache-ci-runs-that-reuse-what-they-can)",
                      RuntimeWarning, stacklevel=4)
        return {}, custom
    # Start-up code's behaviour is its files' only for the same inputs: text it compiled from no file (an environment
    # variable, another process's output) and the environment variables it read choose what it does, and a run of
    # one was reused by a start with the other (hostile pass XIX-zn, E2, E3, E6).
    modules = hashlib.sha256(ran.encode())
    for file in files:
        modules.update(str(file).encode() + b"\0")
        try:
            with open(file, "rb") as handle:
                modules.update(hashlib.sha256(handle.read()).digest())
        except (OSError, TypeError):
            modules.update(b"unreadable")
    return {"modules": modules.hexdigest(), "pth": _pth_lines()}, custom


def _answer(command: list[str], where: str) -> tuple[bytes, int | None]:
    """The probe's output and exit status, read until the probe has ended, not until its output closes: a start-up
    file may fork a helper that keeps the inherited stdout open for as long as it lives, and the probe waited for it
    (up to two minutes, then keyed no run; hostile pass XIX-zg, N1)."""
    deadline = time.monotonic() + _PATIENCE
    probe = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                             cwd=where)
    output = b""
    try:
        while (left := deadline - time.monotonic()) > 0:
            ended = probe.poll()  # asked before the read: what it wrote before it ended is in the pipe by then
            ready = select.select([probe.stdout], [], [], 0 if ended is not None else min(left, 1.0))[0]
            chunk = os.read(probe.stdout.fileno(), 1 << 16) if ready else b""
            output = (output + chunk)[-_MOST:]
            if not chunk and (ended is not None or ready):  # all read after its end, or its output closed
                return output, ended if ended is not None else probe.wait(left)
        return b"", None
    finally:
        if probe.poll() is None:
            probe.kill()
        probe.wait()
        probe.stdout.close()


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


# Options of the interpreter that take a value (the next argument when not joined, ``-W error``, ``-Wd``).
_VALUED = {"W", "X"}


def _start_argv() -> list[str]:
    """``sys.argv`` as this process's start-up code saw it, read from ``sys.orig_argv``: a start-up file may import
    code for one command only (``if sys.argv[0].endswith("topicaudit")``), and a bare start asked with ``-c`` loaded
    none of it, so its edit reused the run before it (hostile pass XIX-zg, S7). A script's path and arguments,
    ``-c`` or ``-m`` (as when ``site`` runs) and what follows the command or module."""
    line = list(getattr(sys, "orig_argv", None) or [])[1:]
    at = 0
    while at < len(line):
        arg = line[at]
        if arg == "--":
            return line[at + 1:] or [""]
        if not arg.startswith("-") or arg == "-":
            return line[at:]
        if arg.startswith("--"):
            at += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        for place, letter in enumerate(arg[1:], 1):
            if letter in "cm":
                rest = line[at + 1:] if place < len(arg) - 1 else line[at + 2:]
                return [f"-{letter}", *rest]
            if letter in _VALUED:
                at += 0 if place < len(arg) - 1 else 1
                break
        at += 1
    return list(sys.argv[:1]) or [""]
