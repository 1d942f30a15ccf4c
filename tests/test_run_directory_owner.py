"""One owner for the run directory's archives: topicaudit.engine.storage.bounded_read is the only module that opens
.npz archives.

(``topicaudit.inputs`` reads the user's own Φ files, which are not run files.)
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPENERS = re.compile(r"\bnp\.load\(|\bnumpy\.load\(|\bBoundedNpz\(|\bzipfile\.ZipFile\(")


def test_only_bounded_read_opens_npz_files():
    openers = sorted(str(path.relative_to(ROOT)) for folder in ("audit", "reports", "targets")
                     for path in (ROOT / folder).rglob("*.py")
                     if OPENERS.search(path.read_text(encoding="utf-8")) and "inputs" not in path.parts)
    assert openers == ["audit/engine/storage/bounded_read.py"], openers
