"""TOML read with bounds checked before parsing: configuration files and command-line values.

``tomllib`` has no limits of its own. A 200 KB file holding one dotted key of
100,000 parts grew past 7 GB within two minutes; arrays or inline tables
nested a few thousand deep raised RecursionError (exit 3). No configuration
comes near these bounds, so a text beyond them is refused (exit 2) before
``tomllib`` sees it: its size, the nesting depth of its arrays and inline
tables, the parts of any one dotted key, and the length of any one line.
"""
from __future__ import annotations

import tomllib
from typing import Any

from topicaudit.errors import UserError

MAX_BYTES = 1 << 20     # a configuration is a few KB; corpora and vocabularies are files it names
MAX_DEPTH = 32          # nested arrays / inline tables ([[[…]]], {a = {b = …}})
MAX_KEY_PARTS = 32      # a.b.c…: the deepest key topicaudit reads has 4 parts ([corpus.options] name)
MAX_LINE = 64 * 1024    # one line (a long key or value): far above a list of sweep values

_BARE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+:")
_FIX = "no topicaudit setting comes near that — correct it (docs/configuration.md lists every key)"


def loads(text: str, where: str) -> dict[str, Any]:
    """``tomllib.loads(text)`` once ``text`` is within the bounds; a UserError naming ``where`` otherwise (and for
    invalid TOML). A leading UTF-8 byte-order mark (Windows editors write one) is not part of the document:
    tomllib read it as "Invalid statement"."""
    text = text.removeprefix("\ufeff")
    check_bounds(text, where)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{where} is not valid TOML: {error}") from None
    except RecursionError:  # not reached within the bounds; kept so no parse can end as an internal error
        raise UserError(f"{where} is nested too deeply to read; {_FIX}") from None


def check_bounds(text: str, where: str) -> None:
    """Refuse a TOML text over the bounds above, with one message naming the bound and the line."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise too_large(where)
    depth, parts, line, line_start, i, n = 0, 1, 1, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            if i - line_start > MAX_LINE:
                _too(where, line, f"longer than {MAX_LINE // 1024} KiB")
            line, line_start, parts = line + 1, i + 1, 1
            i += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in "\"'":
            i = _skip_string(text, i)
        elif c in "[{":
            if c == "[" and depth == 0 and not text[line_start:i].strip():
                i += 1  # a table header [a.b] or [[a.b]], not an array
                continue
            depth += 1
            if depth > MAX_DEPTH:
                _too(where, line, f"nested more than {MAX_DEPTH} deep (arrays or inline tables)")
            parts = 1
            i += 1
        elif c in "]}":
            depth = max(depth - 1, 0)
            parts = 1
            i += 1
        elif c == ".":
            parts += 1
            if parts > MAX_KEY_PARTS:
                _too(where, line, f"a dotted key of more than {MAX_KEY_PARTS} parts")
            i += 1
        elif c in " \t\r" or c in _BARE:
            i += 1
        else:  # = , and anything else end a key (a float's one dot never reaches the bound)
            parts = 1
            i += 1
    if n - line_start > MAX_LINE:
        _too(where, line, f"longer than {MAX_LINE // 1024} KiB")


def too_large(where: str) -> UserError:
    """The error for a text over MAX_BYTES (a file is refused from its size, before it is read)."""
    return UserError(f"{where} is larger than {MAX_BYTES // 1024} KiB; {_FIX}")


def _skip_string(text: str, i: int) -> int:
    """The index after the string starting at ``i`` (basic, literal, or their multi-line forms)."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        end = i + 3
        while True:
            end = text.find(quote * 3, end)
            if end < 0:
                return len(text)
            if quote == '"' and _escaped(text, end):
                end += 1
                continue
            return end + 3
    end = i + 1
    while end < len(text) and text[end] not in (quote, "\n"):
        end += 2 if quote == '"' and text[end] == "\\" else 1
    return end + 1


def _escaped(text: str, i: int) -> bool:
    """Whether text[i] is preceded by an odd number of backslashes."""
    count = 0
    while i - count - 1 >= 0 and text[i - count - 1] == "\\":
        count += 1
    return count % 2 == 1


def _too(where: str, line: int, what: str) -> None:
    raise UserError(f"{where}, line {line}: {what}; {_FIX}")
