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

Each format's reader is a module of :mod:`topicaudit.inputs.formats`; counting
words is :mod:`topicaudit.inputs.counting`. This module holds the
:class:`Corpus` type, the entry points and the fingerprint.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.counting import check_vocabulary, count_over, count_texts, count_tokens
from topicaudit.inputs.formats.folder import read_folder
from topicaudit.inputs.formats.json_file import read_json
from topicaudit.inputs.formats.matrix_market import read_mm
from topicaudit.inputs.formats.newsgroups import read_20news
from topicaudit.inputs.formats.uci import read_uci
from topicaudit.targets.counts import check_counts

__all__ = [
    "Corpus",
    "KNOWN_FORMATS",
    "corpus_from_counts",
    "corpus_from_texts",
    "load_corpus",
]

KNOWN_FORMATS = ("json", "uci", "20news", "folder", "mm")
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

    fixed = None if vocabulary is None else check_vocabulary(vocabulary)
    if format in ("uci", "mm"):
        if preprocess:
            raise UserError(
                f"{path}: preprocess does not apply to {'UCI' if format == 'uci' else 'Matrix Market'} "
                "bag-of-words input (it holds counts, not text); leave it unset"
            )
        read = read_uci if format == "uci" else read_mm
        X, words, source, ids, fix = read(path, **options)
        if fixed is not None:
            X, words, note = count_over(X.tocsr(), words, fixed, str(path), fix)
            source += note
        return _finish(X, words, None, source, np.arange(X.shape[0]), ids)

    asked_to_preprocess = preprocess is True
    preprocess = True if preprocess is None else preprocess
    ids = None
    if format == "json":
        texts, source = read_json(path, **options)
        if texts and isinstance(texts[0], list):
            if asked_to_preprocess:
                raise UserError(f"{path}: the documents are token lists, counted as they are; pre-processing "
                                "does not apply (leave it unset or pass --no-preprocess)")
            texts, X, vocab, how = count_tokens(texts, source, fixed)
            return _finish(X, vocab, texts, f"{source}; {how}", np.arange(len(texts)),
                           [str(i) for i in range(len(texts))])
    elif format == "20news":
        texts, source, ids = read_20news(path, **options)
    else:
        texts, source, ids = read_folder(path, **options)
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
    fixed = None if vocabulary is None else check_vocabulary(vocabulary, source)
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
    vocab_arr = check_vocabulary(vocabulary, source, sort=False)
    X = check_counts(X, source, n_columns=len(vocab_arr)).copy()  # copied: zeros are dropped in place
    X.eliminate_zeros()
    order = np.argsort(vocab_arr, kind="stable")
    sorted_vocab = vocab_arr[order]
    if np.any(order != np.arange(len(order))):
        X = X[:, order]
    return _finish(X, sorted_vocab, None, source, np.arange(X.shape[0]))


def corpus_fingerprint(corpus: Corpus) -> str:
    """A digest of the counts and the vocabulary: what a run's identity keys on, not the path it was read from."""
    digest = hashlib.sha256()
    for part in (corpus.X.indptr, corpus.X.indices, corpus.X.data):
        digest.update(np.ascontiguousarray(part).tobytes())
    digest.update("\n".join(map(str, corpus.vocabulary)).encode())
    return digest.hexdigest()[:16]


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


def _corpus_from_checked_texts(texts: list[str], preprocess: bool, source: str,
                               fixed: np.ndarray | None = None, ids: list[str] | None = None) -> Corpus:
    texts, X, vocab, how = count_texts(texts, preprocess, source, fixed)
    return _finish(X, vocab, texts, f"{source}; {how}", np.arange(len(texts)),
                   ids if ids is not None else [str(i) for i in range(len(texts))])


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
