"""A scikit-learn ``LatentDirichletAllocation`` saved with joblib or pickle: its training settings, never unpickled.

Φ of such a file is loaded only with ``--trust-pickle`` (:mod:`topicaudit.inputs.phi_io`).
The settings the shadows need (``n_components``, the priors, ``learning_method``,
``max_iter``, …) are read here from the file's bytes by walking its pickle
opcodes with :func:`pickletools.genops`, a parser that runs nothing: classes
and functions the file names are recorded by name and never imported or
called. An estimator's pickled state is its ``__dict__``, whose first keys are
its constructor parameters in signature order (scikit-learn's ``__init__``
assigns them first), followed by what ``fit`` set. joblib writes each numpy
array's raw bytes into the stream right after a ``NumpyArrayWrapper``; the walk
stops there (the parameters all came before the first fitted array), so what
comes after it (``n_iter_``, ``bound_``) is not read. joblib's zlib, gzip, bz2
and xz/lzma compression is undone with the standard library, on a bounded
prefix; lz4 is not read.

What is read becomes the parameters of the learner that trains like scikit-learn:
``lda`` (the compiled port of scikit-learn's batch VB) for ``learning_method="batch"``,
``sklearn-lda`` (scikit-learn itself) for ``"online"``. What cannot be reproduced
(perplexity-based early stopping) or does not change a model's distribution
(``random_state``, ``n_jobs``, ``verbose``) is said, not used.
"""
from __future__ import annotations

import bz2
import io
import lzma
import math
import pickletools
import zlib
from dataclasses import dataclass, field
from typing import Any

PREFIX_BYTES = 4 << 20  # of the (decompressed) stream walked: the parameters are in its first kilobyte
SKLEARN_LDA = "LatentDirichletAllocation"
# scikit-learn's constructor defaults, to say which settings differ from them
DEFAULTS = {"n_components": 10, "doc_topic_prior": None, "topic_word_prior": None, "learning_method": "batch",
            "learning_decay": 0.7, "learning_offset": 10.0, "max_iter": 10, "batch_size": 128,
            "evaluate_every": -1, "total_samples": 1e6, "perp_tol": 1e-1, "mean_change_tol": 1e-3,
            "max_doc_update_iter": 100, "n_jobs": None, "verbose": 0, "random_state": None}
# passed to the shadows' learner as they are (online ones only when learning_method is "online")
ALWAYS = ("max_iter", "mean_change_tol", "max_doc_update_iter")
PRIORS = ("doc_topic_prior", "topic_word_prior")
ONLINE = ("learning_decay", "learning_offset", "batch_size", "total_samples")
NOT_USED = {
    "random_state": "the shadows draw their own seeds (a seed changes one fit, not how models like it leak)",
    "n_jobs": "parallelism changes no result", "verbose": "changes no result",
    "n_components": "the shadows learn Φ's number of rows (--k to change it)",
}


@dataclass
class SklearnSettings:
    """What the walk found: the estimator's class, its readable parameters, and what it could not read."""

    module: str
    name: str
    read: dict[str, Any] = field(default_factory=dict)            # literal parameters, as saved
    unreadable: dict[str, str] = field(default_factory=dict)      # parameter → why not read
    fitted: dict[str, Any] = field(default_factory=dict)          # literal fitted attributes before the first array
    complete: bool = False                                        # the whole state was walked (no array bytes)

    @property
    def is_lda(self) -> bool:
        return self.name == SKLEARN_LDA and self.module.startswith("sklearn.")


class _Global:
    def __init__(self, module: str, name: str):
        self.module, self.name = str(module), str(name)


class _Instance:
    def __init__(self, cls: Any):
        self.cls = cls if isinstance(cls, _Global) else None
        self.state: Any = None


class _Opaque:
    """Anything else a pickle would build from code."""


_OPAQUE = _Opaque()
_LITERALS = ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "BININT", "BININT1", "BININT2", "INT",
             "LONG1", "LONG4", "LONG", "BINFLOAT", "FLOAT", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8",
             "SHORT_BINSTRING", "BINSTRING", "STRING")


def _decompressed_prefix(raw: bytes) -> tuple[bytes | None, str | None]:
    """The first PREFIX_BYTES of the pickle stream, undoing joblib's compression; (None, why) when unreadable."""
    if raw[:1] == b"\x80" or raw[:1] in (b"(", b"c"):  # protocol 2+, or 0/1 starting with an object
        return raw[:PREFIX_BYTES], None
    try:
        if raw[:1] == b"x":  # joblib's zlib (compress=True or an integer level)
            return zlib.decompressobj().decompress(raw, PREFIX_BYTES), None
        if raw[:2] == b"\x1f\x8b":  # gzip
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, PREFIX_BYTES), None
        if raw[:3] == b"BZh":
            return bz2.BZ2Decompressor().decompress(raw, PREFIX_BYTES), None
        if raw[:6] == b"\xfd7zXZ\x00" or raw[:1] == b"\x5d":
            return lzma.LZMADecompressor().decompress(raw, PREFIX_BYTES), None
    except (zlib.error, OSError, lzma.LZMAError, EOFError, ValueError) as error:
        return None, f"its compressed stream could not be read ({type(error).__name__})"
    if raw[:4] == b"\x04\x22\x4d\x18":
        return None, "it is lz4-compressed, which this reader does not decompress"
    return None, "it is not a pickle stream this reader knows"


def _literal(value: Any) -> bool:
    if isinstance(value, (bool, int, str)) or value is None:
        return True
    return isinstance(value, float) and math.isfinite(value)


def _state_items(stack: list, marks: list[int], estimator: _Instance) -> tuple[list[Any], bool]:
    """The estimator's state so far as a flat key, value, … list, and whether it is a finished dict: its state if
    built, else the items on the stack after the mark that follows it."""
    if isinstance(estimator.state, dict):
        return [x for pair in estimator.state.items() for x in pair], True
    try:
        at = next(i for i, item in enumerate(stack) if item is estimator)
    except StopIteration:
        return [], False
    after = [m for m in marks if m > at]
    if not after:
        state = stack[at + 1] if at + 1 < len(stack) else None
        return ([x for pair in state.items() for x in pair], False) if isinstance(state, dict) else ([], False)
    end = next((m for m in after[1:]), len(stack))
    return stack[after[0]:end], False


def read_settings(raw: bytes) -> tuple[SklearnSettings | None, str | None]:
    """The settings of the estimator a joblib or pickle file holds, read without unpickling; (None, why) when the
    walk finds no estimator it can read."""
    data, why = _decompressed_prefix(raw)
    if data is None:
        return None, why
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    estimator: _Instance | None = None
    complete = False
    try:
        for op, arg, _ in pickletools.genops(io.BytesIO(data)):
            name = op.name
            if name in ("PROTO", "FRAME"):
                continue
            if name == "STOP":
                complete = True
                break
            if name == "MARK":
                marks.append(len(stack))
            elif name == "EMPTY_DICT":
                stack.append({})
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name in _LITERALS:
                stack.append(arg)
            elif name == "NONE":
                stack.append(None)
            elif name == "BYTEARRAY8":
                stack.append(_OPAQUE)  # an array's bytes (protocol 5): never a setting
            elif name in ("NEWTRUE", "NEWFALSE"):
                stack.append(name == "NEWTRUE")
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[memo_index(arg)] = stack[-1]
            elif name in ("BINGET", "LONG_BINGET", "GET"):
                stack.append(memo[memo_index(arg)])
            elif name == "SETITEM":
                value, key = stack.pop(), stack.pop()
                if isinstance(stack[-1], dict):
                    stack[-1][key] = value
            elif name == "APPEND":
                value = stack.pop()
                if isinstance(stack[-1], list):
                    stack[-1].append(value)
            elif name in ("SETITEMS", "APPENDS", "TUPLE", "LIST", "DICT"):
                start = marks.pop()
                items = stack[start:]
                del stack[start:]
                if name == "TUPLE":
                    stack.append(tuple(items))
                elif name == "LIST":
                    stack.append(list(items))
                elif name == "DICT":
                    stack.append(dict(zip(items[::2], items[1::2])) if all(map(_hashable, items[::2])) else {})
                elif name == "SETITEMS" and isinstance(stack[-1], dict) and all(map(_hashable, items[::2])):
                    stack[-1].update(zip(items[::2], items[1::2]))
                elif name == "APPENDS" and isinstance(stack[-1], list):
                    stack[-1].extend(items)
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                items = stack[-n:]
                del stack[-n:]
                stack.append(tuple(items))
            elif name == "GLOBAL":
                module, _, attribute = str(arg).partition(" ")
                stack.append(_Global(module, attribute))
            elif name == "STACK_GLOBAL":
                attribute, module = stack.pop(), stack.pop()
                stack.append(_Global(module, attribute))
            elif name in ("REDUCE", "NEWOBJ"):
                args = stack.pop()
                made = stack[-1]
                if name == "REDUCE" and isinstance(made, _Global) and made.module in ("copyreg", "copy_reg") \
                        and made.name == "_reconstructor" and isinstance(args, tuple) and args:
                    made = args[0]  # protocols 0 and 1: copyreg._reconstructor(cls, base, state) names the class
                stack[-1] = _Instance(made)
            elif name == "NEWOBJ_EX":
                del stack[-2:]
                stack[-1] = _Instance(stack[-1])
            elif name == "BUILD":
                state = stack.pop()
                target = stack[-1]
                if isinstance(target, _Instance):
                    target.state = state
                    if target.cls is not None and target.cls.module == "joblib.numpy_pickle" \
                            and target.cls.name == "NumpyArrayWrapper":
                        break  # the array's raw bytes follow: no more opcodes to walk
            elif name == "POP":
                stack.pop()
            elif name == "POP_MARK":
                del stack[marks.pop():]
            else:
                break  # persistent ids, extensions, out-of-band buffers: stop with what was read
            if estimator is None and stack and isinstance(stack[0], _Instance) and stack[0].cls is not None:
                estimator = stack[0]
    except (ValueError, IndexError, KeyError, TypeError):
        pass  # a truncated prefix or an opcode stream this walk does not follow: keep what was read
    if estimator is None or estimator.cls is None:
        return None, "no object the walk could name was found in the stream"
    found = SklearnSettings(estimator.cls.module, estimator.cls.name, complete=complete)
    items, finished = _state_items(stack, marks, estimator)
    for key, value in zip(items[::2], items[1::2]):
        if not isinstance(key, str):
            break
        fitted = key.endswith("_") or key.startswith("_")  # fitted attributes, and _sklearn_version
        if _literal(value):
            (found.fitted if fitted else found.read)[key] = value
            continue
        if not fitted:
            found.unreadable[key] = "not a plain value (an object the file builds from code)"
        if not finished and (fitted or isinstance(value, _Global)):
            break  # what follows may be the parts of an object still being built when the walk stopped
    return found, None


def memo_index(arg: Any) -> int:
    """A memo opcode's index (PUT, GET and their binary forms: genops reads an int for each); a TypeError, as a
    stream the walk does not follow, when there is none."""
    if arg is None:
        raise TypeError("a memo opcode without an index")
    return int(arg)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def shadow_settings(found: SklearnSettings, k: int) -> tuple[str, dict[str, Any], list[str], dict[str, Any]]:
    """The shadows' learner and parameters from a saved LDA's settings, the notes to print, and the record of what
    was read, used and not (audit.json's ``learner.model_settings``)."""
    read = found.read
    notes: list[str] = []
    not_used: dict[str, str] = {}
    method = read.get("learning_method", "batch")
    learner = "sklearn-lda" if method == "online" else "lda"
    params: dict[str, Any] = {}
    for name in ALWAYS + PRIORS:
        if name in read and read[name] is not None:
            params[name] = read[name]
    if method == "online":
        params["learning_method"] = "online"
        params.update({name: read[name] for name in ONLINE if name in read})
    elif method != "batch":
        notes.append(f"the saved model's learning_method={method!r} is not one scikit-learn documents; the shadows "
                     "use batch VB")
    for name in ONLINE:
        if name in read and method != "online":
            not_used[name] = "used by scikit-learn only when learning_method='online'"
    evaluate = read.get("evaluate_every", -1)
    if isinstance(evaluate, int) and evaluate > 0:
        not_used["evaluate_every"] = not_used["perp_tol"] = (
            f"the saved model evaluated perplexity every {evaluate} iteration(s) and may have stopped before "
            f"max_iter={read.get('max_iter')}; the shadows run max_iter iterations")
        notes.append(f"the saved model stops early on perplexity (evaluate_every={evaluate}, "
                     f"perp_tol={read.get('perp_tol')}), which the shadows do not: they run max_iter iterations")
    else:
        for name in ("evaluate_every", "perp_tol"):
            if name in read:
                not_used[name] = "no early stopping on perplexity (evaluate_every ≤ 0)"
    for name, why in NOT_USED.items():
        if name in read:
            not_used[name] = why
    n_components = read.get("n_components")
    if isinstance(n_components, int) and n_components != k:
        notes.append(f"the saved model says n_components={n_components} but Φ has {k} rows")
    unknown = sorted(set(read) - set(DEFAULTS))
    for name in unknown:
        not_used[name] = "not a LatentDirichletAllocation parameter this version of topicaudit knows"
    record = {
        "estimator": f"{found.module}.{found.name}",
        "read_without_unpickling": dict(read),
        "fitted_attributes_read": dict(found.fitted),
        "used": sorted(set(params) & set(read)),
        "not_used": not_used,
        "not_readable": {**found.unreadable, **({} if found.complete else {
            "n_iter_, bound_ and other fitted attributes after the first array": "joblib stores arrays as raw bytes "
            "in the stream; the walk stops at the first one"}),
            "the vectorizer's settings and the training documents": "not in the LatentDirichletAllocation object"},
    }
    if not read:
        notes.append("no setting of the saved scikit-learn model could be read; the shadows use the learner's "
                     "defaults (give yours with --param)")
    return learner, params, notes, record
