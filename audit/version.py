"""The package version, and a digest of the package's own source, in the lowest layer so that every layer can
record them."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import secrets
import sys
from pathlib import Path

import topicaudit.loaded_code as loaded_code

__version__ = "0.1.0"



def source_digest() -> str:
    """SHA-256 of topicaudit's own Python source (every ``.py`` file of the package, by relative path), and of the
    data files it ships (``_data``: stop words and WordNet change what a pre-processed corpus is; an edit to them
    kept the key, and the entry was then refused as another configuration: hostile pass XIX-zc, ED4).

    The version alone does not change when the code does (a checkout, an
    editable install): a cached run is reused only under the same digest
    (``topicaudit.engine.storage.run_cache``). About 200 files: a few milliseconds.

    The package is three folders (``audit``, ``targets``, ``reports``: docs/architecture.md). Installed, or in the
    strict editable mode, ``targets`` and ``reports`` are inside the package's folder; in the default editable mode
    (``pip install -e .``, the README's) they are mapped from their own folders, and the digest read ``audit`` alone:
    an edit to a built-in learner reused the run of the code before it (hostile pass XIX-zc). Each subpackage found
    outside the package's folder is digested too, under its name.

    A module of topicaudit whose file changed after this process loaded it (a built-in learner edited between two
    calls in one notebook or pytest session) runs other code than the files say: the digest is then this process's
    own (``edited-`` and a token drawn once), which no other process computes, so the run of the code loaded before
    the edit is never reused under the files' key (hostile pass XIX-zc, ED2), as a plug-in's (``loaded_code``).
    """
    if edited_since_loaded():
        return f"edited-{_PROCESS_TOKEN}"
    digest = hashlib.sha256()
    root = _package_root()
    for folder, prefix in [(root, ""), *_mapped_subpackages(root)]:
        for place, directories, files in os.walk(folder, followlinks=True):
            directories[:] = sorted(d for d in directories if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py") or Path(place).name == DATA_FOLDER:
                    path = Path(place) / name
                    label = prefix + path.relative_to(folder).as_posix()
                    digest.update(label.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


_PROCESS_TOKEN = secrets.token_hex(24)
DATA_FOLDER = "_data"  # the folders of data files the package ships, digested with its code


def edited_since_loaded() -> list[str]:
    """topicaudit's own modules whose files changed (edited, replaced, removed) after this process loaded them."""
    return [name for name, module in list(sys.modules.items())
            if (name == "topicaudit" or name.startswith("topicaudit.")) and module is not None
            and loaded_code.changed_since_loaded(module)]


# The subpackages setup.py maps from folders of their own (pyproject.toml's [tool.setuptools.package-dir]).
MAPPED_SUBPACKAGES = ("targets", "reports")


def _mapped_subpackages(root: Path) -> list[tuple[Path, str]]:
    """The folders of topicaudit's mapped subpackages that are not inside ``root`` (the default editable mode),
    each with the prefix its files are named by (``targets/``), as they would be inside the package's folder."""
    found = []
    for name in MAPPED_SUBPACKAGES:
        try:
            spec = importlib.util.find_spec(f"topicaudit.{name}")
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or ()) if spec is not None else ():
            folder = Path(location)
            if not _inside(folder, root):
                found.append((folder, f"{name}/"))
    return found


def _inside(folder: Path, root: Path) -> bool:
    """Whether ``folder`` is ``root`` or below it, as spelled or as resolved."""
    for a, b in ((folder, root), (folder.resolve(), root.resolve())):
        if a == b or b in a.parents:
            return True
    return False


def _package_root() -> Path:
    """The installed package's directory (its files may be links into the source tree)."""
    return Path(__file__).parent
