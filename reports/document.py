"""What a report says, as data: sections of paragraphs, tables and figures.

Both renderers (:mod:`reports.html`, :mod:`reports.markdown`) take this model;
every string in it is plain text (never markup), so escaping happens in
exactly one place per output format.
"""
from __future__ import annotations

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
class Definitions:
    items: list[tuple[str, str]]  # term, meaning


Block = Paragraph | Table | FigureRef | Definitions


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
