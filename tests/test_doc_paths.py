"""Every path the docs name is real: a repository file (`audit/…`, `tests/…`, `x.py`) exists, and a
`topicaudit.…` import path imports (a module, or an attribute of one)."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Names that are not paths of this repository: files a command writes, entry-point groups.
NOT_PATHS = {"report.md", "topicaudit.learners", "topicaudit.vocabulary_steps"}
REPO_PATH = re.compile(r"(audit|targets|reports|tests|benchmarks|docs|\.ci)/[\w./-]*|[\w-]+\.(py|md)")
IMPORT_PATH = re.compile(r"topicaudit(\.\w+)+")


def named(doc: Path) -> set[str]:
    return {token.rstrip(".,;:") for token in re.findall(r"`([^`\s]+)`", doc.read_text())} - NOT_PATHS


def file_exists(path: str, doc: Path) -> bool:
    places = (ROOT, doc.parent, ROOT / "audit", ROOT / "targets", ROOT / "targets" / "learners", ROOT / "reports",
              ROOT / "benchmarks", ROOT / "tests")
    return any((place / path).exists() for place in places)


def imports(path: str) -> bool:
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attribute in parts[i:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_path_a_page_names_exists(doc):
    missing = sorted(t for t in named(doc) if REPO_PATH.fullmatch(t) and not file_exists(t, doc))
    missing += sorted(t for t in named(doc) if IMPORT_PATH.fullmatch(t) and not imports(t))
    assert not missing, f"{doc.name} names what is not there: {', '.join(missing)}"
