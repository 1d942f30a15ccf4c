"""scores.csv, an audit's ranking: corpus text in cells a spreadsheet displays rather than evaluates."""
from __future__ import annotations

import csv
import io
import re
from typing import Any

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# What a spreadsheet may skip before a formula: whitespace of every kind (\s: VT, FF, NEL, U+2028, NBSP, ...)
# and the invisible format characters (zero-width, bidi marks and controls, BOM).
_SKIPPED = r"[\s\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]*"
_FORMULA_AT_START = re.compile(_SKIPPED + r"[=+\-@]")
# A break a reader may take for a new cell or line: line breaks and separators of every kind, ; , and tab.
_FORMULA_AFTER_BREAK = re.compile(r"(?<=[\n;,\t\x0b\x0c\x1c-\x1e\x85\u2028\u2029])(?=" + _SKIPPED + r"[=+\-@])")


def csv_cell(text: str) -> str:
    """Corpus text as a CSV cell that spreadsheets display rather than evaluate (OWASP CSV injection).

    A cell starting like a formula gets a ``'`` prefix, also when whitespace
    or invisible characters of any kind come before the ``=`` (a spreadsheet
    may skip them). So does a formula character after a line break or
    separator of any kind, ``;``, ``,`` or tab inside the cell: a spreadsheet
    assuming another separator or line ending would start a cell there.
    ``\r`` becomes ``\n`` (a bare carriage return ends a row for many readers).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _FORMULA_AFTER_BREAK.sub("'", text)
    return "'" + text if text.startswith(_FORMULA_START) or _FORMULA_AT_START.match(text) else text


def scores_csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """scores.csv's text: a header of ``columns``, then one line per row; floats with 10 significant digits,
    ``id`` and ``text`` cells made safe for spreadsheets (:func:`csv_cell`)."""
    out = io.StringIO()
    # Every cell quoted (OWASP): a "\r" (not in the line terminator, so QUOTE_MINIMAL left it bare),
    # a ";=" or a "\t=" inside a cell stays inside it whatever separator or line ending a reader assumes.
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(columns)
    for row in rows:
        cells = []
        for c in columns:
            value = row[c]
            if c in ("id", "text"):
                cells.append(csv_cell(str(value)))
            elif isinstance(value, float):
                cells.append(format(value, ".10g"))
            else:
                cells.append(str(value))
        writer.writerow(cells)
    return out.getvalue()
