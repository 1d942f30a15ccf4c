"""Text to counts: documents (text or tokens) counted over their own words or a given vocabulary."""
from __future__ import annotations

from array import array
from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.formats.decoding import replace_surrogates
from topicaudit.inputs.preprocess import preprocess_corpus, tokenize_like_countvectorizer


def check_vocabulary(vocabulary, source: str = "vocabulary", sort: bool = True) -> np.ndarray:
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


def count_over(X: sp.csr_matrix, words: np.ndarray, fixed: np.ndarray, where: str, fix: str
               ) -> tuple[sp.csr_matrix, np.ndarray, str]:
    """Counts over a given (sorted) vocabulary, its words, and a note for the source; no token left is an error."""
    X = _restrict_columns(X, words, fixed)
    if X.nnz == 0:
        raise UserError(f"{where}: none of the {X.shape[0]} documents contains a word of the given vocabulary "
                        f"({len(fixed)} words, e.g. {', '.join(repr(str(w)) for w in fixed[:3])}); {fix}")
    return X, fixed, f"; counted over a given vocabulary of {len(fixed)} words"


def count_texts(texts: list[str], preprocess: bool, source: str, fixed: np.ndarray | None = None
                ) -> tuple[list[str], sp.csr_matrix, np.ndarray, str]:
    """Documents' words counted: the texts (lone surrogates replaced), counts, sorted words, and how they were made.

    ``preprocess``: :mod:`topicaudit.inputs.preprocess` or ``CountVectorizer()``'s tokens; ``fixed``: count only
    these (sorted) words. Rows stay one per document, empty ones included; every row empty is a UserError.
    """
    if not texts:
        raise UserError(f"{source}: the corpus has no documents; give at least one document")
    texts = replace_surrogates(texts, source)
    if preprocess:
        tokens = preprocess_corpus(texts)
        how = "pre-processed (lower-case, letters a-z, stop words, 3-15 letters, WordNet lemmas)"
    else:
        tokens = [tokenize_like_countvectorizer(t) for t in texts]
        how = "already pre-processed, tokenised like CountVectorizer()"
    X, vocab = _vectorize(tokens, len(texts))
    if fixed is not None and X.nnz:
        X, vocab, note = count_over(
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
    return texts, X, vocab, how


def count_tokens(token_lists: list[list[str]], source: str, fixed: np.ndarray | None
                 ) -> tuple[list[str], sp.csr_matrix, np.ndarray, str]:
    """Already-tokenised documents, every token counted as given (the model's own tokens); as :func:`count_texts`."""
    token_lists = replace_surrogates(token_lists, source)
    X, vocab = _vectorize(token_lists, len(token_lists))
    how = "token lists counted as given"
    if fixed is not None and X.nnz:
        X, vocab, note = count_over(X, vocab, fixed, source, "give the tokens the model was trained on")
        how += note
    if X.nnz == 0:
        raise UserError(f"{source}: every one of the {len(token_lists)} token lists is empty")
    texts = [" ".join(tokens) for tokens in token_lists]
    return texts, X, vocab, how


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
