"""Where ``--canaries auto`` keeps its choice beside the cached runs, read back without following a link and,
with an integrity key, only when the key MAC'd it: a planted sizing (5 canaries, "100%" power) made a VIOLATED
claim CONSISTENT at 0% power, under a sizing line stating power the audit did not have.

    <cache>/sizing/<16 hex of the key>.json

The key (``engine.sizing``) is the run's cache key with no canaries, the claim, the power and the budget.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from topicaudit.engine.storage.durable_write import atomic_write_text
from topicaudit.errors import UserError
from topicaudit.folder_anchors import anchor_of, declare
from topicaudit.inputs.integrity_key import integrity_key
from topicaudit.owned_folders import LinkedFolder, open_folder

SIZING_MAC_DOMAIN = "topicaudit.sizing-mac/1"  # what an integrity key's MAC over a kept sizing is a MAC of


def _mac_payload(key: str, body: dict[str, Any]) -> bytes:
    """What a kept sizing's MAC covers: its key (configuration, claim, power, budget) and its content."""
    return f"{key}\0{json.dumps(body, sort_keys=True, default=str)}".encode()


def kept_path(cache_root: Path, key: str) -> Path:
    """The file of ``key``'s sizing in the cache ``cache_root`` (declared the cache's own, as ``checked_root``
    declares it, when it is not below the cache's anchor)."""
    if not anchor_of(Path(cache_root))[1]:
        declare(Path(cache_root), Path(cache_root))
    return Path(cache_root) / "sizing" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def read_kept(cache_root: Path, key: str) -> dict[str, Any] | None:
    """The kept sizing's fields (with ``kept``, the file), or None: none kept, unreadable, or not MAC'd by the
    integrity key in use."""
    kept = kept_path(cache_root, key)
    secret = integrity_key()
    try:  # nothing read or written through a link (a sizing went into the folder it named): owned_folders
        data = json.loads(_read_text(kept))
        mac = data.pop("mac", None)
        if secret is None or secret.verifies(SIZING_MAC_DOMAIN, _mac_payload(key, data), mac):
            return {**data, "kept": str(kept)}
    except (OSError, ValueError, TypeError, AttributeError, RecursionError, LinkedFolder):
        pass
    return None


def write_kept(cache_root: Path, key: str, body: dict[str, Any]) -> None:
    """Keep ``body`` as ``key``'s sizing (MAC'd with the integrity key in use); a cache that cannot be written
    costs a new sizing next time, nothing else."""
    kept = kept_path(cache_root, key)
    secret = integrity_key()
    try:
        open_folder(kept.parent, create=True).close()
        if secret is not None:
            body = {**body, "mac": secret.mac(SIZING_MAC_DOMAIN, _mac_payload(key, body))}
        atomic_write_text(kept, json.dumps(body, indent=2) + "\n")
    except (OSError, UserError):  # (UserError: the entry is a directory or FIFO, which is never replaced)
        pass


def _read_text(kept: Path) -> str:
    """A kept sizing's text, read by the descriptor of its folder (opened below the cache's anchor without
    following a link), never through a link nor from a FIFO."""
    with open_folder(kept.parent) as folder:
        fd = folder.open(kept.name, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{kept} is not a regular file")
        return handle.read(1 << 20).decode("utf-8")
