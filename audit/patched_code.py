"""Whether a plug-in's code was replaced in memory after its file was loaded: a method stubbed, a constant or an
imported kernel set over, a class put in another's place.

A test that stubbed a learner's ``fit`` (``monkeypatch.setattr``, ``mock.patch.object``) and called
``assert_privacy`` audited the stub under the unchanged files' digest, and a fresh check of the real learner reused
that run (hostile passes XIX-ya and XIX-za). Its files are as loaded (``topicaudit.loaded_code``), so what the module
and its classes hold is compared with what its file binds: each function and method by where it is defined, each
name bound only to an immutable literal or by ``from M import f`` by its value. What is not covered: a mutable value
changed in place, a value an expression builds, special (``__x__``) methods, constants of a decorated class, and a
library the plug-in uses patched where it lives.
"""
from __future__ import annotations

import ast
import enum
import importlib.util
import os
import sys
import sysconfig
import types

from topicaudit.loaded_code import unnoted

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
        codes = _function_codes(value)
        if codes and all(c.co_filename.startswith(_STDLIB) for c in codes):
            continue  # the standard library's own machinery (a NamedTuple's _make, _replace and _asdict)
        if codes or (callable(value) and not isinstance(
                value, (types.BuiltinFunctionType, types.WrapperDescriptorType, types.MethodDescriptorType, type))):
            return True
    return False


_STDLIB = os.path.join(sysconfig.get_paths()["stdlib"], "")


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
