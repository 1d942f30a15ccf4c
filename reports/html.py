"""The report as one self-contained HTML page.

Figures are embedded as base64 PNG data URIs, styles are inline, there is no
script and no external resource, so the page opens from disk with no network.
A Content-Security-Policy forbids scripts and any non-embedded resource as a
second line of defence. Escaping discipline: every string that comes from a
run, a configuration or a corpus goes through :func:`esc` (``html.escape``
with quotes) exactly once, at the point where it is placed in markup; the
only unescaped text is this module's own literal markup.
"""
from __future__ import annotations

import base64
import html

from topicaudit.reports.document import (Definitions, FigureRef, Headline, Paragraph, Report, Section, Table,
                                         visible_controls)

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 2em auto;
       max-width: 1320px; padding: 0 1.2em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { margin-top: 1.6em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
td:first-child { overflow-wrap: anywhere; min-width: 8em; }  /* run paths: the one cell that may break in a word */
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.wide { min-width: 28em; max-width: 48em; overflow-wrap: anywhere; white-space: pre-wrap; }
.scroll { overflow-x: auto; }
figure { margin: 1em 0 1.6em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 12px; color: #555; max-width: 60em; }
.warning { background: #fff3cd; border: 1px solid #e0c060; padding: .6em 1em; border-radius: 4px; }
dl { font-size: 12px; } dt { font-weight: 600; float: left; clear: left; width: 11em; } dd { margin-left: 12em; }
.notes li { font-size: 12px; color: #444; }
.verdict { font-size: 16px; padding: .7em 1em; border-radius: 4px; border: 2px solid #999; background: #f6f6f6; }
.verdict strong { letter-spacing: .04em; margin-right: .4em; }
.verdict-violated { border-color: #b00020; background: #fdecee; }
.verdict-consistent { border-color: #2e7d32; background: #edf7ee; }
.verdict-no-claim, .verdict-no-signal { border-color: #8a6d00; background: #fff8e1; }
.verdict-high-exposure { border-color: #b00020; background: #fdecee; }
.verdict-some-exposure, .verdict-not-measured { border-color: #8a6d00; background: #fff8e1; }
.verdict-little-exposure { border-color: #2e7d32; background: #edf7ee; }
"""


def esc(text: object) -> str:
    """Text (from anywhere) made safe for HTML element content and quoted attribute values."""
    return html.escape(visible_controls(str(text)), quote=True)


def _is_number(cell: str) -> bool:
    stripped = cell.replace("%", "").replace("±", "").replace(" ", "").replace(".", "").replace("-", "")
    return bool(stripped) and stripped.isdigit()


def _table(table: Table) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in table.headers)
    body = []
    for row in table.rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="wide"' if i in table.wide_columns else (' class="num"' if _is_number(cell) else "")
            cells.append(f"<td{cls}>{esc(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = f"<caption>{esc(table.caption)}</caption>" if table.caption else ""
    return (f'<div class="scroll"><table>{caption}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _figure(figure: FigureRef) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    return (f'<figure id="fig-{esc(figure.stem)}"><img src="data:image/png;base64,{data}" alt="{esc(figure.title)}">'
            f"<figcaption><b>{esc(figure.title)}.</b> {esc(figure.caption)} "
            f'(<a href="figures/{esc(figure.stem)}.svg">SVG</a>, '
            f'<a href="figures/{esc(figure.stem)}.png">PNG</a>)</figcaption></figure>')


def _section(section: Section, level: int) -> str:
    anchor = f' id="{esc(section.anchor)}"' if section.anchor else ""
    parts = [f"<h{level}{anchor}>{esc(section.title)}</h{level}>"]
    for block in section.blocks:
        if isinstance(block, Paragraph):
            parts.append(f"<p>{esc(block.text)}</p>")
        elif isinstance(block, Headline):
            status = esc(block.status)
            kind = "".join(c if c.isalnum() else "-" for c in block.status.lower())
            rest = block.text[len(block.status):].lstrip(": ") if block.text.startswith(block.status) else block.text
            parts.append(f'<p class="verdict verdict-{esc(kind)}"><strong>{status}</strong>{esc(rest)}</p>')
        elif isinstance(block, Definitions):
            parts.append("<dl>" + "".join(f"<dt>{esc(t)}</dt><dd>{esc(d)}</dd>" for t, d in block.items) + "</dl>")
        elif isinstance(block, Table):
            parts.append(_table(block))
        elif isinstance(block, FigureRef):
            parts.append(_figure(block))
        else:
            raise TypeError(f"unknown block {type(block).__name__}")
    return "\n".join(parts)


def render_html(report: Report) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(report.title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{esc(report.title)}</h1>",
    ]
    parts += [f"<p>{esc(p)}</p>" for p in report.summary]
    parts += [f'<p class="warning">{esc(w)}</p>' for w in report.warnings]
    parts += [_section(s, 2) for s in report.sections]
    if report.notes:
        parts.append('<h2>Notes</h2><ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in report.notes)
                     + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
