"""A user's released model: load Φ and its vocabulary, and validate them once.

Φ files (by extension):

``.npy``
    one 2-D numeric array (``numpy.save``); never unpickled.
``.npz``
    an archive holding one array, or several with one named ``phi`` or
    ``components_``; never unpickled.
``.csv``
    k lines of V comma-separated numbers (one topic per line). A first line
    that is not all numbers is a header and is skipped; when it names V words
    it must agree with the vocabulary, and it *is* the vocabulary when none is
    given. A header whose first cell is empty marks a leading index column
    (what ``pandas.DataFrame.to_csv`` writes), which is dropped.
``.joblib``, ``.pkl``, ``.pickle``
    a fitted scikit-learn ``LatentDirichletAllocation`` saved with ``joblib``
    (or a pickled array); Φ is its ``components_`` divided by their row sums.
    Unpickling runs whatever code the file holds, so it happens only when the
    caller says the file is trusted (``--trust-pickle``).
a tomotopy model (``LDAModel.save``, any name, recognised by its content)
    Φ, vocabulary and training settings from the model; never unpickled
    (:mod:`topicaudit.inputs.library_models`).
a gensim model (``LdaModel.save``, any name, recognised by its first bytes)
    a pickle: refused without ``--trust-pickle``; with it, Φ, vocabulary and
    settings from the model.
a BERTopic model directory (``save(path, serialization="safetensors", save_ctfidf=True)``)
    Φ = the c-TF-IDF matrix row-normalised, vocabulary and settings, read
    without BERTopic and without pickle (:mod:`topicaudit.inputs.bertopic_model`);
    a pickled BERTopic model (its default ``save``) is refused without
    ``--trust-pickle``.

Vocabulary files: ``.txt`` (one word per line, UTF-8), or ``.json`` (a list of
words, or an object word → column index such as ``CountVectorizer.vocabulary_``),
or gensim's ``Dictionary.save_as_text`` output (``id<TAB>word<TAB>document
frequency`` lines after a document-count line; column j is id j).

Checks: a 2-D numeric array, every value finite and non-negative
(:func:`check_phi`, for every Φ), and for a released model k ≥ 2 topics, every
row summing to 1 within a tolerance (or row-normalised on request, for
unnormalised weights such as scikit-learn's ``components_``), as many columns as
vocabulary words, distinct non-empty words (:func:`validate_phi`). Every failure
raises :class:`topicaudit.errors.UserError` naming the file and the fix.
"""
from __future__ import annotations

import csv
import io
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topicaudit.errors import UserError
from topicaudit.inputs.bertopic_model import (BERTopicModel, is_bertopic_dir, pickle_holds_verbatim,
                                               read_bertopic_dir, read_bertopic_pickle)
from topicaudit.inputs.files import file_sha256, read_user_file
from topicaudit.inputs.library_models import load_gensim, load_tomotopy, refuse_gensim, sniff
from topicaudit.inputs.sizes import BoundedNpz, load_numpy
from topicaudit.inputs.sklearn_model import read_settings, shadow_settings
from topicaudit.targets.params import check_topics

PHI_FORMATS = {".npy": "npy", ".npz": "npz", ".csv": "csv",
               ".joblib": "pickle", ".pkl": "pickle", ".pickle": "pickle"}
NPZ_KEYS = ("phi", "components_")
DEFAULT_ROW_SUM_TOLERANCE = 1e-3

_PICKLE_RISK = (
    "loading a pickle or joblib file runs any code its author put in it. Pass --trust-pickle only for a "
    "file you made yourself or fully trust; otherwise export Φ as an array, e.g. "
    "numpy.save('phi.npy', lda.components_ / lda.components_.sum(axis=1, keepdims=True))"
)


@dataclass
class UserModel:
    """Φ (k × V float64, rows on the simplex) and its words, sorted alphabetically.

    Columns are reordered with the words so that they line up with
    :class:`topicaudit.inputs.corpus.Corpus` columns (which are always sorted).
    """

    phi: np.ndarray
    vocabulary: np.ndarray
    phi_path: Path
    phi_sha256: str
    phi_format: str
    vocabulary_path: Path | None
    vocabulary_sha256: str | None
    normalized: bool              # rows were divided by their sums (--normalize or components_)
    max_row_sum_error: float      # |row sum − 1| before the exact renormalisation
    n_zero_columns: int           # words with probability 0 under every topic (never scored)
    column_words: np.ndarray | None = None   # the words in the model's own column order (gensim ids)
    library: str | None = None    # "gensim" / "tomotopy" for a saved library model
    learner: str | None = None    # the learner that trains like it
    settings: dict | None = None  # that learner's parameters, recovered from the saved model
    notes: list | None = None     # what the reader had to assume about those settings
    learners: tuple | None = None  # the learners the settings apply to (default: ``learner`` alone)
    settings_record: dict | None = None  # what was read from the file, used and not (audit.json)
    verbatim: list | None = None  # where the saved model holds training text verbatim (said first by the audit)

    @property
    def k(self) -> int:
        return self.phi.shape[0]




# -- Φ --------------------------------------------------------------------------------
def phi_format(path: Path) -> str:

    if is_bertopic_dir(path):
        return "bertopic"
    # A tomotopy, gensim or BERTopic pickle by its first bytes (whatever its name), else by extension.
    fmt = sniff(path) or PHI_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UserError(
            f"{path}: unknown Φ file type {path.suffix or '(no extension)'!r}; give a .npy or .npz array, "
            "a .csv of k rows × V numbers, a tomotopy LDAModel file, a gensim LdaModel saved with save() "
            "(with --trust-pickle), a BERTopic model directory (save(path, serialization='safetensors', "
            "save_ctfidf=True)), or a joblib-saved scikit-learn LatentDirichletAllocation "
            "(.joblib/.pkl, with --trust-pickle)"
        )
    return fmt


def read_phi(path: Path, trust_pickle: bool = False) -> tuple[np.ndarray, list[str] | None, bool]:
    """The raw matrix, the words a CSV header names (else None), and whether it is unnormalised by nature."""
    path = Path(path)
    fmt = phi_format(path)
    if fmt == "pickle":
        if not trust_pickle:
            raise UserError(f"{path}: refusing to unpickle the Φ file without --trust-pickle: {_PICKLE_RISK}")
        read_user_file(path, "Φ file")  # clear messages for missing or unreadable files before joblib sees it
        phi, is_components = _read_pickled(path)
        return phi, None, is_components
    raw = read_user_file(path, "Φ file")
    if fmt == "csv":
        phi, header = _read_csv(path, raw)
        return phi, header, False
    loaded = load_numpy(raw, str(path))  # the declared shape is checked against memory before it is read
    if isinstance(loaded, BoundedNpz):
        with loaded:
            return _pick_npz_array(path, loaded), None, False
    if fmt == "npz":
        raise UserError(f"{path}: is a .npy array, not a .npz archive; rename it to .npy")
    return loaded, None, False


def _pick_npz_array(path: Path, archive) -> np.ndarray:
    keys = list(archive.files)
    if not keys:
        raise UserError(f"{path}: the .npz archive is empty; save Φ in it, e.g. numpy.savez(path, phi=phi)")
    chosen = keys[0] if len(keys) == 1 else next((k for k in NPZ_KEYS if k in keys), None)
    if chosen is None:
        raise UserError(
            f"{path}: the .npz archive holds {len(keys)} arrays ({', '.join(keys[:8])}) and none is named "
            f"{' or '.join(NPZ_KEYS)}; save Φ under the name 'phi' (numpy.savez(path, phi=phi))"
        )
    return archive[chosen]


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _read_csv(path: Path, raw: bytes) -> tuple[np.ndarray, list[str] | None]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text (byte {error.start}); save the CSV as UTF-8") from None
    rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text)), start=1)
            if any(cell.strip() for cell in row)]
    if not rows:
        raise UserError(f"{path}: the CSV file is empty; it must hold k lines of V numbers (one topic per line)")
    header = None
    if not all(_is_number(cell) for cell in rows[0][1]):
        header = [cell.strip() for cell in rows[0][1]]
        rows = rows[1:]
        if header and header[0] == "":  # pandas' unnamed index column
            header = header[1:]
            rows = [(n, row[1:]) for n, row in rows]
    if not rows:
        raise UserError(f"{path}: the CSV file has a header line but no rows of numbers; write one topic per line")
    width = len(rows[0][1])
    values = np.empty((len(rows), width), dtype=np.float64)
    for i, (lineno, row) in enumerate(rows):
        if len(row) != width:
            raise UserError(
                f"{path}, line {lineno}: {len(row)} values, but line {rows[0][0]} has {width}; every line of Φ "
                "must hold one value per vocabulary word"
            )
        for j, cell in enumerate(row):
            try:
                values[i, j] = float(cell)
            except ValueError:
                raise UserError(
                    f"{path}, line {lineno}, column {j + 1}: {cell.strip()[:40]!r} is not a number; a Φ CSV holds "
                    "only numbers (one optional header line; no row labels except a pandas index column)"
                ) from None
    if header is not None and len(header) != width:
        raise UserError(
            f"{path}, line 1: the header has {len(header)} cells but the rows have {width} values; "
            "remove the header or make it name one word per column"
        )
    return values, header


def _read_pickled(path: Path) -> tuple[np.ndarray, bool]:
    """The array, and whether it is an LDA's unnormalised components_."""
    import joblib  # only for scikit-learn model files; keeps `topicaudit --help` fast

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn version notes are not the user's problem here
            obj = joblib.load(path)
    except Exception as error:  # noqa: BLE001 - any unpickling failure means the file is not a saved model
        raise UserError(
            f"{path}: cannot load it with joblib ({type(error).__name__}: {error}); save the fitted model with "
            "joblib.dump(lda, path), or export Φ as a .npy array"
        ) from None
    if isinstance(obj, np.ndarray):
        return obj, False
    from sklearn.decomposition import LatentDirichletAllocation  # heavy; only for scikit-learn model files

    if not isinstance(obj, LatentDirichletAllocation):
        raise UserError(
            f"{path}: holds a {type(obj).__module__}.{type(obj).__name__}, not a scikit-learn "
            "LatentDirichletAllocation; give the fitted LDA model or export Φ as a .npy array"
        )
    if not hasattr(obj, "components_"):
        raise UserError(f"{path}: the LatentDirichletAllocation was never fitted (no components_); fit it, then save it")
    return np.asarray(obj.components_), True


def check_phi(phi, where) -> np.ndarray:
    """Φ as a float64 k × V array of finite non-negative numbers (no copy when it is one); ``where`` names its source.

    The checks every Φ gets, a user's file or a learner's release; ``validate_phi``
    adds those of a released model (k ≥ 2, vocabulary, rows on the simplex).
    """
    arr = np.asarray(phi)
    if not np.issubdtype(arr.dtype, np.number):
        raise UserError(f"{where}: Φ holds {arr.dtype} values, not numbers; save a numeric k × V array")
    if arr.ndim != 2:
        raise UserError(
            f"{where}: Φ must be a 2-D array, topics × words (k × V), but has shape {arr.shape}; "
            "save the topic-word matrix itself"
        )
    if np.iscomplexobj(arr):
        raise UserError(f"{where}: Φ holds complex numbers; save a real-valued array")
    arr = np.asarray(arr, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise UserError(
            f"{where}: Φ holds {int(bad.sum())} NaN or infinite value(s), first at row {i}, column {j} "
            f"({arr[i, j]}); every entry must be a finite probability"
        )
    negative = arr < 0
    if negative.any():
        i, j = np.argwhere(negative)[0]
        raise UserError(
            f"{where}: Φ holds {int(negative.sum())} negative value(s), first at row {i}, column {j} "
            f"({arr[i, j]:g}); every entry must be a non-negative probability"
        )
    return arr


def check_saved_phi(phi, path: Path) -> None:
    """A Φ reloaded from a run directory: finite and non-negative, or one message naming the file.

    Checked where the file is read, so a damaged file is named here rather
    than failing later inside a Ray task that knows no file name.
    """
    try:
        check_phi(phi, path)
    except UserError as error:
        raise UserError(f"{error}; the file is damaged: delete it and rerun the same command to refit that model") \
            from None


def validate_phi(phi, path: Path, n_words: int | None, normalize: bool,
                 tolerance: float = DEFAULT_ROW_SUM_TOLERANCE, vocabulary_path: Path | None = None
                 ) -> tuple[np.ndarray, float]:
    """Φ as float64 with rows exactly on the simplex, and the largest |row sum − 1| found before rescaling."""
    arr = check_phi(phi, path)
    k, v = arr.shape
    if n_words is not None and v != n_words and k == n_words:
        raise UserError(
            f"{path}: Φ has shape {arr.shape}, words × topics; it must be topics × words (k × V): save its "
            "transpose (phi.T)"
        )
    check_topics(k, f"{path}: Φ has {k} row(s); k", "save Φ as topics × words (k × V), one row per topic")
    if v < 1:
        raise UserError(f"{path}: Φ has no columns; it must have one column per vocabulary word")
    if n_words is not None and v != n_words:
        where = f"the vocabulary {vocabulary_path}" if vocabulary_path else "the vocabulary"
        raise UserError(
            f"{path}: Φ has {v} columns but {where} has {n_words} words; they must match one to one "
            "(column j of Φ is the j-th vocabulary word) — give the vocabulary the model was trained with"
        )
    sums = arr.sum(axis=1)
    zero = np.flatnonzero(sums == 0)
    if zero.size:
        raise UserError(f"{path}: row {zero[0]} of Φ is all zeros; every topic must be a distribution over words")
    error = float(np.abs(sums - 1).max())
    if not normalize and error > tolerance:
        row = int(np.argmax(np.abs(sums - 1)))
        raise UserError(
            f"{path}: row {row} of Φ sums to {sums[row]:.6g}, not 1 (tolerance {tolerance:g}); rows must be "
            "topic-word distributions. If these are unnormalised weights (like scikit-learn's components_), "
            "pass --normalize to divide each row by its sum"
        )
    return arr / sums[:, None], error


# -- vocabulary ---------------------------------------------------------------------------
def read_vocabulary(path: Path) -> list[str]:
    """Words in column order from a .txt (one per line) or .json (list, or word → index) file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".txt", ".json"):
        raise UserError(
            f"{path}: unknown vocabulary file type {path.suffix or '(no extension)'!r}; give a .txt file with "
            "one word per line or a .json list of words"
        )
    raw = read_user_file(path, "vocabulary file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise UserError(f"{path}, line {line}: not valid UTF-8; save the vocabulary as UTF-8") from None
    if suffix == ".txt" and _is_gensim_dictionary(text):
        return read_gensim_dictionary(path, text)
    if suffix == ".txt":
        lines = text.splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        words = []
        for n, line in enumerate(lines, start=1):
            word = line.strip()
            if not word:
                raise UserError(f"{path}, line {n}: empty line; the vocabulary holds one word per line, no blanks")
            words.append(word)
        where = "line"
        offset = 1
    else:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as error:
            raise UserError(
                f"{path}, line {error.lineno}, column {error.colno}: invalid JSON ({error.msg}); the vocabulary "
                'is a JSON list of words, e.g. ["apple", "banana"]'
            ) from None
        words = _json_words(path, obj)
        where, offset = "entry", 0
    if not words:
        raise UserError(f"{path}: the vocabulary is empty; it must list one word per column of Φ")
    seen: dict[str, int] = {}
    for i, word in enumerate(words):
        if word in seen:
            raise UserError(
                f"{path}: the word {str(word)!r} appears twice ({where}s {seen[word] + offset} and {i + offset}); "
                "vocabulary words must be distinct"
            )
        seen[word] = i
    return words


_GENSIM_LINE = re.compile(r"\d+\t[^\t]+\t\d+")


def _is_gensim_dictionary(text: str) -> bool:
    """gensim's ``Dictionary.save_as_text``: a document count, then ``id<TAB>word<TAB>df`` lines."""
    lines = text.splitlines()
    return len(lines) >= 2 and lines[0].strip().isdigit() and bool(_GENSIM_LINE.fullmatch(lines[1]))


def read_gensim_dictionary(path: Path, text: str | None = None) -> list[str]:
    """Words by id from a gensim ``Dictionary.save_as_text`` file (ids must be 0..n-1, as gensim numbers them)."""
    path = Path(path)
    if text is None:
        raw = read_user_file(path, "gensim dictionary file")
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise UserError(f"{path}: not valid UTF-8; gensim writes its dictionary as UTF-8") from None
    lines = text.splitlines()
    by_id: dict[int, str] = {}
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if not _GENSIM_LINE.fullmatch(line):
            raise UserError(f"{path}, line {n}: expected 'id<TAB>word<TAB>document frequency' as gensim's "
                            f"Dictionary.save_as_text writes, got {line[:60]!r}")
        word_id, word, _ = line.split("\t")
        if int(word_id) in by_id:
            raise UserError(f"{path}, line {n}: id {word_id} appears twice; each id names one word")
        by_id[int(word_id)] = word
    missing = sorted(set(range(len(by_id))) - set(by_id))
    if missing:
        raise UserError(f"{path}: the ids are not 0..{len(by_id) - 1} (id {missing[0]} is missing); save the "
                        "dictionary after compactify() (filter_extremes does that), as the model's columns are its ids")
    words = [by_id[i] for i in range(len(by_id))]
    seen: dict[str, int] = {}
    for i, word in enumerate(words):
        if word in seen:
            raise UserError(f"{path}: the word {word!r} has ids {seen[word]} and {i}; vocabulary words must be distinct")
        seen[word] = i
    return words


def _json_words(path: Path, obj) -> list[str]:
    if isinstance(obj, list):
        for i, word in enumerate(obj):
            if not isinstance(word, str) or not word.strip():
                raise UserError(
                    f"{path}: entry {i} of the vocabulary list is {json.dumps(word)[:40]}, not a word; "
                    "every entry must be a non-empty string"
                )
        return [w.strip() for w in obj]
    if isinstance(obj, dict):  # CountVectorizer.vocabulary_: word → column index
        n = len(obj)
        words: list[str | None] = [None] * n
        for word, index in obj.items():
            if not word.strip():
                raise UserError(f"{path}: an empty word maps to column {index}; every word must be non-empty")
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n or words[index] is not None:
                raise UserError(
                    f"{path}: word {str(word)!r} maps to {json.dumps(index)}; a word → column object (like "
                    f"CountVectorizer.vocabulary_) must map its {n} words to the distinct columns 0..{n - 1}"
                )
            words[index] = word.strip()
        return words  # type: ignore[return-value]
    raise UserError(
        f"{path}: the top level is not a list; the vocabulary is a JSON list of words, e.g. "
        '["apple", "banana"], or an object word → column index'
    )


# -- together -------------------------------------------------------------------------------
def load_user_model(phi_path, vocabulary_path=None, trust_pickle: bool = False, normalize: bool = False,
                    tolerance: float = DEFAULT_ROW_SUM_TOLERANCE) -> UserModel:
    """Load and validate Φ and its vocabulary; columns sorted by word."""
    phi_path = Path(phi_path)
    if not tolerance > 0:
        raise UserError(f"the row-sum tolerance must be a positive number (got {tolerance})")
    fmt = phi_format(phi_path)
    if fmt in ("tomotopy", "gensim"):
        return _load_library_model(phi_path, fmt, vocabulary_path, trust_pickle, tolerance)
    if fmt in ("bertopic", "bertopic-pickle"):
        return _load_bertopic(phi_path, fmt, vocabulary_path, trust_pickle, tolerance)
    words = read_vocabulary(Path(vocabulary_path)) if vocabulary_path is not None else None
    phi, header, by_nature = read_phi(phi_path, trust_pickle=trust_pickle)
    if words is None:
        if header is None or any(_is_number(w) or not w for w in header):
            raise UserError(
                f"{phi_path}: no vocabulary given; pass --vocabulary (a .txt file with one word per line, in "
                "Φ's column order) — only a CSV whose header line names the words needs none"
            )
        words = header
        seen: dict[str, int] = {}
        for i, word in enumerate(words):
            if word in seen:
                raise UserError(f"{phi_path}, line 1: the header names {str(word)!r} twice (columns {seen[word] + 1} "
                                f"and {i + 1}); vocabulary words must be distinct")
            seen[word] = i
    elif header is not None and len(header) == len(words) and header != words:
        j = next(i for i, (a, b) in enumerate(zip(header, words)) if a != b)
        raise UserError(
            f"{phi_path}, line 1: the CSV header names column {j + 1} {str(header[j])!r} but {vocabulary_path} "
            f"gives {str(words[j])!r}; the vocabulary must list Φ's columns in order (or drop the header)"
        )
    phi, error = validate_phi(phi, phi_path, len(words), normalize or by_nature, tolerance,
                              Path(vocabulary_path) if vocabulary_path is not None else None)
    vocab = np.array(words, dtype=str)
    order = np.argsort(vocab, kind="stable")
    sklearn = _sklearn_settings(phi_path, phi.shape[0]) if phi_format(phi_path) == "pickle" and by_nature else {}
    return UserModel(
        phi=np.ascontiguousarray(phi[:, order]),
        vocabulary=vocab[order],
        phi_path=phi_path,
        phi_sha256=file_sha256(phi_path),
        phi_format=phi_format(phi_path),
        vocabulary_path=Path(vocabulary_path) if vocabulary_path is not None else None,
        vocabulary_sha256=file_sha256(Path(vocabulary_path)) if vocabulary_path is not None else None,
        normalized=bool(normalize or by_nature),
        max_row_sum_error=error,
        n_zero_columns=int(np.count_nonzero(phi.max(axis=0) == 0)),
        column_words=vocab,
        **sklearn,
    )


def _sklearn_settings(path: Path, k: int) -> dict:
    """A saved scikit-learn LDA's training settings as UserModel fields, read from the file's bytes without
    unpickling (:mod:`topicaudit.inputs.sklearn_model`); a note, and no settings, when they cannot be read."""
    found, why = read_settings(read_user_file(path, "Φ file"))
    if found is None or not found.is_lda:
        what = why or f"it holds a {found.module}.{found.name}"
        return {"library": "scikit-learn", "notes": [
            f"{path}: the scikit-learn model's settings could not be read without unpickling ({what}); the shadows "
            "use the learner's defaults: give your settings with --param"]}
    learner, params, notes, record = shadow_settings(found, k)
    return {"library": "scikit-learn", "learner": learner, "settings": params, "notes": notes,
            "learners": ("sklearn-lda",) if learner == "sklearn-lda" else ("lda", "sklearn-lda"),
            "settings_record": record}


def _load_library_model(path: Path, fmt: str, vocabulary_path, trust_pickle: bool, tolerance: float) -> UserModel:
    """A saved tomotopy or gensim model: Φ, words and settings all come from the model."""

    if vocabulary_path is not None:
        raise UserError(f"{path}: a saved {fmt} model carries its own vocabulary; drop --vocabulary "
                        f"({vocabulary_path})")
    read_user_file(path, "model file")  # clear messages for unreadable files before the library sees it
    if fmt == "gensim" and not trust_pickle:
        raise refuse_gensim(path)
    saved = load_tomotopy(path) if fmt == "tomotopy" else load_gensim(path)
    phi, error = validate_phi(saved.phi, path, len(saved.words), True, tolerance, None)
    vocab = np.array(saved.words, dtype=str)
    order = np.argsort(vocab, kind="stable")
    settings = dict(saved.settings)
    if isinstance(settings.get("eta"), list) and len(settings["eta"]) == vocab.size:
        settings["eta"] = [settings["eta"][j] for j in order]  # per-word prior follows the sorted columns
    return UserModel(
        phi=np.ascontiguousarray(phi[:, order]), vocabulary=vocab[order], phi_path=path,
        phi_sha256=file_sha256(path), phi_format=fmt, vocabulary_path=None, vocabulary_sha256=None,
        normalized=True, max_row_sum_error=error, n_zero_columns=int(np.count_nonzero(phi.max(axis=0) == 0)),
        column_words=vocab, library=saved.library, learner=saved.learner, settings=settings, notes=saved.notes,
    )


def _load_bertopic(path: Path, fmt: str, vocabulary_path, trust_pickle: bool, tolerance: float) -> UserModel:
    """A saved BERTopic model: Φ (the c-TF-IDF rows normalised), its words and the shadows' settings."""
    if vocabulary_path is not None:
        raise UserError(f"{path}: a saved BERTopic model carries its own vocabulary; drop --vocabulary "
                        f"({vocabulary_path})")
    if fmt == "bertopic-pickle":
        read_user_file(path, "model file")
        if not trust_pickle:
            held = pickle_holds_verbatim(path)
            also = (f" The file also holds {', '.join(held)}: training documents verbatim, readable by anyone who "
                    "loads it." if held else "")
            raise UserError(
                f"{path}: a BERTopic model saved with save() (serialization='pickle', its default), which is a "
                f"pickle: loading it runs any code its author put in it.{also} Pass --trust-pickle only for a model "
                "you saved yourself or fully trust; otherwise save it in BERTopic's safe format: "
                "model.save(path, serialization='safetensors', save_ctfidf=True)")
        saved: BERTopicModel = read_bertopic_pickle(path)
        digest = file_sha256(path)
    else:
        saved = read_bertopic_dir(path)
        digest = saved.digest
    phi, error = validate_phi(saved.phi, path, len(saved.words), True, tolerance, None)
    vocab = np.array(saved.words, dtype=str)
    order = np.argsort(vocab, kind="stable")
    return UserModel(
        phi=np.ascontiguousarray(phi[:, order]), vocabulary=vocab[order], phi_path=path, phi_sha256=digest,
        phi_format=fmt, vocabulary_path=None, vocabulary_sha256=None, normalized=True, max_row_sum_error=error,
        n_zero_columns=int(np.count_nonzero(phi.max(axis=0) == 0)), column_words=vocab, library="bertopic",
        learner="bertopic", settings=dict(saved.settings), notes=list(saved.notes), verbatim=list(saved.verbatim),
        settings_record=_bertopic_record(saved) if fmt == "bertopic" else None,
    )


def _bertopic_record(saved: BERTopicModel) -> dict:
    """audit.json's ``learner.model_settings`` for a BERTopic directory, shaped like a scikit-learn model's."""
    read = {**saved.settings, "embedding_model": saved.embedding_model, "outlier_topic": saved.record["outlier_topic"],
            "topics": len(saved.topic_ids), "training_documents": saved.n_documents}
    return {"estimator": "bertopic.BERTopic (safetensors directory)", "read_without_unpickling": read,
            "used": sorted(saved.settings),
            "not_used": {"embedding_model": "the shadows embed offline with TF-IDF + truncated SVD (docs/bertopic.md)",
                         "outlier_topic": "kept as a row of Φ; the shadows keep theirs (and it makes clustering hdbscan)",
                         "topics": "the shadows' k (with HDBSCAN a cap: twice it)",
                         "training_documents": "information only"},
            "details": saved.record}
