"""Cached pre-processing: a text corpus read once is counted once.

Reading and pre-processing a text corpus (tokenising, stop words,
lemmatising) is the same work every time the same file is audited with the
same settings. The first load stores its result, the :class:`Corpus` (counts,
vocabulary, texts, document ids, the description), in one ``.npz`` file; a
later load with the same key reads it back instead: the same arrays, so the
same corpus fingerprint and the same results.

The key is a SHA-256 of the corpus file's bytes, the path as given (it is
part of the corpus's description), the format and every loader setting
(``preprocess``, ``text_field``, options, ``max_words``), topicaudit's version
and the source of the modules that turn text into counts. Any change to one
of them is another entry. Only single-file text formats are cached (``json``,
``20news``): counts files (``uci``, ``mm``) are not pre-processed, and a folder
is read file by file anyway.

Where: ``$TOPICAUDIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/topicaudit``, else
``~/.cache/topicaudit``; entries are ``corpora/<key>.npz``. Deleting the
directory clears it; ``TOPICAUDIT_CACHE_DIR=off`` turns it off.

An entry is written atomically (a temporary file renamed into place) and
never trusted: it is read with the bounded ``.npz`` reader (no pickles), its
stored key must be the key asked for and its SHA-256 digest of the arrays must
match, and the counts and vocabulary pass the loaders' own checks. An entry
that fails any of this is ignored and rebuilt from the corpus file. A cache
that cannot be written (a read-only home) is skipped; no run fails for it.
The loader's notes (warnings) are stored too and repeated on a hit.

The key and the digest detect damage and staleness, not forgery: they are
computed from public information, so whoever can write the cache directory
can store doubled counts for an unchanged file under the right key with a
matching digest (docs/corpora.md#cache says so, and how to turn the cache off).
With an integrity key configured (``topicaudit.inputs.integrity_key``) an entry
also carries an HMAC-SHA256 of its key and digest, and one without a MAC that
verifies is discarded and rebuilt from the corpus file: a forger without the key
cannot make an entry that is used.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import warnings
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus, detect_format
from topicaudit.inputs.counting import check_vocabulary
from topicaudit.inputs.files import read_user_file
from topicaudit.inputs.integrity_key import integrity_key
from topicaudit.inputs.sizes import BoundedNpz
from topicaudit.folder_anchors import declare
from topicaudit.owned_folders import CLOEXEC, NOFOLLOW, Folder, LinkedFolder, PlantedLink, open_folder
from topicaudit.targets.counts import check_counts
from topicaudit.version import __version__

ENVIRONMENT_VARIABLE = "TOPICAUDIT_CACHE_DIR"
OFF = "off"
SCHEMA = "topicaudit.corpus-cache/2"  # part of every key: entries of schema 1 are never looked up, so rebuilt
DIGEST_DOMAIN = "topicaudit.corpus-cache-digest/2"  # what an entry's digest is a digest of (``_digest``)
CACHED_FORMATS = ("json", "20news")
MAC_DOMAIN = "topicaudit.corpus-cache-mac/1"  # what an integrity key's MAC over an entry is a MAC of
# Where the text-to-counts code lives: its source is part of every key, so an edit to it is never served stale counts.
_CODE = Path(__file__).resolve().parent
_CODE_FILES = ("corpus.py", "counting.py", "preprocess.py", "files.py", "sizes.py", "formats", "_data")
_WARNINGS = {cls.__name__: cls for cls in (UserWarning, RuntimeWarning, DeprecationWarning, FutureWarning,
                                            SyntaxWarning, UnicodeWarning, ResourceWarning, PendingDeprecationWarning)}


def cache_directory() -> Path | None:
    """The cache's directory, or None when it is turned off (``TOPICAUDIT_CACHE_DIR=off``)."""
    chosen = os.environ.get(ENVIRONMENT_VARIABLE)
    if chosen is not None:
        return None if chosen.strip().lower() in (OFF, "") else Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or ""  # relative: ignored, as the XDG specification says
    if os.path.isabs(base):
        return Path(base) / "topicaudit"
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no HOME and no entry in the password database
        home = None
    if home is None or not home.is_dir():  # HOME=/nonexistent (Debian's `nobody`): it was made, cache and all
        warnings.warn(f"the home directory {home or '(none)'} does not exist, so there is no default cache "
                      f"(~/.cache/topicaudit, never made with the home directory itself): the cache is off; set "
                      f"{ENVIRONMENT_VARIABLE} to a folder to keep one", UserWarning, stacklevel=2)
        return None
    return home / ".cache" / "topicaudit"


def cache_anchor(directory: Path) -> Path:
    """Where the cache's own folders start: ``directory`` itself when the user named it
    (``$TOPICAUDIT_CACHE_DIR``, which may be a link), else the XDG base above the default
    ``~/.cache/topicaudit`` (or ``$XDG_CACHE_HOME/topicaudit``), which is then the cache's own folder too: as a
    link it had entries and whole runs written into the folder it named. Every folder below the anchor is opened
    without following a link (``topicaudit.owned_folders``), and declared so here."""
    named = os.environ.get(ENVIRONMENT_VARIABLE) is not None
    anchor = directory if named else directory.parent
    declare(directory, anchor)
    return anchor


@lru_cache(maxsize=1)
def _code_digest() -> str:
    digest = hashlib.sha256()
    for name in _CODE_FILES:
        path = _CODE / name
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(file.relative_to(_CODE).as_posix().encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def cache_key(path, format: str | None, settings: dict[str, Any]) -> str | None:
    """The entry's key for this corpus file and these settings; None when the corpus is not cached."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    try:
        fmt = format or detect_format(Path(path))
        if fmt not in CACHED_FORMATS:
            return None
        content = hashlib.sha256(read_user_file(Path(path), "corpus file")).hexdigest()
    except (UserError, OSError):
        return None  # the loader itself says what is wrong with the path
    described = json.dumps({"schema": SCHEMA, "version": __version__, "code": _code_digest(), "path": str(path),
                            "format": fmt, "content": content, "settings": settings}, sort_keys=True, default=str)
    return hashlib.sha256(described.encode()).hexdigest()


def cached_corpus(path, format: str | None, settings: dict[str, Any], load: Callable[[], Corpus]) -> Corpus:
    """``load()``'s corpus, read from the cache when an intact entry has this key, else loaded and stored."""
    directory = cache_directory()
    key = cache_key(path, format, settings) if directory is not None else None
    if directory is None or key is None:
        return load()
    cache_anchor(directory)
    name = f"{key}.npz"
    try:
        folder = open_folder(directory / "corpora", create=True)
    except PlantedLink as planted:  # a folder above it is another user's link in a shared /tmp
        warnings.warn(f"the corpus cache in {directory} is not used (nothing is read or written there): "
                      f"{planted.reason}", UserWarning, stacklevel=2)
        return load()
    except LinkedFolder as linked:
        # Entries were written through it into whatever folder it named (a user's, or another user's), and read
        # from there: the cache's own folder is a real one, as a run's models/ is.
        what = "a symbolic link" if linked.target is not None else "not a directory"
        warnings.warn(f"the corpus cache folder {linked.path} is {what}, so the cache is not used (nothing is "
                      "read or written through it); remove the link, or point TOPICAUDIT_CACHE_DIR at the folder "
                      "itself", UserWarning, stacklevel=2)
        return load()
    except OSError:
        return load()  # a cache that cannot be made is skipped
    with folder:
        found = read_entry(folder.path / name, key, folder)
        if found is not None:
            corpus, notes = found
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                corpus = load()
            notes = [(w.category.__name__, str(w.message)) for w in caught]
            # The key hashed the file before load() read it again: stored only if the file did not change
            # between. A file rewritten in that window (a CI step regenerating it) was stored under the key of
            # content it no longer had, MAC'd with a key, and served to every later run of the original file.
            if cache_key(path, format, settings) == key:
                write_entry(folder.path / name, key, corpus, notes, folder)
            else:
                warnings.warn(f"the corpus file {path} changed while it was read; this run uses what was read, "
                              "and its counts are not cached", UserWarning, stacklevel=2)
    for category, message in notes:
        warnings.warn(message, _WARNINGS.get(category, UserWarning), stacklevel=2)
    return corpus


# -- the entry's file ----------------------------------------------------------------
def _strings(values: list[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A list of strings as one UTF-8 byte array and the offsets of each string's end (no pickles)."""
    encoded = [str(v).encode("utf-8", "surrogatepass") for v in values]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def _unstrings(blob: np.ndarray, ends: np.ndarray) -> list[str]:
    data = blob.tobytes()
    starts = np.concatenate([[0], ends[:-1]]) if ends.size else ends
    return [data[s:e].decode("utf-8", "surrogatepass") for s, e in zip(starts.tolist(), ends.tolist())]


def _arrays(corpus: Corpus, notes: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    X = corpus.X
    arrays = {"indptr": X.indptr, "indices": X.indices, "data": X.data,
              "shape": np.array(X.shape, dtype=np.int64), "doc_index": corpus.doc_index,
              "n_dropped_empty": np.int64(corpus.n_dropped_empty)}
    for name, values in (("vocabulary", corpus.vocabulary), ("source", [corpus.source]),
                         ("notes", [json.dumps(notes)]), ("texts", corpus.texts), ("doc_ids", corpus.doc_ids)):
        if values is not None:
            arrays[f"{name}_bytes"], arrays[f"{name}_ends"] = _strings(values)
    return arrays


def _digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the arrays, every field framed by its length (the count, then each name, dtype, shape and
    bytes), so no two sets of arrays share an encoding. The framing of schema 1 (``name:dtype:shape`` then the
    bytes, no lengths) was not injective: {"a": b"q", "b": B} and {"a:|u1:(1,)qb": B} hashed alike."""
    digest = hashlib.sha256(DIGEST_DOMAIN.encode() + b"\0")

    def field(data: bytes) -> None:
        digest.update(len(data).to_bytes(8, "little") + data)

    field(str(len(arrays)).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        field(name.encode("utf-8", "surrogatepass"))
        field(a.dtype.str.encode())
        field(",".join(map(str, a.shape)).encode())
        field(a.tobytes())
    return digest.hexdigest()


def _mac_payload(key: str, digest: str) -> bytes:
    """What an entry's MAC covers: its cache key (the corpus file's content and settings) and its arrays' digest."""
    return f"{key}\0{digest}".encode()


def write_entry(entry: Path, key: str, corpus: Corpus, notes: list[tuple[str, str]],
                folder: Folder | None = None) -> None:
    """Store the corpus under ``key``, atomically, by the descriptor of ``folder`` (the cache's, opened by
    ``cached_corpus``; None: ``entry``'s folder); a cache that cannot be written is skipped. With an integrity
    key configured the entry carries its MAC."""
    secret = integrity_key()
    arrays = _arrays(corpus, notes)
    digest = _digest(arrays)
    arrays["key"] = np.frombuffer(key.encode(), dtype=np.uint8)
    arrays["digest"] = np.frombuffer(digest.encode(), dtype=np.uint8)
    if secret is not None:
        arrays["mac"] = np.frombuffer(secret.mac(MAC_DOMAIN, _mac_payload(key, digest)).encode(), dtype=np.uint8)
    try:
        if folder is None:
            with open_folder(entry.parent, create=True) as own:
                own.write(entry.name, lambda handle: np.savez(handle, **arrays))
        else:
            folder.write(entry.name, lambda handle: np.savez(handle, **arrays))
    except OSError:
        pass


def read_entry(entry: Path, key: str, folder: Folder | None = None) -> tuple[Corpus, list[tuple[str, str]]] | None:
    """The corpus and the loader's notes stored under ``key`` (read by the descriptor of ``folder`` when given);
    None when the entry is missing or damaged, or (with an integrity key configured) when its MAC is missing or
    wrong."""
    secret = integrity_key()  # a key set but unusable is exit 2, not a silently unauthenticated cache
    try:  # a link is never read (a rebuilt entry replaces it), nor a FIFO or device
        if folder is None:
            fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW | CLOEXEC)
        else:
            fd = folder.open(entry.name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:  # missing, a link, or a cache directory that cannot be looked in: skipped
        return None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        return None
    try:
        with BoundedNpz(handle, str(entry)) as z:
            arrays = {name: np.array(z[name]) for name in z.files}  # copies: writable, like a fresh load's
        stored_key = arrays.pop("key").tobytes().decode()
        stored_digest = arrays.pop("digest").tobytes().decode()
        mac = arrays.pop("mac", None)
        if stored_key != key or stored_digest != _digest(arrays):
            return None
    except Exception:  # noqa: BLE001 — a damaged entry of any kind is rebuilt, never trusted nor fatal
        return None
    if secret is not None:
        value = mac.tobytes().decode("ascii", "replace") if mac is not None and mac.dtype == np.uint8 else None
        if not secret.verifies(MAC_DOMAIN, _mac_payload(key, stored_digest), value):
            if value is not None:  # not merely an entry from before the key: forged, or made with another key
                warnings.warn(f"the corpus cache entry {entry} does not verify with the integrity key "
                              f"({secret.source}): it was forged or written with another key; it is discarded and "
                              "the corpus file read again", UserWarning, stacklevel=3)
            return None
    try:
        return _corpus(arrays)
    except Exception:  # noqa: BLE001 — as above
        return None


def _corpus(a: dict[str, np.ndarray]) -> tuple[Corpus, list[tuple[str, str]]] | None:
    n_docs, n_words = (int(v) for v in a["shape"])
    X = sp.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=(n_docs, n_words))
    X.indices, X.indptr = a["indices"], a["indptr"]  # the stored index types: the fingerprint hashes their bytes
    X.check_format(full_check=True)
    if not X.has_canonical_format or np.any(np.diff(X.indptr) == 0) or X.data.dtype != np.float64:
        return None
    check_counts(X, "cached corpus")
    vocabulary = np.asarray(_unstrings(a["vocabulary_bytes"], a["vocabulary_ends"]), dtype=str)
    if vocabulary.size != n_words or not np.array_equal(check_vocabulary(vocabulary, "cached corpus"), vocabulary):
        return None
    texts = _unstrings(a["texts_bytes"], a["texts_ends"]) if "texts_bytes" in a else None
    ids = _unstrings(a["doc_ids_bytes"], a["doc_ids_ends"]) if "doc_ids_bytes" in a else None
    doc_index = a["doc_index"]
    if doc_index.dtype != np.int64 or doc_index.shape != (n_docs,) or any(
            v is not None and len(v) != n_docs for v in (texts, ids)):
        return None
    notes = [(str(c), str(m)) for c, m in json.loads(_unstrings(a["notes_bytes"], a["notes_ends"])[0])]
    corpus = Corpus(X=X, vocabulary=vocabulary, texts=texts,
                    source=_unstrings(a["source_bytes"], a["source_ends"])[0], doc_index=doc_index,
                    n_dropped_empty=int(a["n_dropped_empty"]), doc_ids=ids)
    return corpus, notes
