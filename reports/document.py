"""What a report says, as data: sections of paragraphs, tables and figures.

Both renderers (:mod:`topicaudit.reports.html`, :mod:`topicaudit.reports.markdown`) take this model;
every string in it is plain text (never markup), so escaping happens in
exactly one place per output format.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field


@dataclass
class FigureRef:
    stem: str            # figures/<stem>.png and figures/<stem>.svg
    title: str
    caption: str
    png: bytes           # embedded in the HTML page


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    wide_columns: tuple[int, ...] = ()  # columns holding long text (wrapped, wider)


@dataclass
class Paragraph:
    text: str


@dataclass
class Headline:
    """The answer a section leads with: a status word (VIOLATED, CONSISTENT, …) and its sentence."""
    status: str
    text: str


@dataclass
class Definitions:
    items: list[tuple[str, str]]  # term, meaning


Block = Paragraph | Table | FigureRef | Definitions | Headline


@dataclass
class Section:
    """A titled sequence of blocks, shown in order."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    anchor: str = ""

    def add(self, block: Block) -> Block:
        self.blocks.append(block)
        return block


@dataclass
class Report:
    title: str
    summary: list[str]                      # paragraphs at the top
    warnings: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# NUL and other control characters; the bidirectional marks, embeddings, overrides and
# isolates (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which can make text
# read differently from what it is (a right-to-left mark or override reversing a file
# name); the line and paragraph separators (U+2028, U+2029), which break a line where
# none is shown; the byte-order mark (U+FEFF); and lone surrogates, which are not
# characters (no UTF-8 file can hold them): all shown as visible escapes.
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                        "\u2066-\u2069\ufeff\ud800-\udfff]")


def visible_controls(text: str) -> str:
    """``text`` with control, bidi and separator characters replaced by ``\\xNN`` / ``\\uNNNN``."""
    return _INVISIBLE.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                     else f"\\u{ord(m.group()):04x}"), text)
