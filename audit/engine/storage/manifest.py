"""The run directory's manifest: a SHA-256 of every file a verdict or a resumed run reads.

``manifest.json`` is updated as each file is written (the plan, every model,
the scores, results.json); ``check``, ``report`` and a resumed run compare the
files with it, and a mismatch is an error naming the file. It detects
corruption and accidental edits (a file copied over another, an array
re-saved), and a forger who does not recompute hashes; not one who rewrites
the manifest too — unless an integrity key is configured
(``topicaudit.inputs.integrity_key``): then the manifest also carries an
HMAC-SHA256 of its list (``mac``), and one whose MAC is missing or wrong is
refused, so a forger without the key is caught whatever they rewrite
(docs/run-directory.md#integrity).

A run written by a version that writes manifests says so in its own files
(``MARK`` in results.json and in config.toml's [provenance]; the ``model`` slot
of every model file), so a manifest deleted, emptied or missing an entry is
refused rather than read as no manifest (``topicaudit.engine.storage.integrity``).
Only a directory with none of those marks, the layout written before the
manifest existed, is read without one, and its verdict says so.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from topicaudit.errors import UserError
from topicaudit.inputs import files as files_once
from topicaudit.inputs.files import file_sha256
from topicaudit.inputs.integrity_key import ALGORITHM, integrity_key

NAME = "manifest.json"
SCHEMA = "topicaudit.manifest/1"
MARK = "manifest"  # results.json's key and [provenance]'s: this run keeps a manifest (value: SCHEMA)
MAC_DOMAIN = "topicaudit.manifest-mac/1"  # what an integrity key's MAC over a manifest is a MAC of
# What ``check`` writes into the run directory it read, listed once written (``engine.check.record_check_files``):
# ``report`` reads check.json's claim. Records of a question asked of the run, not evidence the verdict rests on.
CHECK_FILES = ("check.json", "check.junit.xml")
# Every name a run, sweep or audit directory holds that a later command reads (the evidence, the manifest, the
# records of check, the lock, the sweep's index, models/): no output of another command is ever made there.
READ_NAMES = frozenset({"config.toml", "results.json", "plan.npz", "scores.npz", "statistics.npz", "canaries.npz",
                        "canary_scores.npz", NAME, *CHECK_FILES, ".lock", "roc.png", "sweep.json", "models",
                        "audit.json", "scores.csv", "exposure.npz"})
_READ_NAMES_FOLDED = frozenset(name.casefold() for name in READ_NAMES)
MAX_BYTES = 64 * 2**20  # far above any manifest (~100 bytes per file); a larger one is not one topicaudit wrote

fcntl: Any
try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the manifest's updates are then unlocked
    fcntl = None




@dataclass(frozen=True)
class Manifest:
    """A manifest as read: its files' hashes and how far they can be trusted.

    authenticated: its MAC verified with the configured integrity key (``key_id``: that key's id);
    carries_mac: it holds a MAC (when no key is configured, one that could not be checked).
    """

    files: dict[str, str]
    authenticated: bool = False
    key_id: str | None = None
    carries_mac: bool = False


def payload(files: dict[str, str]) -> bytes:
    """The manifest's canonical content, which its MAC covers: the schema, the algorithm and every entry."""
    return json.dumps({"schema": SCHEMA, "algorithm": "sha256", "files": files}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True).encode()


def read(run_dir: Path) -> Manifest | None:
    """The run directory's manifest, None when there is none; a UserError when it is damaged, or when an integrity
    key is configured and its MAC is missing or does not verify."""
    path = Path(run_dir) / NAME
    if not files_once.present(path):
        return None
    try:
        data = json.loads(files_once.once(path, lambda: _read_regular(path)).decode("utf-8"))
    except UserError:  # a link, a FIFO, too large: its own message (it was "unreadable (UserError)")
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise UserError(f"{path} is unreadable ({type(error).__name__}): the run directory was damaged, so none "
                        f"of its files can be verified; {RERUN}") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise UserError(f"{path} is not a topicaudit manifest, so none of the run's files can be verified; {RERUN}")
    if data.get("schema") != SCHEMA or data.get("algorithm") != "sha256":  # the MAC covers the ones written (XIX-zs N2)
        raise UserError(f"{path} says schema {data.get('schema')!r:.60} and algorithm {data.get('algorithm')!r:.40}, "
                        f"not the {SCHEMA!r} and 'sha256' topicaudit writes: the manifest was edited, so none of the "
                        f"run's files can be verified; {RERUN}")
    strange = next((name for name, digest in files.items() if not _entry_ok(name, digest)), None)
    if strange is not None:  # "/dev/zero", "../other/results.json", "" were listed, and ignored without a word
        raise UserError(f"{path} lists {strange!r:.120} with {files[strange]!r:.80}, which is no file of a run directory "
                        f"with its SHA-256 (a relative path inside it, 64 hex digits): the manifest was edited, so "
                        f"none of the run's files can be verified; {RERUN}")
    mac = data.get("mac")
    key = integrity_key()
    if key is None:
        return Manifest(files, carries_mac=mac is not None)
    if not isinstance(mac, dict) or mac.get("algorithm") != ALGORITHM or not isinstance(mac.get("value"), str):
        raise UserError(f"{path} carries no MAC, but an integrity key is configured ({key.source}): the run was "
                        "written without a key, or someone rewrote its manifest, so its files cannot be "
                        f"authenticated; {RERUN} with the key configured, or set {key.turn_off} to verify its "
                        "hashes alone")
    if not key.verifies(MAC_DOMAIN, payload(files), mac["value"]):
        other = mac.get("key_id")
        made = (f" (it names the key {other!s:.16}, yours is {key.id})" if isinstance(other, str) and other != key.id
                else "")
        raise UserError(f"{path}'s MAC does not verify with the integrity key ({key.source}){made}: the manifest "
                        "was rewritten by someone without the key, or written with another key, so none of the "
                        f"run's files can be trusted; {RERUN}, or configure the key it was written with (a run "
                        "cache's entry: remove it, and the next check refits it)")
    return Manifest(files, authenticated=True, key_id=key.id, carries_mac=True)


_HEX = frozenset("0123456789abcdef")


def _entry_ok(name: str, digest: str) -> bool:
    """An entry topicaudit writes: a '/'-separated path inside the directory, and a SHA-256 in hex."""
    parts = name.split("/")
    return (len(digest) == 64 and set(digest) <= _HEX and bool(name) and "\\" not in name and "\0" not in name
            and all(part not in ("", ".", "..") for part in parts))


def entries(run_dir: Path) -> dict[str, str] | None:
    """File (relative to the run directory, '/'-separated) → SHA-256; None when there is no manifest.

    With an integrity key configured, only a manifest whose MAC verifies is read (``read``)."""
    found = read(run_dir)
    return None if found is None else found.files


RERUN = "rerun the audit into a new directory (--output)"


def refuse_over_read_names(output: Path, directories, flag: str) -> None:
    """Refuse an output that is, or is inside, one of READ_NAMES of one of ``directories`` (default: each
    topicaudit directory above ``output``): a report folder or a run made at RUN/models/target.npz or
    RUN/scores.npz (canary-only runs have none) got RUN refused as edited by every later check, report and
    resume ("not listed in manifest.json")."""
    try:
        target = Path(output).resolve()
    except (RuntimeError, OSError) as error:  # a link loop on the way (Python < 3.13: RuntimeError), was exit 3
        if isinstance(error, OSError) and error.errno != errno.ELOOP:
            raise  # not a loop: a deleted working directory, say, which the command line names as such
        raise UserError(f"cannot write {flag} {output}: a symbolic link on that path leads back to itself (a "
                        f"loop), so it names no folder; remove the loop, or choose another {flag}") from None
    if directories is None:
        directories = topicaudit_directories(target)
    for directory in directories:
        root = Path(directory).resolve()
        first = target.relative_to(root).parts[0] if target != root and target.is_relative_to(root) else None
        # RUN/Results.json is results.json on macOS and Windows; RUN/models linked to M: M/x is RUN's too (XIX-zs)
        if first is not None and first.casefold() not in _READ_NAMES_FOLDED:
            first = None
        first = first or linked_read_name(Path(directory), target)
        if first is not None:
            raise UserError(f"cannot write {flag} {output}: it is {first} of {directory}, which a check, report "
                            "or resume reads; give a path outside that directory's own files")


def linked_read_name(directory: Path, target: Path, allowed: str | None = None) -> str | None:
    """The one of READ_NAMES (but ``allowed``) of ``directory`` that ``target`` is, or is inside, by another name,
    None if none: a models/ or config.toml kept elsewhere and linked back, or a models/ mounted at another place, is
    still the directory's own, and `check --json` there replaced a model (hostile pass XIX-zs)."""
    above = [folder for folder in Path(target).parents if os.path.isdir(folder)]
    for name in sorted(READ_NAMES - {allowed}):
        place = directory / name
        try:
            resolved = place.resolve() if os.path.islink(place) else None
            folder = os.stat(place) if os.path.isdir(place) else None
        except (RuntimeError, OSError):  # a loop, or gone: it leads nowhere, so nothing is written through it
            continue
        if resolved is not None and (target == resolved or target.is_relative_to(resolved)):
            return name
        if folder is not None and any(os.path.samestat(folder, os.stat(up)) for up in above):
            return name
    return None


# Files whose topicaudit schema marks a directory as topicaudit's: a run's, an audit's, a sweep's.
MARKED = (NAME, "results.json", "audit.json", "sweep.json")
_SCHEMA_MARK = re.compile(rb'"schema":\s*"topicaudit\.')
_MARK_BYTES = 2**20


def topicaudit_directories(path: Path) -> list[Path]:
    """The directories above ``path`` that a topicaudit command wrote, nearest first: a run, sweep or audit
    directory holds a manifest.json or sweep.json (whatever it now holds: a damaged one still names a run or
    sweep), or one of MARKED there carries a topicaudit schema in its first MiB."""
    return [parent for parent in Path(path).absolute().parents
            if any(os.path.lexists(parent / name) for name in (NAME, "sweep.json"))
            or any(_marked(parent / name) for name in MARKED)]


def _marked(path: Path) -> bool:
    """A regular file (not followed through a link, never blocking on a FIFO) naming a topicaudit schema."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and bool(_SCHEMA_MARK.search(os.read(fd, _MARK_BYTES)))
    except OSError:
        return False
    finally:
        os.close(fd)


def _read_regular(path: Path) -> bytes:
    """The manifest's bytes: a regular file, opened without following a link or blocking on a FIFO, bounded."""
    if os.path.islink(path):
        raise UserError(f"{path} is a symbolic link, not the manifest the run wrote; {RERUN}")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which refuses a directory with an error of its own
        os.close(fd)
        raise UserError(f"{path} is not a regular file (a device, FIFO or directory); the run directory was "
                        f"altered — {RERUN}")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > MAX_BYTES:
            raise UserError(f"{path} is larger than {MAX_BYTES // 2**20} MiB, which no manifest topicaudit writes "
                            f"is; {RERUN}")
        return handle.read(info.st_size + 1)  # not MAX_BYTES + 1: a read allocates its size first (64 MiB)


LOCK_SECONDS = 30.0  # a manifest update holds the lock for milliseconds; a check, for two writes and one update
_IN_PROCESS = threading.RLock()  # this process's threads, one at a time (flock does not tell them apart)
_HELD: dict[str, int] = {}  # directory → depth of directory_lock blocks this process is inside


@contextmanager
def directory_lock(run_dir: Path, seconds: float = LOCK_SECONDS):
    """Hold an OS lock on the directory itself (``flock`` on its descriptor: no file is added) for the block:
    every read-modify-write of its manifest takes it, the run's own (``record``) and ``check``'s. A check
    listing check.json while a run (a resume) listed a new model read the manifest before the other's
    write and wrote it after: one update was lost, and the run's model was then refused as unlisted.
    Re-entrant within the process; held elsewhere for over ``seconds``, a UserError."""
    run_dir = Path(run_dir)
    where = os.path.realpath(run_dir)
    with _IN_PROCESS:
        if _HELD.get(where) or fcntl is None:
            _HELD[where] = _HELD.get(where, 0) + 1
            try:
                yield
            finally:
                _HELD[where] -= 1
            return
        try:
            fd = os.open(run_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # the directory cannot be opened (missing: the writer says so itself): unlocked
            yield
            return
        try:
            deadline = time.monotonic() + seconds
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise UserError(f"{run_dir} is locked by another process (flock on the directory) for over "
                                        f"{seconds:.0f} s, so its manifest cannot be updated; rerun the same "
                                        "command once that process has finished") from None
                    time.sleep(0.02)
                except OSError:  # a file system without flock on directories (some network mounts): unlocked
                    break
            _HELD[where] = 1
            try:
                yield
            finally:
                _HELD.pop(where, None)
        finally:
            os.close(fd)  # releases the lock


def record(run_dir: Path, *names: str, write_text, written: Mapping[str, str] | None = None) -> None:
    """Add (or update) the hashes of ``names``, files just written in ``run_dir``; a missing one is dropped.

    written: name → SHA-256 of the bytes this process wrote there (what ``durable_write``'s writers return),
    listed as given: hashing the file on disk after the rename listed, and with a key MAC'd, whatever a forger
    renamed over it in that moment. A name not in it (a file written by another command, or a test's) is hashed
    from disk. write_text: the atomic writer of the run directory (``durable_write.atomic_write_text``). The
    read, the update and the write happen under ``directory_lock``: a concurrent ``check`` (or another writer)
    never loses them.
    """
    run_dir = Path(run_dir)
    key = integrity_key()  # a key set but unusable is exit 2 before the manifest is touched
    with directory_lock(run_dir):
        _record(run_dir, names, dict(written or {}), key, write_text)


def listed_digest(path: Path, written: str | None) -> str | None:
    """The hash a manifest update lists for ``path``: ``written`` (what this process wrote) when given, else the
    file's on disk; None when there is no file."""
    if written is not None:
        return written
    return file_sha256(path) if path.is_file() else None


def _record(run_dir: Path, names, written: dict[str, str], key, write_text) -> None:
    try:
        files = entries(run_dir) or {}
    except UserError:
        # A damaged manifest (or, with a key, one whose MAC fails) is rebuilt from the files it is told about:
        # nothing it listed is carried over, so every other file is unlisted and refused or refitted.
        files = {}
    for name in names:
        digest = listed_digest(run_dir / name, written.get(name))
        if digest is not None:
            files[name] = digest
        else:
            files.pop(name, None)
    content: dict = {"schema": SCHEMA, "algorithm": "sha256", "files": files}
    if key is not None:
        content["mac"] = {"algorithm": ALGORITHM, "key_id": key.id, "value": key.mac(MAC_DOMAIN, payload(files))}
    text = json.dumps(content, indent=1, sort_keys=True) + "\n"
    try:
        if _read_regular(run_dir / NAME) == text.encode("utf-8"):
            return  # unchanged: not rewritten, so a refused resume leaves the directory's times as they were
    except (UserError, OSError):
        pass  # missing or unreadable: written
    write_text(run_dir / NAME, text)


def verify(run_dir: Path, names: list[str] | None = None) -> None:
    """Each of ``names`` (default: every file the manifest lists) that exists must have its recorded hash.

    A file the manifest lists that is missing is left to the reader (which says
    how to recreate it); a file the manifest does not list is not checked.
    """
    run_dir = Path(run_dir)
    files = entries(run_dir)
    if files is None:
        return
    for name in (names if names is not None else sorted(files)):
        path = run_dir / name
        if name not in files:
            continue
        if files_once.reading_once():  # the hash of the bytes every later read of the block gets
            if not files_once.present(path):
                continue
            try:
                digest = file_sha256(path)  # a FIFO, device or directory is refused by its one read
            except FileNotFoundError:  # a dangling link: missing for the rest of the block too
                continue
            except OSError as error:
                raise UserError(f"cannot read {path}: {error.strerror or error}") from None
        else:
            if not path.exists():
                continue
            if not path.is_file():
                raise UserError(f"{path} is not a regular file; the run directory was altered — rerun the audit "
                                "into a new directory")
            digest = file_sha256(path)
        if digest != files[name]:
            raise UserError(
                f"{path} is not the file this run wrote (its SHA-256 differs from {run_dir / NAME}): it was edited, "
                "replaced or damaged, so no result is read from it; restore it, or rerun the audit into a new "
                "directory"
            )
