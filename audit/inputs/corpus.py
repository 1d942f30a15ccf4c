"""Corpora: read documents, pre-process them, count words.

Every loader returns a :class:`Corpus`: a canonical CSR count matrix (documents
× words, float64), its alphabetically sorted vocabulary, and where each row
came from. Input formats (``load_corpus(path, format=...)``):

``json``
    A JSON object whose field (default ``"text"``, option ``text_field``) is a
    list of strings, one per document: ``{"text": ["first doc", ...]}``. Or a
    list of *token lists*, ``{"text": [["first", "doc"], ...]}``: documents
    already tokenised (as gensim and tomotopy models are trained), counted
    token by token exactly as given, with no pre-processing or tokenising.
``mm``
    gensim's ``MmCorpus`` (Matrix Market coordinate file, 1-based document
    and term ids) with the dictionary its term ids refer to (option
    ``dictionary``: gensim's ``Dictionary.save_as_text`` file, or a list of
    words in id order). Counts are used as they are; there is no text.
``uci``
    UCI "Bag of Words": ``docword.NAME.txt`` (or ``.txt.gz``) with three
    header lines D, W, NNZ and then ``docID wordID count`` lines (1-based),
    and ``vocab.NAME.txt`` beside it (word *i* on line *i*) or given with the
    option ``vocab``. Counts are used as they are; there is no text.
``20news``
    The 20 Newsgroups "bydate" tarball (``20news-bydate-{train,test}/GROUP/ID``
    members, Latin-1), read directly from the archive (nothing is extracted).
    Options: ``subset`` = ``"train"`` (default), ``"test"`` or ``"all"``;
    ``remove`` = any of ``"headers"``, ``"footers"``, ``"quotes"``, default
    all three, as scikit-learn's ``fetch_20newsgroups(remove=...)`` (and its
    topic-extraction example): topic models should learn from the message
    bodies, not from e-mail addresses and signatures. Pass ``remove=()`` to
    keep the posts whole. Posts are in path order (train before test, then
    group, then file name); ``texts`` holds each post after removal.
``folder``
    A directory of text files, read recursively in sorted path order (hidden
    files and directories, names starting with ``.``, are skipped). Files are
    decoded as UTF-8 unless the option ``encoding`` says otherwise.

Text formats are pre-processed with :mod:`topicaudit.inputs.preprocess` unless the caller
says the text is already pre-processed (``preprocess=False``); then it is
tokenised like scikit-learn's ``CountVectorizer()`` defaults. Documents left
without any word are dropped, for every format including ``uci`` (a UCI
document with no counts is dropped the same way): ``n_dropped_empty`` counts
them and ``doc_index`` gives each kept row's position in the input. UCI
vocabulary words that no document uses are kept as (all-zero) columns: the
vocabulary file defines the columns.

Counting over a fixed vocabulary (``vocabulary=``, every format): the
columns are exactly the given words (sorted, as always); tokens outside them
are dropped, and documents left without any of them are dropped and counted
like empty ones. This is how documents are scored against a released model
whose vocabulary is fixed (``topicaudit audit``).

``doc_ids`` names each kept row in the input's own terms: the file path
relative to the folder (``folder``), the archive member (``20news``), the
1-based docID (``uci``), the 0-based list position otherwise.

Every mistake in an input file raises :class:`topicaudit.errors.UserError` with the
file, the line or field, and the fix.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import json
import os
import re
import tarfile
import warnings
import zlib
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.phi_io import read_vocabulary
from topicaudit.inputs.preprocess import preprocess_corpus, tokenize_like_countvectorizer
from topicaudit.inputs.files import read_user_file
from topicaudit.inputs.sizes import check_bytes, gunzip
from topicaudit.targets.counts import check_counts

__all__ = [
    "Corpus",
    "KNOWN_FORMATS",
    "corpus_from_counts",
    "corpus_from_texts",
    "load_corpus",
]

KNOWN_FORMATS = ("json", "uci", "20news", "folder", "mm")
TWENTY_NEWS_PARTS = ("headers", "footers", "quotes")
DEFAULT_20NEWS_REMOVE = TWENTY_NEWS_PARTS
_FORMAT_OPTIONS = {
    "json": ("text_field",),
    "uci": ("vocab",),
    "20news": ("subset", "remove"),
    "folder": ("encoding",),
    "mm": ("dictionary",),
}


@dataclass
class Corpus:
    """A corpus as counts.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix
        (n_docs, n_words) float64 word counts, canonical (sorted indices, no
        duplicates); every row has at least one count.
    vocabulary : numpy.ndarray
        str array of length n_words, sorted alphabetically (like
        ``CountVectorizer.get_feature_names_out()``).
    texts : list[str] or None
        The text of each row (``None`` for bag-of-words input).
    source : str
        Human description: path, format and processing.
    doc_index : numpy.ndarray
        int64, the position in the input of each kept row.
    n_dropped_empty : int
        Documents dropped because they had no word (after pre-processing, and
        within the given vocabulary when there is one).
    doc_ids : list[str] or None
        The input's own name of each kept row (see the module docstring);
        None when not known (then ``doc_index`` is the only identity).
    """

    X: sp.csr_matrix
    vocabulary: np.ndarray
    texts: list[str] | None
    source: str
    doc_index: np.ndarray
    n_dropped_empty: int
    doc_ids: list[str] | None = None

    @property
    def n_docs(self) -> int:
        return self.X.shape[0]

    @property
    def n_words(self) -> int:
        return self.X.shape[1]

    @property
    def n_tokens(self) -> int:
        """Total word count (sum of X)."""
        return int(round(self.X.sum()))

    def __repr__(self) -> str:
        return (
            f"Corpus({self.n_docs} documents, {self.n_words} words, {self.n_tokens} tokens, "
            f"{self.n_dropped_empty} empty dropped; {self.source})"
        )


# --------------------------------------------------------------------------- #
# Public entry points
# --------------------------------------------------------------------------- #


def load_corpus(path, format=None, preprocess=None, text_field="text", vocabulary=None, **options) -> Corpus:
    """Load a corpus from a file or directory (or a list of strings).

    Parameters
    ----------
    path : str, os.PathLike or sequence of str
        The input. A list or tuple of strings is taken as the documents
        themselves (see :func:`corpus_from_texts`).
    format : {"json", "uci", "20news", "folder"} or None
        None detects it from the path: a directory is ``folder``, ``*.json``
        is ``json``, ``docword*.txt`` (or ``.txt.gz``) is ``uci``,
        ``*.tar.gz`` / ``*.tgz`` is ``20news``.
    preprocess : bool or None
        For text formats: True (the default when None) applies the
        pre-processing of :mod:`topicaudit.inputs.preprocess`; False says the text is
        already pre-processed and only tokenises it like ``CountVectorizer()``.
        Not applicable to ``uci`` (must be None or False).
    text_field : str
        ``json`` only: the field holding the list of documents.
    vocabulary : sequence of str or None
        Count only these words (distinct, non-empty strings; any order): the
        corpus's columns are exactly these words, sorted; other tokens are
        dropped, and documents left without a word are dropped and counted in
        ``n_dropped_empty``. None (the default): the words the documents use.
    **options
        ``uci``: ``vocab`` (path of the vocabulary file). ``20news``:
        ``subset``, ``remove``. ``folder``: ``encoding``.

    Returns
    -------
    Corpus
    """
    if preprocess is not None and not isinstance(preprocess, bool):
        raise UserError(f"preprocess must be true, false or unset, got {preprocess!r}")
    if isinstance(path, (list, tuple)):
        if format is not None or options or text_field != "text":
            raise UserError(
                "a list of documents takes no format or options; "
                "give only the documents (and preprocess)"
            )
        return corpus_from_texts(path, preprocess=True if preprocess is None else preprocess,
                                 vocabulary=vocabulary)
    if not isinstance(path, (str, os.PathLike)):
        raise UserError(
            f"corpus path must be a file or directory path (or a list of strings), "
            f"got {type(path).__name__}"
        )
    path = Path(path)
    if format is None:
        format = detect_format(path)
    elif format not in KNOWN_FORMATS:
        raise UserError(
            f"unknown corpus format {format!r}; known formats: {', '.join(KNOWN_FORMATS)}"
        )
    if text_field != "text":
        options["text_field"] = text_field
    allowed = _FORMAT_OPTIONS[format]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError(
            f"option {', '.join(map(repr, unknown))} does not apply to format {format!r}; "
            f"its options: {', '.join(allowed) if allowed else 'none'}"
        )

    fixed = None if vocabulary is None else _check_vocabulary(vocabulary)
    if format in ("uci", "mm"):
        if preprocess:
            raise UserError(
                f"{path}: preprocess does not apply to {'UCI' if format == 'uci' else 'Matrix Market'} "
                "bag-of-words input (it holds counts, not text); leave it unset"
            )
        load = _load_uci if format == "uci" else _load_mm
        return load(path, fixed_vocabulary=fixed, **options)

    asked_to_preprocess = preprocess is True
    preprocess = True if preprocess is None else preprocess
    ids = None
    if format == "json":
        texts, source = _read_json(path, **options)
        if texts and isinstance(texts[0], list):
            if asked_to_preprocess:
                raise UserError(f"{path}: the documents are token lists, counted as they are; pre-processing "
                                "does not apply (leave it unset or pass --no-preprocess)")
            return _corpus_from_tokens(texts, source, fixed)
    elif format == "20news":
        texts, source, ids = _read_20news_with_ids(path, **options)
    else:
        texts, source, ids = _read_folder_with_ids(path, **options)
    return _corpus_from_checked_texts(texts, preprocess, source, fixed, ids)


def corpus_from_texts(texts: Sequence[str], preprocess: bool = True, source: str = "texts",
                      vocabulary: Sequence[str] | None = None) -> Corpus:
    """Build a corpus from documents given as strings.

    ``preprocess=True`` applies :mod:`topicaudit.inputs.preprocess`; False tokenises like
    ``CountVectorizer()`` (for text that is already pre-processed).
    ``vocabulary``: count only these words (see :func:`load_corpus`).
    """
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise UserError(
            f"{source}: expected a list of strings (one per document), got {type(texts).__name__}"
        )
    if not isinstance(preprocess, bool):
        raise UserError(f"preprocess must be true or false, got {preprocess!r}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise UserError(
                f"{source}: document {i} is {type(t).__name__}, not a string; "
                "every document must be a string"
            )
    fixed = None if vocabulary is None else _check_vocabulary(vocabulary, source)
    return _corpus_from_checked_texts(list(texts), preprocess, source, fixed)


def keep_most_frequent_words(corpus: Corpus, n_words: int) -> Corpus:
    """The corpus over its ``n_words`` words of highest document frequency.

    For learners whose cost grows with the whole vocabulary (the locally
    private ones privatise every cell of the document × word matrix). The
    choice is made on the whole corpus, so in an audit it does not depend on
    which documents are members. Ties go to the alphabetically first word;
    documents left with no word are dropped and counted.
    """
    if n_words >= corpus.n_words:
        return corpus
    df = np.diff(corpus.X.tocsc().indptr)
    keep = np.sort(np.lexsort((corpus.vocabulary, -df))[:n_words])
    restricted = _finish(corpus.X[:, keep], corpus.vocabulary[keep], corpus.texts,
                         f"{corpus.source}, its {n_words} most frequent words", corpus.doc_index, corpus.doc_ids)
    restricted.n_dropped_empty += corpus.n_dropped_empty
    return restricted


def corpus_from_counts(X, vocabulary, source: str = "counts") -> Corpus:
    """Build a corpus from a count matrix and its vocabulary, validating both.

    ``X`` (dense or sparse, documents × words) must hold finite non-negative
    whole numbers; ``vocabulary`` must be distinct strings, one per column.
    Columns are reordered so the vocabulary is sorted; documents with no count
    are dropped (see ``n_dropped_empty`` and ``doc_index``).
    """
    vocab_arr = _check_vocabulary(vocabulary, source, sort=False)
    X = check_counts(X, source, n_columns=len(vocab_arr)).copy()  # copied: zeros are dropped in place
    X.eliminate_zeros()
    order = np.argsort(vocab_arr, kind="stable")
    sorted_vocab = vocab_arr[order]
    if np.any(order != np.arange(len(order))):
        X = X[:, order]
    return _finish(X, sorted_vocab, None, source, np.arange(X.shape[0]))


# --------------------------------------------------------------------------- #
# Shared helpers
# --------------------------------------------------------------------------- #


def detect_format(path: Path) -> str:
    if path.is_dir():
        return "folder"
    name = path.name.lower()
    if name.endswith(".json"):
        return "json"
    if name.startswith("docword") and (name.endswith(".txt") or name.endswith(".txt.gz")):
        return "uci"
    if name.endswith(".tar.gz") or name.endswith(".tgz"):
        return "20news"
    if name.endswith(".mm"):
        return "mm"
    if not path.exists():
        raise UserError(f"{path}: no such file or directory; check the corpus path")
    raise UserError(
        f"{path}: cannot tell the corpus format from the name; pass --format (or [corpus] format) one of "
        f"{', '.join(KNOWN_FORMATS)} (json: *.json, uci: docword*.txt, 20news: *.tar.gz, "
        "folder: a directory, mm: *.mm)"
    )


def _decode(data: bytes, path: Path, encoding: str, fix: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UserError(
            f"{path}, line {line} (byte {e.start}): not valid {encoding} "
            f"({e.reason}, byte {data[e.start:e.start + 1]!r}); {fix}"
        ) from None


def _check_vocabulary(vocabulary, source: str = "vocabulary", sort: bool = True) -> np.ndarray:
    """A vocabulary as a str array, sorted unless ``sort`` is False; distinct non-empty strings or a UserError."""
    if isinstance(vocabulary, (str, bytes)):
        raise UserError(f"{source}: the vocabulary must be a sequence of words, not one string")
    try:
        words = list(vocabulary)
    except TypeError:
        raise UserError(f"{source}: the vocabulary must be a sequence of strings") from None
    if not words:
        raise UserError(f"{source}: the vocabulary is empty; give at least one word")
    for i, w in enumerate(words):
        if not isinstance(w, str):
            raise UserError(f"{source}: vocabulary entry {i} is {type(w).__name__}, not a string")
        if not w:
            raise UserError(f"{source}: vocabulary entry {i} is an empty string")
    arr = np.array(words, dtype=str)
    ordered = np.sort(arr, kind="stable")
    dup = np.flatnonzero(ordered[1:] == ordered[:-1])
    if dup.size:
        word = str(ordered[dup[0]])
        first, second = (int(i) for i in np.flatnonzero(arr == word)[:2])
        raise UserError(
            f"{source}: vocabulary word {str(word)!r} appears twice (entries {first} and {second}); "
            "words must be distinct"
        )
    return ordered if sort else arr


def _restrict_columns(X: sp.csr_matrix, words: np.ndarray, fixed: np.ndarray) -> sp.csr_matrix:
    """Re-express counts over ``words`` as counts over the sorted ``fixed`` words (others dropped)."""
    if len(words) == 0:
        return sp.csr_matrix((X.shape[0], len(fixed)), dtype=np.float64)
    pos = np.minimum(np.searchsorted(fixed, words), len(fixed) - 1)
    kept = np.flatnonzero(fixed[pos] == words)
    select = sp.csr_matrix((np.ones(len(kept)), (kept, pos[kept])), shape=(len(words), len(fixed)))
    return sp.csr_matrix(X @ select)


def _count_over(X: sp.csr_matrix, words: np.ndarray, fixed: np.ndarray, where: str, fix: str
                ) -> tuple[sp.csr_matrix, np.ndarray, str]:
    """Counts over a given (sorted) vocabulary, its words, and a note for the source; no token left is an error."""
    X = _restrict_columns(X, words, fixed)
    if X.nnz == 0:
        raise UserError(f"{where}: none of the {X.shape[0]} documents contains a word of the given vocabulary "
                        f"({len(fixed)} words, e.g. {', '.join(repr(str(w)) for w in fixed[:3])}); {fix}")
    return X, fixed, f"; counted over a given vocabulary of {len(fixed)} words"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_surrogates(docs: list, source: str) -> list:
    """Documents (strings or token lists) with every lone surrogate replaced by U+FFFD, and a note when any was.

    A JSON escape such as ``\\ud800`` without its pair decodes to a lone
    surrogate, which is not a character: no UTF-8 file, page or terminal can
    hold it. Replaced here, where the text enters, nothing later fails on it.
    """
    first, count = None, 0
    out = []
    for i, doc in enumerate(docs):
        if not _SURROGATE.search(doc if isinstance(doc, str) else "".join(doc)):  # the common case: one scan
            out.append(doc)
            continue
        if isinstance(doc, str):
            fixed, n = _SURROGATE.subn("\ufffd", doc)
        else:
            pairs = [_SURROGATE.subn("\ufffd", token) for token in doc]
            fixed, n = [token for token, _ in pairs], sum(k for _, k in pairs)
        if n and first is None:
            first = i
        count += n
        out.append(fixed if n else doc)
    if count:
        warnings.warn(f"{source}: {count} lone surrogate code point(s) (a \\uD800-\\uDFFF escape without its pair; "
                      f"the first in document {first}, 0-based) are not characters and were replaced by U+FFFD; "
                      "fix the file's escapes to keep the original characters", UserWarning, stacklevel=2)
    return out


def _corpus_from_checked_texts(texts: list[str], preprocess: bool, source: str,
                               fixed: np.ndarray | None = None, ids: list[str] | None = None) -> Corpus:
    if not texts:
        raise UserError(f"{source}: the corpus has no documents; give at least one document")
    texts = _replace_surrogates(texts, source)
    if preprocess:
        tokens = preprocess_corpus(texts)
        how = "pre-processed (lower-case, letters a-z, stop words, 3-15 letters, WordNet lemmas)"
    else:
        tokens = [tokenize_like_countvectorizer(t) for t in texts]
        how = "already pre-processed, tokenised like CountVectorizer()"
    X, vocab = _vectorize(tokens, len(texts))
    if fixed is not None and X.nnz:
        X, vocab, note = _count_over(
            X, vocab, fixed, source, f"after {'pre-processing' if preprocess else 'tokenising'}, check that the "
            "vocabulary belongs to these documents and that pre-processing matches how the model's text was "
            "prepared (--preprocess / --no-preprocess)")
        how += note
    if X.nnz == 0:
        hint = (
            "check that the documents hold English text" if preprocess else
            "check that the documents hold words of two or more letters"
        )
        raise UserError(
            f"{source}: every one of the {len(texts)} documents is empty after "
            f"{'pre-processing' if preprocess else 'tokenising'}; {hint}"
        )
    return _finish(X, vocab, texts, f"{source}; {how}", np.arange(len(texts)),
                   ids if ids is not None else [str(i) for i in range(len(texts))])


def _corpus_from_tokens(token_lists: list[list[str]], source: str, fixed: np.ndarray | None) -> Corpus:
    """Already-tokenised documents, every token counted as given (the model's own tokens)."""
    token_lists = _replace_surrogates(token_lists, source)
    X, vocab = _vectorize(token_lists, len(token_lists))
    how = "token lists counted as given"
    if fixed is not None and X.nnz:
        X, vocab, note = _count_over(X, vocab, fixed, source, "give the tokens the model was trained on")
        how += note
    if X.nnz == 0:
        raise UserError(f"{source}: every one of the {len(token_lists)} token lists is empty")
    texts = [" ".join(tokens) for tokens in token_lists]
    return _finish(X, vocab, texts, f"{source}; {how}", np.arange(len(token_lists)),
                   [str(i) for i in range(len(token_lists))])


def _vectorize(token_lists: Iterable[list[str]], n_docs: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """Token lists → canonical CSR counts (float64) and the sorted vocabulary."""
    class _Ids(dict):
        def __missing__(self, word):
            self[word] = n = len(self)
            return n

    ids = _Ids()
    lookup = ids.__getitem__
    indices = array("q")
    indptr = array("q", [0])
    for tokens in token_lists:
        indices.extend(map(lookup, tokens))
        indptr.append(len(indices))
    words = np.array(list(ids), dtype=str) if ids else np.array([], dtype=str)
    order = np.argsort(words, kind="stable")
    new_id = np.empty(len(words), dtype=np.int64)
    new_id[order] = np.arange(len(words))
    cols = new_id[np.frombuffer(indices, dtype=np.int64)] if len(indices) else np.zeros(0, np.int64)
    X = sp.csr_matrix(
        (np.ones(len(cols), dtype=np.float64), cols, np.array(indptr, dtype=np.int64)),
        shape=(n_docs, len(words)),
    )
    X.sum_duplicates()
    return X, words[order]


def _finish(X: sp.csr_matrix, vocab: np.ndarray, texts, source: str, positions: np.ndarray,
            ids: list[str] | None = None) -> Corpus:
    """Drop empty rows, canonicalise, wrap."""
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sum_duplicates()  # also sorts the indices
    X.eliminate_zeros()
    nonempty = np.diff(X.indptr) > 0
    n_dropped = int(np.count_nonzero(~nonempty))
    if n_dropped:
        X = X[nonempty]
        positions = positions[nonempty]
        if texts is not None:
            texts = [texts[i] for i in np.flatnonzero(nonempty)]
        if ids is not None:
            ids = [ids[i] for i in np.flatnonzero(nonempty)]
    if X.shape[0] == 0:
        raise UserError(
            f"{source}: every document is empty (no counts); nothing to audit"
            if X.shape[1] else f"{source}: the corpus has no words"
        )
    X.sum_duplicates()
    return Corpus(
        X=X,
        vocabulary=np.asarray(vocab, dtype=str),
        texts=texts,
        source=source,
        doc_index=np.asarray(positions, dtype=np.int64),
        n_dropped_empty=n_dropped,
        doc_ids=ids,
    )


# --------------------------------------------------------------------------- #
# json
# --------------------------------------------------------------------------- #

_JSON_EXAMPLE = '{"text": ["first document", "second document", ...]}'


def _read_json(path: Path, text_field: str = "text") -> tuple[list[str], str]:
    if not isinstance(text_field, str) or not text_field:
        raise UserError(f"text_field must be a non-empty string, got {text_field!r}")
    raw = read_user_file(path, "JSON corpus file")
    text = _decode(raw, path, "utf-8-sig", "save the file as UTF-8 (JSON text must be UTF-8)")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(
            f"{path}, line {e.lineno}, column {e.colno}: invalid JSON ({e.msg}); "
            f"fix the file; a JSON corpus looks like {_JSON_EXAMPLE}"
        ) from None
    except RecursionError:
        raise UserError(f"{path}: JSON nested too deeply; a JSON corpus looks like {_JSON_EXAMPLE}") from None
    if not isinstance(obj, dict):
        raise UserError(
            f"{path}: the top level is a JSON {_json_type(obj)}, but an object with a "
            f"{text_field!r} field is expected, like {_JSON_EXAMPLE}"
        )
    if text_field not in obj:
        keys = ", ".join(repr(k) for k in list(obj)[:10]) or "none"
        raise UserError(
            f"{path}: no field {text_field!r} in the JSON object (its fields: {keys}); "
            f"put the documents in {text_field!r} or name the field with text_field="
        )
    docs = obj[text_field]
    if not isinstance(docs, list):
        raise UserError(
            f"{path}: field {text_field!r} is a JSON {_json_type(docs)}, but must be a list "
            f"of strings, one per document, like {_JSON_EXAMPLE}"
        )
    tokenised = bool(docs) and isinstance(docs[0], list)
    for i, d in enumerate(docs):
        if tokenised and not (isinstance(d, list) and all(isinstance(t, str) and t for t in d)):
            raise UserError(
                f"{path}: field {text_field!r}, entry {i} (0-based) is not a list of non-empty strings, but entry 0 "
                "is a token list; give every document as a token list, or every document as a string"
            )
        if not tokenised and not isinstance(d, str):
            raise UserError(
                f"{path}: field {text_field!r}, entry {i} (0-based) is a JSON {_json_type(d)}, "
                "not a string; every document must be a string (or every document a list of tokens)"
            )
    return docs, f"json {path} (field {text_field!r})"


def _json_type(obj) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(obj), type(obj).__name__)


# --------------------------------------------------------------------------- #
# folder
# --------------------------------------------------------------------------- #


def _read_folder_with_ids(path: Path, encoding: str = "utf-8") -> tuple[list[str], str, list[str]]:
    """The texts, a description, and each file's path relative to the folder (POSIX form)."""
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise UserError(f"unknown text encoding {encoding!r}; use e.g. 'utf-8' or 'latin-1'") from None
    if not path.exists():
        raise UserError(f"{path}: directory not found; check the path")
    if not path.is_dir():
        raise UserError(f"{path}: not a directory; the folder format reads a directory of text files")
    files = []
    for root, dirs, names in os.walk(path, onerror=_raise_walk_error):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files.extend(Path(root) / n for n in names if not n.startswith("."))
    files.sort(key=lambda p: p.relative_to(path).parts)
    fix = (
        f"re-save it as {encoding}, or pass the files' encoding with the option encoding= "
        "(e.g. 'latin-1')"
    )
    texts = [_decode(read_user_file(f, "text file"), f, encoding, fix) for f in files]
    ids = [printable_name(f.relative_to(path).as_posix()) for f in files]
    return texts, f"folder {path} ({len(files)} files, {encoding})", ids


def printable_name(name: str) -> str:
    """A file name as text any UTF-8 file can hold: bytes that are not UTF-8 (a Latin-1 name, which Python
    carries as lone surrogates) shown as ``\\xNN``. Distinct names stay distinct."""
    if not _SURROGATE.search(name):
        return name
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return _SURROGATE.sub("\ufffd", name)


def _raise_walk_error(err: OSError):
    raise UserError(f"{err.filename}: cannot list the directory: {err.strerror or err}; make it readable")


# --------------------------------------------------------------------------- #
# 20 Newsgroups
# --------------------------------------------------------------------------- #

_NEWS_MEMBER = re.compile(r"(?:\./)?20news-bydate-(train|test)/([^/]+)/([^/]+)")
_QUOTE_RE = re.compile(r"(writes in|writes:|wrote:|says:|said:|^In article|^Quoted from|^\||^>)")


def strip_newsgroup_header(text: str) -> str:
    """Everything after the first blank line (as scikit-learn)."""
    return text.partition("\n\n")[2]


def strip_newsgroup_quoting(text: str) -> str:
    """Drop quoted lines and lines introducing quotes (as scikit-learn)."""
    return "\n".join(line for line in text.split("\n") if not _QUOTE_RE.search(line))


def strip_newsgroup_footer(text: str) -> str:
    """Drop the signature after the last blank or all-hyphen line (as scikit-learn)."""
    lines = text.strip().split("\n")
    for line_num in range(len(lines) - 1, -1, -1):
        if lines[line_num].strip().strip("-") == "":
            break
    return "\n".join(lines[:line_num]) if line_num > 0 else text


def _read_20news_with_ids(path: Path, subset: str = "train",
                          remove=DEFAULT_20NEWS_REMOVE) -> tuple[list[str], str, list[str]]:
    """The posts, a description, and each post's name ``20news-bydate-SPLIT/GROUP/ID``."""
    if subset not in ("train", "test", "all"):
        raise UserError(f"20news subset must be 'train', 'test' or 'all', got {subset!r}")
    if isinstance(remove, str):
        remove = (remove,) if remove else ()
    try:
        remove = tuple(remove)
    except TypeError:
        raise UserError(f"20news remove must be a list of {', '.join(TWENTY_NEWS_PARTS)}, got {remove!r}") from None
    bad = [r for r in remove if r not in TWENTY_NEWS_PARTS]
    if bad:
        raise UserError(
            f"20news remove has unknown part(s) {', '.join(map(repr, bad))}; "
            f"choose from {', '.join(TWENTY_NEWS_PARTS)} (or none)"
        )
    splits = ("train", "test") if subset == "all" else (subset,)
    raw = read_user_file(path, "20news archive")
    posts = []
    try:
        if raw[:2] == b"\x1f\x8b":  # gzip: inflate in memory once (faster than streaming), size capped
            raw = gunzip(raw, str(path))
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:*") as tf:
            for member in tf:  # streamed: nothing is written to disk
                m = _NEWS_MEMBER.fullmatch(member.name)
                if not m or not member.isfile() or m.group(1) not in splits:
                    continue
                f = tf.extractfile(member)
                text = f.read().decode("latin-1")
                posts.append(((splits.index(m.group(1)), m.group(2), m.group(3)), text))  # key: split, group, id
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        reason = " ".join(str(e).split("\n")[0].split()).rstrip(":")  # tarfile lists every method tried
        raise UserError(
            f"{path}: not a readable tar archive ({type(e).__name__}: {reason}); give the 20news-bydate "
            ".tar.gz file"
        ) from None
    if not posts:
        raise UserError(
            f"{path}: no posts under 20news-bydate-{'/'.join(splits)}/GROUP/ID in the archive; "
            "give the 20news-bydate tarball (as scikit-learn downloads it)"
        )
    posts.sort(key=lambda p: p[0])
    texts = []
    ids = [printable_name(f"20news-bydate-{splits[s]}/{group}/{name}") for (s, group, name), _ in posts]
    for _, text in posts:
        if "headers" in remove:
            text = strip_newsgroup_header(text)
        if "footers" in remove:
            text = strip_newsgroup_footer(text)
        if "quotes" in remove:
            text = strip_newsgroup_quoting(text)
        texts.append(text)
    removed = f"removed {'+'.join(remove)}" if remove else "posts whole"
    return texts, f"20news {path} (subset {subset}, {len(texts)} posts, {removed})", ids


# --------------------------------------------------------------------------- #
# UCI bag of words
# --------------------------------------------------------------------------- #

_UCI_FIX = "each line after the header must be 'docID wordID count' (3 positive integers)"


def _load_uci(path: Path, vocab=None, fixed_vocabulary: np.ndarray | None = None) -> Corpus:
    raw = read_user_file(path, "UCI docword file")
    if path.name.endswith(".gz"):
        try:
            raw = gunzip(raw, str(path))
        except (OSError, EOFError, zlib.error) as e:
            raise UserError(f"{path}: not a valid gzip file ({e}); give the .txt or an intact .txt.gz") from None
    vocab_path = Path(vocab) if vocab is not None else _uci_vocab_path(path)

    # Header: three lines D, W, NNZ.
    header, pos = [], 0
    names = ("D (number of documents)", "W (number of words)", "NNZ (number of docID wordID count lines)")
    for lineno in range(1, 4):
        end = raw.find(b"\n", pos)
        if end < 0 and pos >= len(raw):
            raise UserError(
                f"{path}: the file ends at line {lineno - 1}; a UCI docword file starts with "
                "three header lines D, W, NNZ"
            )
        line = raw[pos:] if end < 0 else raw[pos:end]
        pos = len(raw) if end < 0 else end + 1
        text = line.decode("latin-1").strip()
        if not re.fullmatch(r"\d+", text):
            raise UserError(
                f"{path}, line {lineno}: expected {names[lineno - 1]} as one non-negative "
                f"integer, got {text[:60]!r}; the header is three lines D, W, NNZ"
            )
        header.append(int(text))
    D, W, NNZ = header
    if D == 0:
        raise UserError(f"{path}, line 1: D = 0, the corpus has no documents")
    if W == 0:
        raise UserError(f"{path}, line 2: W = 0, the vocabulary is empty")
    check_bytes(_BYTES_PER_DOCUMENT * D + _BYTES_PER_WORD * W + _BYTES_PER_ENTRY * NNZ,
                f"{path}: the header's D = {D} documents, W = {W} words and NNZ = {NNZ} counts",
                "check the three header lines against the file")

    entries = _parse_uci_body(raw, pos, path)
    n = entries.shape[0]
    doc, word, count = entries[:, 0], entries[:, 1], entries[:, 2]
    bad = (doc < 1) | (doc > D) | (word < 1) | (word > W) | (count < 1)
    if bad.any():
        row = int(np.argmax(bad))
        lineno = _uci_line_of_row(raw, pos, row)
        d, w, c = (int(v) for v in entries[row])
        if not 1 <= d <= D:
            what = f"docID {d} is out of range 1..{D} (D on line 1)"
        elif not 1 <= w <= W:
            what = f"wordID {w} is out of range 1..{W} (W on line 2)"
        else:
            what = f"count {c} is not positive; counts must be integers >= 1"
        raise UserError(f"{path}, line {lineno}: {what}; {_UCI_FIX}")
    if n != NNZ:
        raise UserError(
            f"{path}, line 3: the header says NNZ = {NNZ} entries, but the file has {n} "
            "'docID wordID count' lines; fix the header or the file (it may be truncated)"
        )
    key = (doc - 1) * W + (word - 1)
    order = np.argsort(key, kind="stable")
    dup = np.flatnonzero(key[order][1:] == key[order][:-1])
    if dup.size:
        r1, r2 = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
        raise UserError(
            f"{path}, lines {_uci_line_of_row(raw, pos, r1)} and {_uci_line_of_row(raw, pos, r2)}: "
            f"document {int(doc[r1])}, word {int(word[r1])} is listed twice; each (docID, wordID) "
            "pair must appear once"
        )

    words, note = _read_uci_vocab(vocab_path, W, path)
    X = sp.csr_matrix(
        (count.astype(np.float64), (doc - 1, word - 1)), shape=(D, W)
    )
    order = np.argsort(words, kind="stable")
    if np.any(order != np.arange(W)):
        X = X[:, order]
        words = words[order]
    source = f"uci {path} (vocabulary {vocab_path}{note})"
    if fixed_vocabulary is not None:
        X, words, note = _count_over(X, words, fixed_vocabulary, str(path),
                                     f"its words come from {vocab_path}: check that the vocabulary belongs to "
                                     "this corpus")
        source += note
    return _finish(X, words, None, source, np.arange(D), [str(i + 1) for i in range(D)])


def _load_mm(path: Path, dictionary=None, fixed_vocabulary: np.ndarray | None = None) -> Corpus:
    """gensim's MmCorpus: documents × term ids, the ids naming words of ``dictionary``."""

    if dictionary is None:
        raise UserError(f"{path}: a Matrix Market corpus holds term ids; give the dictionary they refer to with "
                        "the option dictionary=PATH (gensim's Dictionary.save_as_text output)")
    if isinstance(dictionary, (str, os.PathLike)):

        words, where = read_vocabulary(Path(dictionary)), f"dictionary {dictionary}"
    else:
        words, where = [str(w) for w in dictionary], "the model's dictionary"
    raw = read_user_file(path, "Matrix Market corpus file")
    _check_mm_header(path, raw)
    try:
        X = scipy.io.mmread(io.BytesIO(raw))
    except OverflowError as e:
        raise UserError(f"{path}: a count too large for a 64-bit integer ({e}); counts are word occurrences "
                        "in one document: fix that line") from None
    except (ValueError, OSError, IndexError, TypeError) as e:
        raise UserError(f"{path}: not a readable Matrix Market corpus ({e}); write it with gensim's "
                        "MmCorpus.serialize(path, corpus)") from None
    X = check_counts(X, str(path))
    if X.shape[1] > len(words):
        raise UserError(f"{path}: term ids go up to {X.shape[1]} but {where} has {len(words)} words; give the "
                        "dictionary the corpus was made with")
    X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], len(words)))
    vocab = np.array(words, dtype=str)
    order = np.argsort(vocab, kind="stable")
    X, vocab = X[:, order], vocab[order]
    source = f"mm {path} (term ids of {where})"
    if fixed_vocabulary is not None:
        X, vocab, note = _count_over(X.tocsr(), vocab, fixed_vocabulary, str(path),
                                     f"check that {where} is the one the corpus was made with")
        source += note
    return _finish(X, vocab, None, source, np.arange(X.shape[0]), [str(i) for i in range(X.shape[0])])


_MM_FIX = "write it with gensim's MmCorpus.serialize(path, corpus)"


def _check_mm_header(path: Path, raw: bytes) -> None:
    """A Matrix Market header a corpus can have, and the sizes it declares checked against memory, before parsing.

    A corpus is a ``coordinate`` matrix of ``integer`` or ``real`` counts with
    ``general`` symmetry (what gensim writes). A ``symmetric`` (or skew,
    Hermitian) header would make the reader mirror every count across the
    diagonal, and a ``complex`` or ``pattern`` one holds no counts: all are
    refused rather than changed silently.
    """
    try:
        rows, cols, entries, layout, field, symmetry = scipy.io.mminfo(io.BytesIO(raw))
    except (ValueError, OSError, IndexError, TypeError, OverflowError) as e:
        raise UserError(f"{path}: not a readable Matrix Market header ({e}); {_MM_FIX}") from None
    if layout != "coordinate":
        raise UserError(f"{path}: a dense Matrix Market array; a corpus is a 'coordinate' file (MmCorpus.serialize)")
    if field not in ("integer", "real"):
        raise UserError(f"{path}: the header declares {field} values, but a corpus holds word counts (integer or "
                        f"real); {_MM_FIX}")
    if symmetry != "general":
        raise UserError(f"{path}: the header declares a {symmetry} matrix, which the reader would mirror across the "
                        "diagonal, inventing counts; a corpus (documents × terms) is 'general': fix the header's "
                        f"last word, or {_MM_FIX}")
    check_bytes(_BYTES_PER_DOCUMENT * rows + _BYTES_PER_WORD * cols + _BYTES_PER_ENTRY * entries,
                f"{path}: the header's {rows} documents × {cols} terms with {entries} counts",
                "check the header line (rows, columns, entries) against the file")


# Memory a corpus row, column and stored count take on their way in (indptr, positions, ids, copies).
_BYTES_PER_DOCUMENT, _BYTES_PER_WORD, _BYTES_PER_ENTRY = 100, 100, 64


def _uci_vocab_path(path: Path) -> Path:
    name = path.name
    m = re.fullmatch(r"docword\.(.+?)\.txt(?:\.gz)?", name)
    if not m:
        raise UserError(
            f"{path}: cannot derive the vocabulary file name (expected docword.NAME.txt beside "
            "vocab.NAME.txt); give it with the option vocab="
        )
    return path.with_name(f"vocab.{m.group(1)}.txt")


def _parse_uci_body(raw: bytes, pos: int, path: Path) -> np.ndarray:
    """All 'docID wordID count' lines as an (n, 3) int64 array; precise errors."""
    body = raw[pos:]
    if not body.strip():
        return np.zeros((0, 3), dtype=np.int64)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.loadtxt(io.BytesIO(body), dtype=np.int64, comments=None, ndmin=2)
        if arr.shape[1] == 3:
            return arr
    except ValueError:
        pass
    # Slow path, only for broken files: find the first bad line.
    for i, line in enumerate(body.split(b"\n")):
        text = line.decode("latin-1").strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) != 3 or not all(re.fullmatch(r"[+-]?\d+", f) for f in fields):
            raise UserError(
                f"{path}, line {i + 4}: expected 3 integers 'docID wordID count', got "
                f"{text[:60]!r}; {_UCI_FIX}"
            )
    raise UserError(f"{path}: cannot parse the 'docID wordID count' lines; {_UCI_FIX}")


def _uci_line_of_row(raw: bytes, pos: int, row: int) -> int:
    """1-based file line number of the row-th non-blank body line."""
    seen = -1
    for i, line in enumerate(raw[pos:].split(b"\n")):
        if line.strip():
            seen += 1
            if seen == row:
                return i + 4
    return -1


def _read_uci_vocab(vocab_path: Path, W: int, docword: Path) -> tuple[np.ndarray, str]:
    if not vocab_path.exists():
        raise UserError(
            f"{vocab_path}: UCI vocabulary file not found (needed for {docword}); put "
            "vocab.NAME.txt beside docword.NAME.txt or give its path with the option vocab="
        )
    raw = read_user_file(vocab_path, "UCI vocabulary file")
    text = _decode(raw, vocab_path, "utf-8", "save the vocabulary as UTF-8")
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) < W:
        raise UserError(
            f"{vocab_path}: has {len(lines)} words, but {docword} (line 2) says W = {W}; "
            "the vocabulary needs one word per line for every wordID"
        )
    note = ""
    if len(lines) > W:
        extra = len(lines) - W
        note = f"; {extra} line(s) after word {W} ignored, starting {lines[W].strip()[:40]!r}"
        warnings.warn(
            f"{vocab_path}: has {len(lines)} lines but W = {W} in {docword}; "
            f"using the first {W}, ignoring {extra} line(s) from line {W + 1} ({lines[W].strip()[:40]!r})",
            UserWarning,
            stacklevel=4,
        )
    seen: dict[str, int] = {}
    words = []
    for i, line in enumerate(lines[:W]):
        word = line.strip()
        if not word:
            raise UserError(f"{vocab_path}, line {i + 1}: empty line; every line must hold one word")
        if word in seen:
            raise UserError(
                f"{vocab_path}, lines {seen[word]} and {i + 1}: the word {str(word)!r} appears twice; "
                "vocabulary words must be distinct"
            )
        seen[word] = i + 1
        words.append(word)
    return np.array(words, dtype=str), note


def corpus_fingerprint(corpus: Corpus) -> str:
    """A digest of the counts and the vocabulary: what a run's identity keys on, not the path it was read from."""
    digest = hashlib.sha256()
    for part in (corpus.X.indptr, corpus.X.indices, corpus.X.data):
        digest.update(np.ascontiguousarray(part).tobytes())
    digest.update("\n".join(map(str, corpus.vocabulary)).encode())
    return digest.hexdigest()[:16]
