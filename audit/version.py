"""The package version, and a digest of the package's own source, in the lowest layer so that every layer can
record them."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

__version__ = "0.1.0"



def source_digest() -> str:
    """SHA-256 of topicaudit's own Python source (every ``.py`` file of the package, by relative path).

    The version alone does not change when the code does (a checkout, an
    editable install): a cached run is reused only under the same digest
    (``topicaudit.engine.storage.run_cache``). About 200 files: a few milliseconds.
    """
    digest = hashlib.sha256()
    for root, directories, files in os.walk(_package_root(), followlinks=True):
        directories[:] = sorted(d for d in directories if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(root) / name
                digest.update(path.relative_to(_package_root()).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _package_root() -> Path:
    """The installed package's directory (its files may be links into the source tree)."""
    return Path(__file__).parent
