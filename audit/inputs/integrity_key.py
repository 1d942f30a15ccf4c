"""The integrity key: a secret held outside every run directory and cache, which authenticates what they keep.

With a key, a run's ``manifest.json`` carries an HMAC-SHA256 over its list of
SHA-256 hashes, and each corpus cache entry one over its key and digest; a
manifest or entry without a valid MAC is refused (a run: exit 2) or rebuilt
(a cache entry). Without one, both are SHA-256 only, which stops accidental
damage but not a forger who recomputes the hashes
(docs/run-directory.md#integrity, docs/corpora.md#cache).

Where the key comes from, the first that is set:

1. ``TOPICAUDIT_INTEGRITY_KEY`` (the primary mechanism, e.g. a CI secret): its
   value is the key. ``off`` (or empty) means no key, and the key file is not read; blanks alone are refused
   (a CI secret that expanded to spaces was a silent "no key").
2. The key file ``$XDG_CONFIG_HOME/topicaudit/integrity.key`` (default
   ``~/.config/topicaudit/integrity.key``): a regular file (not a link) owned by
   the user and readable by no one else (``chmod 600``); its content, without
   surrounding whitespace, is the key.

A key is at least 32 characters (``python -c "import secrets;
print(secrets.token_hex(32))"``); a shorter one, an unreadable key file or one
others may read is exit 2 naming it, never silently no key.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from topicaudit.errors import UserError

ENVIRONMENT_VARIABLE = "TOPICAUDIT_INTEGRITY_KEY"
OFF = "off"
FILE_NAME = "integrity.key"
MIN_LENGTH = 32
MAX_BYTES = 4096
ALGORITHM = "hmac-sha256"
_HOW_TO_MAKE = "python3 -c \"import secrets; print(secrets.token_hex(32))\""


@dataclass(frozen=True)
class Key:
    secret: bytes = field(repr=False)
    source: str  # where it was read: the environment variable's name, or the key file's path

    @property
    def id(self) -> str:
        """A public name of the key (16 hex digits of a hash of it): which key a MAC was made with."""
        return hashlib.sha256(b"topicaudit.integrity-key-id/1\0" + self.secret).hexdigest()[:16]

    def mac(self, domain: str, payload: bytes) -> str:
        """HMAC-SHA256 of ``payload`` under this key, separated by ``domain`` (what the payload is)."""
        return hmac.new(self.secret, domain.encode() + b"\0" + payload, hashlib.sha256).hexdigest()

    def verifies(self, domain: str, payload: bytes, value: object) -> bool:
        return isinstance(value, str) and hmac.compare_digest(self.mac(domain, payload), value)

    @property
    def turn_off(self) -> str:
        """How to read without it (then only the hashes are checked)."""
        return f"`{ENVIRONMENT_VARIABLE}={OFF}`"


def key_file() -> Path:
    """Where the key file is. A relative XDG_CONFIG_HOME is ignored, as the XDG specification says: the key read
    would depend on the working directory (a checked-out repository's own `cfg/topicaudit/integrity.key`)."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    return (Path(base) if os.path.isabs(base) else Path.home() / ".config") / "topicaudit" / FILE_NAME


def integrity_key() -> Key | None:
    """The configured key, or None; a key that is set but unusable is a UserError naming where it is."""
    value = os.environ.get(ENVIRONMENT_VARIABLE)
    if value is not None:
        if value and not value.strip():  # a CI secret that expanded to blanks was a silent "no key"
            raise UserError(f"{ENVIRONMENT_VARIABLE} is set to {len(value)} blank character(s), which is no key: "
                            "set it to the key, or to off (or empty) for no key")
        value = value.strip()
        if value.lower() in (OFF, ""):
            return None
        return _key(value.encode("utf-8", "surrogateescape"), ENVIRONMENT_VARIABLE)
    try:
        path = key_file()
    except RuntimeError:  # no home directory to look in
        return None
    if not os.path.lexists(path):
        return None
    return _key(_read_key_file(path), str(path))


def _key(secret: bytes, source: str) -> Key:
    if len(secret) < MIN_LENGTH:
        long = "empty (or blank)" if not secret else f"{len(secret)} characters long"
        raise UserError(f"the integrity key in {source} is {long}; a key is at least "
                        f"{MIN_LENGTH} (make one with `{_HOW_TO_MAKE}`), or set {ENVIRONMENT_VARIABLE}={OFF} for "
                        "no key")
    return Key(secret, source)


def _read_key_file(path: Path) -> bytes:
    """The key file's content: a regular file of the user's that only the user can read, not a link."""
    fix = f"or set {ENVIRONMENT_VARIABLE}={OFF} for no key"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        what = "a symbolic link" if os.path.islink(path) else (error.strerror or str(error))
        raise UserError(f"cannot read the integrity key file {path}: {what}; make it a regular file readable by "
                        f"you alone (chmod 600), {fix}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # checked before fdopen, which refuses a directory with its own error
        os.close(fd)
        raise UserError(f"the integrity key file {path} is not a regular file; {fix}")
    with os.fdopen(fd, "rb") as handle:
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise UserError(f"the integrity key file {path} belongs to another user (uid {info.st_uid}); a key "
                            f"must be yours alone — make your own, {fix}")
        if info.st_mode & 0o077:
            raise UserError(f"the integrity key file {path} may be read or written by others (mode "
                            f"{stat.S_IMODE(info.st_mode):o}); run `chmod 600 {path}`, {fix}")
        if info.st_size > MAX_BYTES:
            raise UserError(f"the integrity key file {path} is larger than {MAX_BYTES} bytes, which no key is; {fix}")
        return handle.read(MAX_BYTES + 1).strip()
