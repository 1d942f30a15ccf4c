"""Text as it enters: bytes decoded with a message naming the line, lone surrogates replaced, file names printable."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

from topicaudit.errors import UserError

SURROGATE = re.compile("[\ud800-\udfff]")


def decode(data: bytes, path: Path, encoding: str, fix: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UserError(
            f"{path}, line {line} (byte {e.start}): not valid {encoding} "
            f"({e.reason}, byte {data[e.start:e.start + 1]!r}); {fix}"
        ) from None


def replace_surrogates(docs: list, source: str) -> list:
    """Documents (strings or token lists) with every lone surrogate replaced by U+FFFD, and a note when any was.

    A JSON escape such as ``\\ud800`` without its pair decodes to a lone
    surrogate, which is not a character: no UTF-8 file, page or terminal can
    hold it. Replaced here, where the text enters, nothing later fails on it.
    """
    first, count = None, 0
    out = []
    for i, doc in enumerate(docs):
        if not SURROGATE.search(doc if isinstance(doc, str) else "".join(doc)):  # the common case: one scan
            out.append(doc)
            continue
        if isinstance(doc, str):
            fixed, n = SURROGATE.subn("\ufffd", doc)
        else:
            pairs = [SURROGATE.subn("\ufffd", token) for token in doc]
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


def printable_name(name: str) -> str:
    """A file name as text any UTF-8 file can hold: bytes that are not UTF-8 (a Latin-1 name, which Python
    carries as lone surrogates) shown as ``\\xNN``. Distinct names stay distinct."""
    if not SURROGATE.search(name):
        return name
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return SURROGATE.sub("\ufffd", name)
