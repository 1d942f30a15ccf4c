"""A user's Φ file: its format, its array read, and the checks every Φ gets.

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

Vocabulary files are read by :mod:`topicaudit.inputs.vocabulary_file`; a whole
model (Φ, its vocabulary, a saved library model's settings) is loaded by
:func:`topicaudit.inputs.user_model.load_user_model`.

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
import warnings
from pathlib import Path

import numpy as np

from topicaudit.errors import UserError
from topicaudit.inputs.bertopic_model import is_bertopic_dir
from topicaudit.inputs.files import read_user_file
from topicaudit.inputs.library_models import sniff
from topicaudit.inputs.sizes import BoundedNpz, load_numpy
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
    named = [k for k in NPZ_KEYS if k in keys]
    if len(named) > 1:  # the first was read and nothing said which: they may be different models
        raise UserError(f"{path}: the .npz archive holds both {' and '.join(repr(k) for k in named)}, and "
                        "topicaudit cannot tell which is the released Φ; save only the one to audit, e.g. "
                        "numpy.savez(path, phi=phi)")
    chosen = keys[0] if len(keys) == 1 else (named[0] if named else None)
    if chosen is None:
        raise UserError(
            f"{path}: the .npz archive holds {len(keys)} arrays ({', '.join(keys[:8])}) and none is named "
            f"{' or '.join(NPZ_KEYS)}; save Φ under the name 'phi' (numpy.savez(path, phi=phi))"
        )
    return archive[chosen]


def is_number(text: str) -> bool:
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
    if not all(is_number(cell) for cell in rows[0][1]):
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
    with np.errstate(over="ignore"):
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
    overflowed = ~np.isfinite(sums)
    if overflowed.any():
        # Weights near the float maximum summed to inf, and divided by it Φ became all zeros: every candidate's ζ 0
        # and its p-value 1e-58 (hostile pass XIX). Such rows are scaled by their largest entry first.
        arr = arr.copy()
        arr[overflowed] /= arr[overflowed].max(axis=1, keepdims=True)
        sums = arr.sum(axis=1)
        error = float(np.finfo(np.float64).max)  # beyond any float; audit.json holds no Infinity
    return arr / sums[:, None], error


