"""The ``20news`` corpus format: the 20 Newsgroups "bydate" tarball, read from the archive in memory.

Headers, footers and quotes are removed as scikit-learn's
``fetch_20newsgroups(remove=...)`` removes them.
"""
from __future__ import annotations

import io
import re
import tarfile
import zlib
from pathlib import Path

from topicaudit.errors import UserError
from topicaudit.inputs.files import read_user_file
from topicaudit.inputs.formats.decoding import printable_name
from topicaudit.inputs.sizes import gunzip

TWENTY_NEWS_PARTS = ("headers", "footers", "quotes")
DEFAULT_20NEWS_REMOVE = TWENTY_NEWS_PARTS
_NEWS_MEMBER = re.compile(r"(?:\./)?20news-bydate-(train|test)/([^/]+)/([^/]+)")
_QUOTE_RE = re.compile(r"(writes in|writes:|wrote:|says:|said:|^In article|^Quoted from|^\||^>)")


def strip_newsgroup_header(text: str) -> str:
    """Everything after the first blank line (as scikit-learn)."""
    return text.partition("\n\n")[2]


def strip_newsgroup_quoting(text: str) -> str:
    """Drop quoted lines and lines introducing quotes (as scikit-learn)."""
    return "\n".join(line for line in text.split("\n") if not _QUOTE_RE.search(line))


def strip_newsgroup_footer(text: str) -> str:
    """Drop the signature after the last blank or all-hyphen line (as scikit-learn)."""
    lines = text.strip().split("\n")
    for line_num in range(len(lines) - 1, -1, -1):
        if lines[line_num].strip().strip("-") == "":
            break
    return "\n".join(lines[:line_num]) if line_num > 0 else text


def read_20news(path: Path, subset: str = "train",
                remove=DEFAULT_20NEWS_REMOVE) -> tuple[list[str], str, list[str]]:
    """The posts, a description, and each post's name ``20news-bydate-SPLIT/GROUP/ID``."""
    if subset not in ("train", "test", "all"):
        raise UserError(f"20news subset must be 'train', 'test' or 'all', got {subset!r}")
    if isinstance(remove, str):
        remove = (remove,) if remove else ()
    try:
        remove = tuple(remove)
    except TypeError:
        raise UserError(f"20news remove must be a list of {', '.join(TWENTY_NEWS_PARTS)}, got {remove!r}") from None
    bad = [r for r in remove if r not in TWENTY_NEWS_PARTS]
    if bad:
        raise UserError(
            f"20news remove has unknown part(s) {', '.join(map(repr, bad))}; "
            f"choose from {', '.join(TWENTY_NEWS_PARTS)} (or none)"
        )
    splits = ("train", "test") if subset == "all" else (subset,)
    raw = read_user_file(path, "20news archive")
    posts = []
    try:
        if raw[:2] == b"\x1f\x8b":  # gzip: inflate in memory once (faster than streaming), size capped
            raw = gunzip(raw, str(path))
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:*") as tf:
            for member in tf:  # streamed: nothing is written to disk
                m = _NEWS_MEMBER.fullmatch(member.name)
                if not m or not member.isfile() or m.group(1) not in splits:
                    continue
                f = tf.extractfile(member)
                text = f.read().decode("latin-1")
                posts.append(((splits.index(m.group(1)), m.group(2), m.group(3)), text))  # key: split, group, id
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        reason = " ".join(str(e).split("\n")[0].split()).rstrip(":")  # tarfile lists every method tried
        raise UserError(
            f"{path}: not a readable tar archive ({type(e).__name__}: {reason}); give the 20news-bydate "
            ".tar.gz file"
        ) from None
    if not posts:
        raise UserError(
            f"{path}: no posts under 20news-bydate-{'/'.join(splits)}/GROUP/ID in the archive; "
            "give the 20news-bydate tarball (as scikit-learn downloads it)"
        )
    posts.sort(key=lambda p: p[0])
    texts = []
    ids = [printable_name(f"20news-bydate-{splits[s]}/{group}/{name}") for (s, group, name), _ in posts]
    for _, text in posts:
        if "headers" in remove:
            text = strip_newsgroup_header(text)
        if "footers" in remove:
            text = strip_newsgroup_footer(text)
        if "quotes" in remove:
            text = strip_newsgroup_quoting(text)
        texts.append(text)
    removed = f"removed {'+'.join(remove)}" if remove else "posts whole"
    return texts, f"20news {path} (subset {subset}, {len(texts)} posts, {removed})", ids
