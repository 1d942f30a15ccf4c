"""The report as a Markdown summary (tables and links to the PNG figures beside it).

Text from runs and corpora is made inert: HTML-escaped (Markdown renderers
pass raw HTML through), Markdown punctuation backslash-escaped, and table
cells kept on one line with ``|`` escaped.
"""
from __future__ import annotations

import html
import re

from topicaudit.reports.document import (Definitions, FigureRef, Headline, Paragraph, Report, Section, Table,
                                         visible_controls)

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")
_ORDERED_ITEM = re.compile(r"(\d{1,9})([.)])(\s|$)")


def md_text(text: object, line_start: bool = True) -> str:
    """Plain text as inert Markdown (one line).

    line_start: the text begins a line (a paragraph or list item), where
    ``- x`` or ``1. x`` would start a list.
    """
    one_line = " ".join(visible_controls(str(text)).split())
    inert = _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(one_line, quote=False))
    if line_start:
        item = _ORDERED_ITEM.match(inert)
        if item:
            inert = f"{item.group(1)}\\{inert[item.end(1):]}"
        elif inert[:1] in ("-", "+", "="):  # (">" is already "&gt;", which starts no quote)
            inert = "\\" + inert
    return inert


def _table(table: Table) -> list[str]:
    lines = []
    if table.caption:
        lines += [f"*{md_text(table.caption)}*", ""]
    lines.append("| " + " | ".join(md_text(h, line_start=False) for h in table.headers) + " |")
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    lines += ["| " + " | ".join(md_text(c, line_start=False) for c in row) + " |" for row in table.rows]
    return lines + [""]


def _section(section: Section, level: int) -> list[str]:
    lines = [f"{'#' * level} {md_text(section.title)}", ""]
    for block in section.blocks:
        if isinstance(block, Paragraph):
            lines += [md_text(block.text), ""]
        elif isinstance(block, Headline):
            lines += [f"> {md_text(block.text, line_start=False)}", ""]
        elif isinstance(block, Definitions):
            lines += [f"- **{md_text(t)}**: {md_text(d)}" for t, d in block.items] + [""]
        elif isinstance(block, Table):
            lines += _table(block)
        elif isinstance(block, FigureRef):
            lines += [f"![{md_text(block.title)}](figures/{block.stem}.png)", "",
                      f"*{md_text(block.title)}.* {md_text(block.caption)} ([SVG](figures/{block.stem}.svg))", ""]
        else:
            raise TypeError(f"unknown block {type(block).__name__}")
    return lines


def render_markdown(report: Report) -> str:
    lines = [f"# {md_text(report.title)}", ""]
    for p in report.summary:
        lines += [md_text(p), ""]
    for w in report.warnings:
        lines += [f"> **Warning:** {md_text(w)}", ""]
    for s in report.sections:
        lines += _section(s, 2)
    if report.notes:
        lines += ["## Notes", ""] + [f"- {md_text(n)}" for n in report.notes] + [""]
    return "\n".join(lines).rstrip() + "\n"
