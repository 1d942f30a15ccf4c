"""A cache folder turned into a link to a user's folder, and a corpus small enough to cache: shared by the
hostile passes' tests of "nothing is written through a link" (tests/test_hardening_x.py, _xi.py), the snapshot
they compare a folder by (_xiv.py, _xv.py), and the tiny finished run they start from (``run_dir``: _xv.py,
_xvi_h.py, _xvii_j.py)."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topicaudit.cli.main import main
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


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` (the folder itself included, links not followed): type and mode, size, mtime,
    SHA-256, link count, link target."""
    found = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        info = os.lstat(path)
        regular = path.is_file() and not path.is_symlink()
        found[path.relative_to(folder).as_posix()] = (
            info.st_mode, info.st_size if regular else 0, info.st_mtime_ns, info.st_nlink,
            hashlib.sha256(path.read_bytes()).hexdigest() if regular else "",
            os.readlink(path) if path.is_symlink() else "")
    return found

@pytest.fixture
def run_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "RUN"]) == 0
    capsys.readouterr()
    return tmp_path / "RUN"


def planted_by_another_user(tmp_path: Path) -> tuple[Path, Path]:
    """T, a shared sticky folder holding L, nobody's link to V, a folder of this user's dated 2020 (needs root)."""
    shared, mine = tmp_path / "T", tmp_path / "V"
    shared.mkdir()
    mine.mkdir()
    shared.chmod(0o1777)
    (shared / "L").symlink_to(mine)
    os.lchown(shared / "L", 65534, 65534)
    os.utime(mine, (1577836800, 1577836800))
    return shared, mine


def untouched_since_2020(mine: Path) -> bool:
    """V as ``planted_by_another_user`` left it: empty, its time unchanged."""
    return os.listdir(mine) == [] and os.stat(mine).st_mtime == 1577836800


def run_on_an_empty_corpus(tmp_path: Path, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """`run` (in a new process) of a corpus whose every document is stopwords: refused (exit 2) after pre-processing,
    which asks tempfile for its folder (nltk's path check) — where a planted TMPDIR changed the user's folder."""
    corpus = tmp_path / "c.json"
    corpus.write_text(json.dumps({"text": ["the and of", "a to in"] * 5}))
    return subprocess.run([sys.executable, "-c", "import sys; from topicaudit.cli.main import run_command; "
                           "sys.exit(run_command(sys.argv[1:]))", "run", "--corpus", str(corpus), "--shadows", "0",
                           "--canaries", "4", "--output", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=120, cwd=cwd)
