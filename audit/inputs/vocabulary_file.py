"""A user's vocabulary file: the words of Φ's columns, in column order.

``.txt`` (one word per line, UTF-8), or ``.json`` (a list of words, or an
object word → column index such as ``CountVectorizer.vocabulary_``), or
gensim's ``Dictionary.save_as_text`` output (``id<TAB>word<TAB>document
frequency`` lines after a document-count line; column j is id j). Words must
be distinct and non-empty; every failure is a
:class:`topicaudit.errors.UserError` naming the file, the line and the fix.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from topicaudit.errors import UserError
from topicaudit.inputs.files import DuplicateKey, read_user_file, strict_json


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
            obj = strict_json(text)
        except DuplicateKey as error:
            raise UserError(f"{path}: {error}") from None
        except json.JSONDecodeError as error:
            raise UserError(
                f"{path}, line {error.lineno}, column {error.colno}: invalid JSON ({error.msg}); the vocabulary "
                'is a JSON list of words, e.g. ["apple", "banana"]'
            ) from None
        except ValueError as error:  # an integer of over 4,300 digits (Python's int_max_str_digits): it was exit 3
            raise UserError(f"{path}: not readable JSON ({error}); the vocabulary is a JSON list of words, e.g. "
                            '["apple", "banana"]') from None
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
