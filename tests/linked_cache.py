"""A cache folder turned into a link to a user's folder, and a corpus small enough to cache: shared by the
hostile passes' tests of "nothing is written through a link" (tests/test_hardening_x.py, _xi.py)."""
from __future__ import annotations

import json
from pathlib import Path

from topicaudit.engine.configuration.config import Config


def users_folder_linked_at(link: Path) -> Path:
    """A user's folder (holding keep.txt) that ``link`` points to."""
    users = link.parent.parent / f"users-folder-{link.name}"
    users.mkdir()
    (users / "keep.txt").write_text("mine")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(users)
    return users


def small_json_corpus_config(folder: Path) -> Config:
    """A configuration over a 12-document JSON corpus, unprocessed (so the corpus cache is used)."""
    corpus = folder / "docs.json"
    corpus.write_text(json.dumps({"text": ["dogs bark at cats", "cats sleep all day", "mice run from cats"] * 4}))
    config = Config()
    config.corpus.path = str(corpus)
    config.corpus.preprocess = False
    return config
