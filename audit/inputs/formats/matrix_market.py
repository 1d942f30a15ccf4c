"""The ``mm`` corpus format: gensim's MmCorpus (a Matrix Market coordinate file) and the dictionary of its term ids."""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.files import read_user_file
from topicaudit.inputs.vocabulary_file import read_vocabulary
from topicaudit.inputs.sizes import check_corpus_bytes
from topicaudit.targets.counts import check_counts

_MM_FIX = "write it with gensim's MmCorpus.serialize(path, corpus)"


def read_mm(path: Path, dictionary=None) -> tuple[sp.csr_matrix, np.ndarray, str, list[str], str]:
    """gensim's MmCorpus: documents × term ids, the ids naming words of ``dictionary``.

    Returns what :func:`topicaudit.inputs.formats.uci.read_uci` returns; each row's id is its 0-based position.
    """
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
    fix = f"check that {where} is the one the corpus was made with"
    return X, vocab, source, [str(i) for i in range(X.shape[0])], fix


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
    check_corpus_bytes(rows, cols, entries,
                       f"{path}: the header's {rows} documents × {cols} terms with {entries} counts",
                       "check the header line (rows, columns, entries) against the file")
