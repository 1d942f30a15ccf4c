"""Per-document risk: the documents an attack is most sure were training members.

Scores come from scores.npz, ζ from statistics.npz and the shadow
memberships from plan.npz. A document's words are shown only when asked
(``show_text``): the list of most exposed documents, with their text, names
likely members — the report itself then discloses membership.
"""
from __future__ import annotations

from typing import Any

import numpy as np

TEXT_LIMIT = 600      # characters of a document shown
BAG_WORDS = 25        # words of a bag-of-words document shown


def document_text(corpus, row: int) -> str:
    """The document as the corpus holds it: its text, or (bag of words) its most frequent words."""
    if corpus.texts is not None:
        text = " ".join(corpus.texts[row].split())
        return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + " …"
    counts = corpus.X.getrow(row)
    order = np.lexsort((counts.indices, -counts.data))[:BAG_WORDS]
    words = [f"{corpus.vocabulary[counts.indices[i]]}×{int(counts.data[i])}" for i in order]
    more = counts.nnz - len(words)
    return "bag of words: " + ", ".join(words) + (f", … ({more} more words)" if more > 0 else "")


def most_exposed(run, attack: str = "lira_online", top: int = 20, corpus=None,
                 show_text: bool = False) -> list[dict[str, Any]]:
    """The ``top`` documents with the highest score of ``attack``, highest first (ties: lower row first).

    Each row: rank, row (in the run's arrays), doc_index (position in the
    input corpus), member (the truth), score, ζ under the target, mean ζ over
    the shadows it was IN and OUT of, length (tokens; when the corpus is
    given) and text (only when ``show_text``; needs the corpus).
    """
    scores, stats, shadow_in = run.scores, run.statistics, run.shadow_in
    score = np.nan_to_num(np.asarray(scores[attack], dtype=float), nan=-np.inf)
    order = np.lexsort((np.arange(score.size), -score))[:max(top, 0)]
    zeta = stats["shadow_zeta"]
    lengths = np.asarray(corpus.X.sum(axis=1)).ravel() if corpus is not None else None
    rows = []
    for rank, row in enumerate(order, start=1):
        inside = shadow_in[:, row]
        entry = {
            "rank": rank, "row": int(row), "doc_index": int(scores["doc_index"][row]),
            "member": bool(scores["is_member"][row]), "score": float(scores[attack][row]),
            "zeta": float(stats["target_zeta"][row]),
            "zeta_in_mean": float(zeta[inside, row].mean()) if inside.any() else float("nan"),
            "zeta_out_mean": float(zeta[~inside, row].mean()) if (~inside).any() else float("nan"),
        }
        if lengths is not None:
            entry["length"] = int(lengths[row])
        if show_text:
            entry["text"] = document_text(corpus, int(row))
        rows.append(entry)
    return rows


def formatted(rows: list[dict[str, Any]], attack: str) -> tuple[list[str], list[list[str]]]:
    headers = ["rank", "document", "member", f"{attack} score", "ζ target", "mean ζ IN", "mean ζ OUT"]
    with_length = bool(rows) and "length" in rows[0]
    with_text = bool(rows) and "text" in rows[0]
    headers += ["words"] * with_length + ["text"] * with_text
    body = []
    for r in rows:
        cells = [str(r["rank"]), str(r["doc_index"]), "yes" if r["member"] else "no", f"{r['score']:.3f}",
                 f"{r['zeta']:.2f}", f"{r['zeta_in_mean']:.2f}", f"{r['zeta_out_mean']:.2f}"]
        if with_length:
            cells.append(str(r["length"]))
        if with_text:
            cells.append(r["text"])
        body.append(cells)
    return headers, body
