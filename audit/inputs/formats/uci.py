"""The ``uci`` corpus format: UCI "Bag of Words" (docword.NAME.txt, optionally gzipped, and vocab.NAME.txt).

Three header lines D, W, NNZ, then ``docID wordID count`` lines (1-based);
word *i* of the vocabulary file is on line *i*. Every mistake names the line.
"""
from __future__ import annotations

import io
import re
import warnings
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.files import read_user_file
from topicaudit.inputs.formats.decoding import decode
from topicaudit.inputs.sizes import check_corpus_bytes, gunzip

_UCI_FIX = "each line after the header must be 'docID wordID count' (3 positive integers)"


def read_uci(path: Path, vocab=None) -> tuple[sp.csr_matrix, np.ndarray, str, list[str], str]:
    """The counts (documents × words, columns in sorted word order), the sorted words, a description,
    each row's 1-based docID, and what to check when the words do not meet a given vocabulary."""
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
    check_corpus_bytes(D, W, NNZ,
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
    fix = f"its words come from {vocab_path}: check that the vocabulary belongs to this corpus"
    return X, words, source, [str(i + 1) for i in range(D)], fix


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
    text = decode(raw, vocab_path, "utf-8", "save the vocabulary as UTF-8")
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
