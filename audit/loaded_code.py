"""Whether a module this process runs is still the file it was loaded from.

Python loads a module once. A plug-in imported, then edited, then audited in the same process (a notebook, a script
calling the API twice) ran the code imported before the edit under the digest of the files after it, so a fresh
process running the edited code reused that cached run (hostile passes XIX-u and XIX-v). Comparing the loaded
module with its file (its functions' code, its constants) missed edits and flagged changes its own code made.

What the file was when it was loaded is recorded instead: an audit hook, installed when topicaudit is first
imported, notes the file's identity and times (``os.stat``: device, inode, size, modification and change times) as
each module's code starts to run. A module is unchanged when its file still has them all. The change time (ctime)
cannot be set back by a user, so an edit that restores the modification time is seen too. A module loaded before
topicaudit was imported has no record; its file counts as changed when its ctime is not older than the process.
"""
from __future__ import annotations

import ast
import contextlib
import enum
import importlib.util
import os
import sys
import threading
import time
import types

# The stat of each module file as its code started to run, by the path the code was compiled from (the module's
# __file__): one entry per load, so a file loaded twice under different contents is seen as changed.
_LOADED: dict[str, list[tuple[int, ...]]] = {}


# The stat of each source file this process opened (``open``: a plug-in that runs a helper's text with
# ``exec(open(path).read())`` compiles it as "<string>", so no module code of that file is ever run and noted above;
# hostile pass XIX-ya, C2), by absolute path, one entry per opening; topicaudit's own reads (``unnoted``) left out.
_OPENED: dict[str, list[tuple[int, ...]]] = {}
_UNNOTED = threading.local()


@contextlib.contextmanager
def unnoted():
    """Files opened in this block (topicaudit reading a plug-in's files for its digest) are not noted as opened."""
    before = getattr(_UNNOTED, "on", False)
    _UNNOTED.on = True
    try:
        yield
    finally:
        _UNNOTED.on = before


def _identity(path: str) -> tuple[int, ...]:
    found = os.stat(path)
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def _reading(args: tuple) -> bool:
    """Whether an ``open`` event's (path, mode, flags) opens for reading only (a write is an edit, not a load)."""
    mode = args[1] if len(args) > 1 else None
    if isinstance(mode, str):
        return not set(mode) & set("wax+")
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    return flags & os.O_ACCMODE == os.O_RDONLY


def _on_audit(event: str, args: tuple) -> None:
    # Called for every audit event of the process: only a module's code (its body, "<module>") run by exec is noted,
    # and a source file opened by the process's own code.
    if event == "open" and args and type(args[0]) is str and args[0].endswith(".py"):
        if not getattr(_UNNOTED, "on", False) and _reading(args):
            try:
                path = os.path.abspath(args[0])
                _OPENED.setdefault(path, []).append(_identity(path))
            except Exception:  # noqa: BLE001 - a hook must never fail an open (a file that is not there: none)
                pass
        return
    if event != "exec" or not args:
        return
    code = args[0]
    if type(code) is not types.CodeType or code.co_name != "<module>" or not code.co_filename.endswith(".py"):
        return
    try:
        _LOADED.setdefault(code.co_filename, []).append(_identity(code.co_filename))
    except Exception:  # noqa: BLE001 - a hook must never fail an import; no record reads as changed
        pass


def _process_start_ns() -> int:
    """When this process's Python started, on the clock files' times are on (Linux's /proc: clock ticks after the
    boot, rounded down, so never later than the start); 0 where it cannot be read, so that every module loaded before
    the hook counts as changed. A process forked from its parent (``os.fork``, multiprocessing's default start on
    Linux) holds the modules the parent loaded: the start of the earliest ancestor with the same command line (a fork
    keeps it) is taken, else a module loaded by the parent, then edited before the fork, read as unchanged (hostile
    pass XIX-x, S8)."""
    try:
        def stat(pid: str) -> list[bytes]:
            with open(f"/proc/{pid}/stat", "rb") as found:
                return found.read().rpartition(b")")[2].split()

        def cmdline(pid: str) -> bytes:
            with open(f"/proc/{pid}/cmdline", "rb") as found:
                return found.read()

        own, fields = cmdline("self"), stat("self")
        started_ticks = int(fields[19])
        parent = fields[1].decode()
        for _ in range(64):  # a chain of forks, to the first ancestor that is another program
            if parent in ("0", "1"):
                break
            try:
                if cmdline(parent) != own:
                    break
                fields = stat(parent)
            except OSError:
                break
            started_ticks, parent = min(started_ticks, int(fields[19])), fields[1].decode()
        booted = time.time_ns() - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        return booted + started_ticks * 10**9 // os.sysconf("SC_CLK_TCK")
    except Exception:  # noqa: BLE001 - no /proc, or another layout
        return 0


_PROCESS_START_NS = _process_start_ns()


def changed_since_loaded(module: types.ModuleType) -> bool:
    """Whether ``module``'s file is no longer the file its code was loaded from (edited, replaced, removed).
    A module with no file is never changed."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        return False
    try:
        now = _identity(path)
    except (OSError, ValueError):
        return True
    recorded = _LOADED.get(path)
    if recorded:
        return any(seen != now for seen in recorded)
    return now[4] >= _PROCESS_START_NS  # loaded before topicaudit: changed while this process ran, or not


def loaded_before_hook(module: types.ModuleType) -> bool:
    """Whether ``module`` has a file and no record of its load (loaded before topicaudit was imported)."""
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and not _LOADED.get(path)


def changed_while_running(path: str) -> bool:
    """Whether the file at ``path`` changed after this process started (or cannot be read). A plug-in loaded before
    topicaudit may have loaded its other files with no trace (``exec_module`` outside ``sys.modules``), so each of
    them is held to the process's start (hostile pass XIX-x, S9)."""
    try:
        return _identity(path)[4] >= _PROCESS_START_NS
    except (OSError, ValueError):
        return True


def changed_files(paths, names=None) -> list[str]:
    """Those of ``paths`` (real paths) whose code this process loaded, as any module, and whose file is no longer as
    it was then: a module kept out of ``sys.modules`` (a plug-in loading its helper with ``spec_from_file_location``
    and ``exec_module``) runs its loaded code too, and was not held against its file (hostile pass XIX-x, S1); so does
    a source file the process opened and may have run as text (XIX-ya, C2).
    names: the file names the paths are known by besides their own (a link named as the module)."""
    wanted = set(paths)
    names = {os.path.basename(path) for path in wanted} | set(names or ())
    found = []
    for path, recorded in [*list(_LOADED.items()), *list(_OPENED.items())]:
        try:
            if os.path.basename(path) not in names or os.path.realpath(path) not in wanted:
                continue
            now = _identity(path)
        except (OSError, ValueError):
            found.append(path)
            continue
        if any(seen != now for seen in recorded):
            found.append(path)
    return found


def _mapped() -> dict[str, set[tuple[int, int]]]:
    """The files mapped into this process (``/proc/self/maps``: shared libraries, extension modules), by path, with
    the (device, inode) of each mapping; a path whose file was removed or replaced since carries " (deleted)" and is
    given as it is. Empty where there is no such file."""
    found: dict[str, set[tuple[int, int]]] = {}
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(maxsplit=5)
                if len(fields) < 6 or not fields[5].startswith("/"):
                    continue
                major, _, minor = fields[3].partition(":")
                found.setdefault(fields[5], set()).add((os.makedev(int(major, 16), int(minor, 16)), int(fields[4])))
    except (OSError, ValueError):
        return {}
    return found


def changed_mapped(paths, names=None) -> list[str]:
    """Those of ``paths`` (real paths) mapped into this process (a shared library a plug-in opened with ctypes, an
    extension module) whose file is no longer the one mapped, or changed after the process started. Python runs no
    module code from such a file, so the audit hook has no record of it, and the library a process opened stays the
    one it runs after a rebuild: a plug-in's ctypes kernel rebuilt between two audits in one process ran the old
    library under the rebuilt file's digest, and a fresh check of the rebuilt plug-in reused that run (hostile pass
    XIX-ya, C1). When it was mapped is not known, so a file changed after the process started counts as changed, as
    a module loaded with no record does. names: as ``changed_files``."""
    wanted = set(paths)
    names = {os.path.basename(path) for path in wanted} | set(names or ())
    found = []
    for shown, mappings in _mapped().items():
        deleted = shown.endswith(" (deleted)")
        path = shown[: -len(" (deleted)")] if deleted else shown
        try:
            if os.path.basename(path) not in names or os.path.realpath(path) not in wanted:
                continue
            now = os.stat(path)
        except (OSError, ValueError):
            found.append(path)
            continue
        if deleted or (now.st_dev, now.st_ino) not in mappings or now.st_ctime_ns >= _PROCESS_START_NS:
            found.append(path)
    return found


def _function_codes(found) -> list[types.CodeType]:
    """The code of a function and of what decorators wrap (``staticmethod``, ``classmethod``, ``property``'s getter,
    ``functools.wraps``' ``__wrapped__``, numba's ``py_func``); none for anything else."""
    codes: list[types.CodeType] = []
    for _ in range(8):
        if found is None:
            break
        code = getattr(found, "__code__", None)
        if isinstance(code, types.CodeType):
            codes.append(code)
        found = next((inner for name in ("__func__", "fget", "__wrapped__", "py_func", "func")
                      if (inner := getattr(found, name, None)) is not None), None)
    return codes


def _same_code(found, compiled: list[types.CodeType]) -> bool:
    """Whether ``found`` is a function the file compiled to (by where it is defined: its file's name, qualified name
    and first line; pytest's rewritten asserts change the rest). A callable with no code (an object with
    ``__call__``, a ``mock.patch.object`` MagicMock: hostile pass XIX-za) is not the file's; another object with no
    code (``singledispatchmethod``) is not judged."""
    codes = _function_codes(found)
    defined = {(os.path.basename(c.co_filename), c.co_qualname, c.co_firstlineno) for c in compiled}
    if not codes:  # a C function or class (a ``try: from _accel import f`` over the file's ``def f``) is not judged
        return not callable(found) or isinstance(found, (types.BuiltinFunctionType, type))
    return any((os.path.basename(c.co_filename), c.co_qualname, c.co_firstlineno) in defined
                            for c in codes)


_NEW_LOCALS = 0x0002  # CO_NEWLOCALS: set for a function's code, not for a class body's


def _defined(code: types.CodeType, prefix: str = "") -> dict[str, list[types.CodeType]]:
    """The functions a module's (or class body's) code defines, by name; a name defined twice (``try``/``except``
    alternatives) has each."""
    found: dict[str, list[types.CodeType]] = {}
    for const in code.co_consts:
        if (isinstance(const, types.CodeType) and const.co_name.isidentifier()  # not a lambda or comprehension
                and const.co_qualname == prefix + const.co_name):
            found.setdefault(const.co_name, []).append(const)
    return found


def _added_method(cls: type, class_codes: list[types.CodeType]) -> bool:
    """Whether ``cls`` holds a method its class body does not bind: a stub set on the class over an inherited
    ``fit`` ran in the base class's place (hostile pass XIX-za). Special (``__x__``) methods, which decorators add
    (a dataclass's ``__init__``, ``functools.total_ordering``'s ``__le__``), C methods, and Enums are not judged."""
    if isinstance(cls, enum.EnumMeta):
        return False
    bound = {name for code in class_codes for name in code.co_names}
    for name, value in vars(cls).items():
        if name in bound or (name.startswith("__") and name.endswith("__")):
            continue
        if _function_codes(value) or (callable(value) and not isinstance(
                value, (types.BuiltinFunctionType, types.WrapperDescriptorType, types.MethodDescriptorType, type))):
            return True
    return False


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple)
_UNSEEN = object()


def _rebound(namespace: dict, statements: list, package: str | None, in_class: bool = False,
             outer: dict | None = None) -> bool:
    """Whether a name these statements (a module's or class body's, into ``if``/``try`` blocks) bind only to an
    immutable literal (``SCALE = 50.0``) or only by ``from M import f`` now holds something else: a test's
    ``monkeypatch.setattr(plugin, "SCALE", 0)``, or its imported kernel patched where it is used, changed what the
    plug-in computes under the same files (hostile pass XIX-za); so does a class body's ``fit = _fit`` no longer
    ``outer``'s ``_fit``. A name bound otherwise anywhere is not judged."""
    bindings: dict[str, list] = {}
    pending = list(statements)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            pending += node.body + node.orelse if not isinstance(node, ast.With) else node.body
            pending += [s for h in getattr(node, "handlers", ()) for s in h.body] + list(getattr(node, "finalbody", ()))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                value = _UNSEEN
            for target in (t for t in targets if isinstance(t, ast.Name)):
                bindings.setdefault(target.id, []).append(
                    ("value", value) if isinstance(value, _IMMUTABLE) else ("alias", (outer, node.value.id))
                    if isinstance(node.value, ast.Name) and outer is not None else ("other", None))
        elif isinstance(node, ast.ImportFrom) and not any(a.name == "*" for a in node.names):
            try:
                source = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            except (ImportError, ValueError):
                source = None
            for alias in node.names:
                bindings.setdefault(alias.asname or alias.name, []).append(("import", (source, alias.name)))
        else:
            for name in _stored_names(node):
                bindings.setdefault(name, []).append(("other", None))
    for name, ways in bindings.items():
        if name not in namespace or any(kind == "other" for kind, _ in ways):
            continue
        found = namespace[name]
        if not any(_is_bound_value(found, kind, what, in_class) for kind, what in ways):
            return True
    return False


def _stored_names(node) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Import):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def _is_bound_value(found, kind: str, what, in_class: bool = False) -> bool:
    if kind == "alias":
        return what[1] not in what[0] or what[0][what[1]] is found
    if kind == "value":
        if in_class and (not isinstance(found, _IMMUTABLE) or isinstance(found, enum.Enum)):
            return True  # a class that makes its attributes into other objects (an Enum's members, a NamedTuple's)
        return type(found) is type(what) and (found == what or found != found and what != what)
    source, name = what
    module = sys.modules.get(source) if source else None
    return module is None or getattr(module, name, _UNSEEN) is found or not hasattr(module, name)


def patched_since_loaded(module: types.ModuleType) -> bool:
    """Whether a function or method that ``module``'s file defines (at its top level, or in a class body there) is no
    longer the code the file compiles to: replaced or deleted in the running process. A test that stubbed a learner's
    ``fit`` (``monkeypatch.setattr``, ``mock.patch.object``) audited the stub under the unchanged files' digest, and
    a fresh check of the real learner reused that run (hostile pass XIX-ya, M1). A module whose file cannot be read
    or compiled counts as patched; so does a name the file defines but binds to another function (an import that
    replaces a fallback definition): it cannot be told from a patch."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return False
    try:
        with unnoted(), open(path, "rb") as source:
            source_text = source.read()
        top = compile(source_text, path, "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - unreadable, or not code: nothing says it is the code that runs
        return True
    namespace = vars(module)
    try:
        tree = ast.parse(source_text, path)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return True
    if _rebound(namespace, tree.body, getattr(module, "__package__", None)):
        return True
    for node in tree.body:
        cls = namespace.get(node.name) if isinstance(node, ast.ClassDef) else None
        if (isinstance(cls, type) and cls.__qualname__ == node.name and not node.decorator_list  # it may rewrite
                and _rebound(dict(vars(cls)), node.body, None, True, namespace)):
            return True
    for name, codes in _defined(top).items():
        found = namespace.get(name)
        if found is not None and any(not code.co_flags & _NEW_LOCALS for code in codes):  # a class body's code
            found = found if isinstance(found, type) else type(found)  # a singleton: ``Infinity = Infinity()``
            if found.__qualname__ != name:
                return True  # another class (a stub) in its place
            body = vars(found)
            if _added_method(found, codes):
                return True
            for class_code in codes:  # the methods the class body defines
                for method, compiled in _defined(class_code, name + ".").items():
                    if method.startswith("__") and not method.endswith("__"):  # a private name, mangled
                        method = f"_{name.lstrip('_')}{method}"
                    if method not in body or not _same_code(body[method], compiled):
                        return True
        elif found is not None and not _same_code(found, codes):
            return True
    return False


def install() -> None:
    """Install the audit hook (once per process; hooks cannot be removed, and this one only records)."""
    if not getattr(sys, "_topicaudit_loaded_code_hook", False):
        sys.addaudithook(_on_audit)
        sys._topicaudit_loaded_code_hook = True  # type: ignore[attr-defined]
