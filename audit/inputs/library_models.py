"""Saved gensim and tomotopy models: Φ, the vocabulary and the training settings.

``topicaudit audit`` reads these so the shadows are trained by the same
library with the same settings, without the user re-typing them.

tomotopy (``LDAModel.save``)
    tomotopy's own binary format, read by tomotopy's C++ loader in a child
    process with a time and a memory limit (a damaged file can crash, hang or
    exhaust that loader; :mod:`topicaudit.inputs.isolation`). The file also
    embeds the constructor arguments as a *pickle*, which ``LDAModel.load``
    unpickles; we never do: :func:`literal_pickle` reads that dictionary
    opcode by opcode and accepts only plain literals (numbers, strings, lists,
    None), so nothing in the file can run. No ``--trust-pickle`` needed.
gensim (``LdaModel.save``)
    a pickle of the model object (plus ``.state``, ``.id2word`` and ``.npy``
    files beside it). Loading one runs any code it holds, so it is refused
    unless the user passes ``--trust-pickle``; the file is identified by its
    first bytes only. The untrusted route is gensim's documented export:
    ``numpy.save("phi.npy", lda.get_topics())`` and
    ``lda.id2word.save_as_text("dictionary.txt")``, with the settings as
    ``--param``.
"""
from __future__ import annotations

import math
import pickletools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.errors import UserError
from topicaudit.inputs.bertopic_model import is_bertopic_pickle
from topicaudit.inputs.files import open_regular
from topicaudit.inputs.isolation import Damaged, Limits, describe, run_isolated
from topicaudit.inputs.sklearn_model import memo_index
from topicaudit.memory import available_memory
from topicaudit.targets.optional import require

TOMOTOPY_MAGIC = b"TPTK"          # in the first bytes of every tomotopy model file
_GENSIM_EXPORT = (
    "numpy.save('phi.npy', lda.get_topics()) and lda.id2word.save_as_text('dictionary.txt'), then "
    "topicaudit audit phi.npy --vocabulary dictionary.txt --learner gensim-lda --param passes=… (your settings)"
)


@dataclass
class LibraryModel:
    """What a saved model gives: Φ in its own column order, the words, and how to train shadows like it."""

    phi: np.ndarray                  # k × V, rows on the simplex (float64)
    words: list[str]                 # column j's word
    library: str                     # "gensim" or "tomotopy"
    learner: str                     # the registered learner that trains like it
    settings: dict[str, Any]         # that learner's parameters, as recovered
    notes: list[str] = field(default_factory=list)


# -- detection (reads a few bytes, never unpickles) ----------------------------------------
def sniff(path: Path) -> str | None:
    """"tomotopy", "gensim", "bertopic-pickle" or None, from the file's first bytes."""
    try:
        with open_regular(path, "model file") as handle:  # a FIFO would block a plain open()
            head = handle.read(256)
    except UserError:
        return None
    if TOMOTOPY_MAGIC in head[:32]:
        return "tomotopy"
    if head[:1] == b"\x80" and b"gensim.models" in head:
        return "gensim"
    if is_bertopic_pickle(head):
        return "bertopic-pickle"
    return None


# -- a pickle of literals, read without unpickling ------------------------------------------
class _Opaque:
    """Stands for anything a pickle builds from code (refused: we never call it)."""


_OPAQUE = _Opaque()


def _add(target, items: list) -> None:
    """SETITEM(S)/APPEND(S) on a literal container; an opaque one stays opaque."""
    if isinstance(target, dict):
        target.update(zip(items[::2], items[1::2]))
    elif isinstance(target, list):
        target.extend(items)


def literal_pickle(data: bytes) -> Any:
    """The value of a pickle that holds only literals (dict, list, tuple, str, numbers, None, bools).

    Walks the opcodes with :func:`pickletools.genops` (a parser: it runs
    nothing). Objects that would need a class or function (GLOBAL, REDUCE,
    BUILD, ...) become an opaque marker instead of being built. Returns None
    when the data is not a pickle this reader understands.
    """
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    try:
        for op, arg, _ in pickletools.genops(data):
            name = op.name
            if name in ("PROTO", "FRAME"):
                continue
            if name == "STOP":
                return None if isinstance(stack[-1], _Opaque) else stack[-1]
            if name == "MARK":
                marks.append(len(stack))
            elif name in ("EMPTY_DICT",):
                stack.append({})
            elif name in ("EMPTY_LIST",):
                stack.append([])
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "BININT", "BININT1",
                          "BININT2", "INT", "LONG1", "LONG4", "LONG", "BINFLOAT", "FLOAT", "SHORT_BINBYTES",
                          "BINBYTES", "BINBYTES8"):
                stack.append(arg)
            elif name == "NONE":
                stack.append(None)
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
                _add(stack[-1], [key, value])
            elif name == "APPEND":
                value = stack.pop()
                _add(stack[-1], [value])
            elif name in ("SETITEMS", "APPENDS", "TUPLE", "LIST", "DICT"):
                start = marks.pop()
                items = stack[start:]
                del stack[start:]
                if name == "TUPLE":
                    stack.append(tuple(items))
                elif name == "LIST":
                    stack.append(list(items))
                elif name == "DICT":
                    stack.append(dict(zip(items[::2], items[1::2])))
                else:
                    _add(stack[-1], items)
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                items = stack[-n:]
                del stack[-n:]
                stack.append(tuple(items))
            elif name in ("GLOBAL", "STACK_GLOBAL"):
                if name == "STACK_GLOBAL":
                    del stack[-2:]
                stack.append(_OPAQUE)
            elif name in ("REDUCE", "NEWOBJ"):
                del stack[-2:]
                stack.append(_OPAQUE)
            elif name == "NEWOBJ_EX":
                del stack[-3:]
                stack.append(_OPAQUE)
            elif name == "BUILD":
                del stack[-1:]
                stack[-1] = _OPAQUE
            elif name in ("POP",):
                stack.pop()
            else:
                return None  # anything else (persistent ids, extensions, ...): not a literal pickle
    except (ValueError, IndexError, KeyError, TypeError):
        return None
    return None


# -- tomotopy ------------------------------------------------------------------------------
TOMOTOPY_SECONDS = 20.0            # wall time for reading a model file, plus 1 s per MB
TOMOTOPY_MEMORY = 2 * 2**30        # address space for the reader, plus 40 bytes per byte of file
_RESAVE = "the file is truncated or corrupted: save the model again with LDAModel.save(path)"


def tomotopy_limits(path: Path) -> Limits:
    """Time and memory for reading ``path``: generous for an intact file of its size, bounded for a damaged one."""
    size = path.stat().st_size
    memory = TOMOTOPY_MEMORY + 40 * size
    available = available_memory()
    if available is not None:
        memory = min(memory, max(available, 2**30))
    return Limits(seconds=TOMOTOPY_SECONDS + size / 1e6, memory=memory)


def load_tomotopy(path: Path, limits: Limits | None = None) -> LibraryModel:
    """A tomotopy ``LDAModel`` file: Φ over its used vocabulary, and its settings.

    tomotopy's loader runs in a child process (:mod:`topicaudit.inputs.isolation`):
    a damaged file that crashes it, hangs it or exhausts its memory gives
    "damaged model file PATH: …" (exit 2), never a dead or frozen topicaudit.
    """
    require("tomotopy", "tomotopy", f"reading the tomotopy model {path}")
    try:
        answer, payload = run_isolated("topicaudit.inputs.tomotopy_reader", path, limits or tomotopy_limits(path))
    except Damaged as why:
        raise describe(path, str(why), _RESAVE) from None
    if "error" in answer:  # tomotopy raises plain Exceptions for other model types or damage
        raise UserError(
            f"{path}: not a readable tomotopy LDAModel file ({answer['error']}); save the model with "
            "LDAModel.save(path) (other tomotopy model types are not supported)"
        )
    if not answer.get("is_lda"):
        raise UserError(f"{path}: a tomotopy {answer.get('type')}, not an LDAModel; only LDAModel is supported")
    words = answer["words"]
    if not words or answer["global_step"] == 0:
        raise UserError(f"{path}: the tomotopy model has not been trained (no iterations); train it before saving")
    k, v = answer["shape"]
    if len(payload) != 8 * k * v or v != len(words):
        raise describe(path, f"the reader gave {len(payload)} bytes for a {k} × {len(words)} Φ", _RESAVE)
    phi = np.frombuffer(payload, dtype="<f8").reshape(k, v).astype(np.float64)
    init = literal_pickle(bytes.fromhex(answer["extra"]))
    notes: list[str] = []
    if not isinstance(init, dict):
        init = {}
        notes.append("the model file's initial settings could not be read as plain values; alpha is the model's "
                     "final (optimised) value and min_cf, min_df are taken as 0")
    term_weights = {0: "one", 1: "idf", 2: "pmi"}
    setting = _SavedSettings(path, init)
    settings = {
        "alpha": setting.alpha(answer["alpha"]),
        "eta": setting.number("eta", answer["eta"]),
        "tw": term_weights.get(answer["tw"], "one"),
        "min_cf": setting.count("min_cf"),
        "min_df": setting.count("min_df"),
        # The words tomotopy removed as the most frequent are not in its vocabulary, so the audit's
        # corpora are already without them; removing the top words again would remove others.
        "rm_top": 0,
        "iterations": int(answer["global_step"]),
        "burn_in": int(answer["burn_in"]),
        "optim_interval": int(answer["optim_interval"]),
    }
    rm_top = setting.count("rm_top")  # (a saved file keeps the number, not the removed words)
    if rm_top:
        notes.append(f"the model removed its {rm_top} most frequent word(s) (rm_top={rm_top}); they are outside its "
                     "vocabulary, so the shadows use rm_top=0 on corpora already without them")
    if isinstance(init.get("seed"), int) and not isinstance(init.get("seed"), bool):
        notes.append(f"the model was trained with seed {init['seed']}; the shadows use seeds of their own")
    return LibraryModel(phi, words, "tomotopy", "tomotopy-lda", settings, notes)


class _SavedSettings:
    """The constructor arguments saved in a tomotopy file, each checked for its type before use."""

    def __init__(self, path: Path, init: dict):
        self.path, self.init = path, init

    def _bad(self, name: str, value, kind: str) -> UserError:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return describe(self.path, f"its saved setting {name} is {shown}, not {kind}", _RESAVE)

    def _real(self, name: str, value) -> float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self._bad(name, value, "a number")
        try:
            number = float(value)
        except OverflowError:
            raise self._bad(name, value, "a finite number") from None
        if not math.isfinite(number) or number <= 0:
            raise self._bad(name, value, "a finite number > 0")
        return number

    def number(self, name: str, fallback: float) -> float:
        return self._real(name, self.init.get(name, fallback))

    def alpha(self, fallback: list[float]):
        value = self.init.get("alpha", fallback)
        if isinstance(value, (list, tuple)):
            return [self._real("alpha", a) for a in value]
        return self._real("alpha", value)

    def count(self, name: str) -> int:
        value = self.init.get(name, 0)
        if value is None:
            return 0
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
            raise self._bad(name, value, "a whole number ≥ 0")
        return value


# -- gensim --------------------------------------------------------------------------------
def _short(value, dtype) -> float:
    """A float32-stored setting as its shortest decimal (0.2, not 0.20000000298): same float32, readable."""
    return float(str(np.float32(value))) if np.dtype(dtype) == np.float32 else float(value)

def refuse_gensim(path: Path) -> UserError:
    return UserError(
        f"{path}: a gensim model saved with LdaModel.save, which is a pickle: loading it runs any code its author "
        f"put in it. Pass --trust-pickle only for a model you saved yourself or fully trust; otherwise export it: "
        f"{_GENSIM_EXPORT}"
    )


def load_gensim(path: Path) -> LibraryModel:
    """A gensim ``LdaModel``/``LdaMulticore`` saved with ``save`` (unpickled: call only with --trust-pickle)."""

    require("gensim", "gensim", f"reading the gensim model {path}")
    from gensim.models import LdaModel  # optional dependency (extra "gensim")

    try:
        model = LdaModel.load(str(path))
    except Exception as error:  # a damaged or partial save (e.g. the .state file missing)
        raise UserError(
            f"{path}: cannot load the gensim model ({type(error).__name__}: {error}); keep the files LdaModel.save "
            f"wrote beside it ({path.name}.state, {path.name}.id2word, ...), or export it: {_GENSIM_EXPORT}"
        ) from None
    if not isinstance(model, LdaModel):
        raise UserError(f"{path}: a gensim {type(model).__name__}, not an LdaModel; only LdaModel and "
                        "LdaMulticore are supported")
    if getattr(model, "state", None) is None:  # gensim loads without its .state file, then fails on first use
        raise UserError(
            f"{path}: the gensim model's state is missing (the file {path.name}.state that LdaModel.save wrote beside "
            f"it); copy it next to {path.name}, or export the model: {_GENSIM_EXPORT}"
        )
    if model.id2word is None:
        raise UserError(f"{path}: the gensim model has no dictionary (id2word); train it with id2word=dictionary")
    n_terms = int(model.num_terms)
    try:
        words = [str(model.id2word[j]) for j in range(n_terms)]
    except KeyError as error:
        raise UserError(f"{path}: the model's dictionary has no word for id {error}; ids must be 0..{n_terms - 1}") \
            from None
    try:
        phi, settings = _gensim_phi_and_settings(model)
    except (AttributeError, TypeError, ValueError, IndexError, KeyError, OverflowError) as error:
        raise UserError(f"{path}: cannot read the gensim model ({type(error).__name__}: {error}); the saved files "
                        f"are damaged or from an unsupported gensim version: export it: {_GENSIM_EXPORT}") from None
    notes = []
    if type(model).__name__ == "LdaMulticore":
        notes.append(f"{path} is an LdaMulticore model; the shadows use LdaModel with the same settings in one "
                     "process (LdaMulticore trains in worker processes, which a one-CPU shadow task does not start)")
    if settings["alpha"] == "auto" or settings["eta"] == "auto":
        notes.append("the model learned alpha/eta ('auto'); the shadows learn theirs the same way from gensim's start")
    return LibraryModel(phi, words, "gensim", "gensim-lda", settings, notes)


def _gensim_phi_and_settings(model) -> tuple[np.ndarray, dict[str, Any]]:
    """Φ and the training settings of a loaded gensim LdaModel (any attribute may be damaged)."""
    phi = model.get_topics().astype(np.float64)
    eta = np.asarray(model.eta, dtype=np.float64)
    settings = {
        "passes": int(model.passes), "chunksize": int(model.chunksize), "update_every": int(model.update_every),
        "alpha": "auto" if model.optimize_alpha else [_short(a, model.dtype) for a in np.atleast_1d(model.alpha)],
        "eta": "auto" if model.optimize_eta else (_short(eta.flat[0], model.dtype) if np.all(eta == eta.flat[0])
                                                  else [_short(e, model.dtype) for e in eta]),
        "decay": float(model.decay), "offset": float(model.offset), "iterations": int(model.iterations),
        "gamma_threshold": float(model.gamma_threshold),
        "eval_every": None if model.eval_every is None else int(model.eval_every),
        "minimum_probability": float(model.minimum_probability), "dtype": np.dtype(model.dtype).name,
    }
    return phi, settings
