"""Checks that need no computation, run before Ray starts or any file is written.

Bad input must cost milliseconds and leave nothing behind: a seed NumPy cannot
store, an output directory that cannot be written, or an audit whose arrays
would not fit in memory is refused here with one message naming the flag or key.
"""
from __future__ import annotations

import errno
import numbers
import os
import unicodedata
import warnings
from pathlib import Path

from topicaudit.engine.storage.durable_write import refuse_append_only, too_many_open_files
from topicaudit.errors import UserError
from topicaudit.memory import check_fits_in_memory
from topicaudit.owned_folders import PlantedLink, open_folder, refuse_planted_link
from topicaudit.targets.params import MAX_TOPICS


# The plan stores the seed as int64 (plan.npz, results.json), so seeds live in [0, 2**63).
MAX_SEED = 2**63 - 1


def check_seed(seed, where: str) -> int:
    """The seed as an int in [0, 2**63 − 1]; ``where`` names the flag or key (e.g. ``--seed``)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UserError(f"{where} must be an integer in [0, 2**63 − 1] (got {seed!r})")
    if not 0 <= seed <= MAX_SEED:
        raise UserError(f"{where} must be an integer in [0, 2**63 − 1] = [0, {MAX_SEED}] (got {seed})")
    return seed


# Sane upper bounds on sizes (docs/configuration.md#limits), far above any audit the tool can finish: refused
# with one message before any work. Topics and iterations: topicaudit.targets.params (MAX_TOPICS, MAX_ITERATIONS).
MAX_SHADOWS = 4096            # shadow models: LiRA needs 64–256 (docs/attacks.md)
MAX_CANARIES = 2_000_000      # canary documents: `--canaries auto` stops at 1,000,000 × its 2× margin
MAX_CANARY_LENGTH = 100_000   # tokens of one canary document
MAX_WORDS = 10_000_000        # [corpus] max_words and [synthetic] n_words: a vocabulary size
MAX_DOCUMENTS = 10_000_000    # [synthetic] n_docs
MAX_MEAN_LENGTH = 100_000     # [synthetic] mean_length, tokens per document
MAX_NUM_CPUS = 4096           # [ray] num_cpus: a local instance's size (no more tasks than shadows run at once)


def check_at_most(value, maximum: int, where: str, why: str) -> None:
    """One sane upper bound (``MAX_…``): a value above it is refused naming the key or flag and why."""
    if value > maximum:
        raise UserError(f"{where} must be at most {maximum:,} (got {value!r}): {why}")


# A run's name is one directory's name (runs/NAME-…, at most 255 bytes with what is appended) and a figure's title.
MAX_NAME_BYTES = 100


def _noncharacter(c: str) -> bool:
    """Unicode's noncharacters (U+FDD0–U+FDEF and the last two code points of every plane), never text."""
    point = ord(c)
    return 0xFDD0 <= point <= 0xFDEF or point & 0xFFFE == 0xFFFE


def check_name(name) -> None:
    """The run's name (``name``, ``--name``): one directory name of at most MAX_NAME_BYTES, within runs/.

    "../../x" or "/tmp/x" put the run directory outside runs/ (--output is the way to choose where it
    goes), and a 300 MB name was fitted for minutes before matplotlib failed on the title (exit 3).
    """
    if name is None:
        return
    if not isinstance(name, str):
        raise UserError(f"name (--name) must be a string (got {type(name).__name__})")
    shown = repr(name) if len(name) <= 60 else repr(name[:57]) + "…"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise UserError(f"name (--name) is {len(name.encode('utf-8', 'surrogatepass'))} bytes long ({shown}); a run "
                        f"name must be at most {MAX_NAME_BYTES} bytes (UTF-8): give a shorter one")
    if name != name.strip():  # " " or "lda " made a run directory whose name hides its blanks
        raise UserError(f"name (--name) {shown} begins or ends with a blank; a run name may not: give it without "
                        f"them (e.g. {name.strip() or 'lda-pheme'!r})")
    if name in ("", ".", "..") or any(sep in name for sep in ("/", os.sep, os.altsep) if sep) or \
            any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") or _noncharacter(c) for c in name):
        # controls, bidi marks, lone surrogates (no file system name) and noncharacters (hostile pass XIX-zi, N9)
        raise UserError(f"name (--name) {shown} is not a plain name: a run name may not be empty, \".\" or \"..\", nor "
                        "contain a path separator, a control character, an invisible format character (bidi marks) "
                        "or a noncharacter; give a plain name (e.g. \"lda-pheme\"), "
                        "and choose where the run directory goes with --output (or output)")


def check_shadows(n, where: str, minimum: int = 2, allowed: str = "") -> int:
    """An even number of shadow models ≥ ``minimum``; ``where`` names the key or flag, ``allowed`` adds when 0 is fine.

    Shadows come in complementary pairs so every document is IN exactly half of them.
    """
    if isinstance(n, numbers.Integral) and not isinstance(n, bool):
        n = int(n)  # a numpy integer from the API (np.int64(4) was refused as "not an even number")
    if isinstance(n, bool) or not isinstance(n, int) or n < minimum or n % 2:
        raise UserError(f"{where} must be an even number ≥ {minimum} (got {n!r}): shadow models come in "
                        f"complementary pairs so every document is IN exactly half of them{allowed}")
    check_at_most(n, MAX_SHADOWS, where, "each shadow is a model fitted, and LiRA's bounds need 64 to 256 of "
                  "them (docs/attacks.md)")
    return n


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


NAME_MAX, PATH_MAX = 255, 4096  # bytes: a name in a path, and a whole path (Linux; most file systems)


def check_path_text(path, flag: str) -> None:
    """A path the operating system can take: no NUL character (`output = "a\\u0000b"` was ValueError, exit 3), no
    name longer than NAME_MAX bytes and no path longer than PATH_MAX (ENAMETOOLONG, exit 3)."""
    text = os.fspath(path)
    shown = text if len(text) <= 80 else text[:77] + "..."
    if "\0" in text:
        raise UserError(f"{flag} {shown!r} contains a NUL character, which no file name may; give another path")
    encoded = os.fsencode(text)
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > NAME_MAX or len(encoded) > PATH_MAX:
        what = (f"a name in it is {longest} bytes long (at most {NAME_MAX})" if longest > NAME_MAX else
                f"it is {len(encoded)} bytes long (at most {PATH_MAX})")
        raise UserError(f"{flag} {shown}: {what}; give a shorter path")


def check_output_directory(path, flag: str) -> Path:
    """Refuse an output directory that cannot be created and written, before any work starts.

    Tries what the run will do: the nearest existing ancestor must be a
    directory where a file can be created (a probe file, removed at once).
    Nothing is created on the way down.
    """
    if path is None or str(path).strip() == "":
        raise UserError(f"{flag} is empty; give a directory path, or leave {flag} out for the default")
    check_path_text(path, flag)
    _refuse_planted(path, path, flag)
    path = Path(path)
    existing = _nearest_existing(path.absolute())
    if not existing.is_dir():
        what = "is not a directory" if existing == path.absolute() else f"is a file, so {path} cannot be created"
        raise UserError(f"cannot write {flag} {path}: {existing} {what}; choose another {flag}")
    _probe(existing, f"{flag} {path}")
    return path


def check_output_file(path, flag: str) -> Path:
    """Refuse a file that cannot be written (missing directory, read-only place, /proc)."""
    if path is None or str(path).strip() == "":
        raise UserError(f"{flag} is empty; give a file path")
    check_path_text(path, flag)
    _refuse_planted(Path(path).parent, path, flag)
    path = Path(path)
    if path.is_symlink():
        # The file is replaced atomically (a rename), which would replace the link, not write its target.
        raise UserError(f"cannot write {flag} {path}: it is a symbolic link (to {os.readlink(path)}), and "
                        "topicaudit never writes through one; give the file's own path, or another path")
    if path.is_dir():
        raise UserError(f"cannot write {flag} {path}: it is a directory; give a file path")
    if os.path.lexists(path) and not path.is_file():
        # The file is replaced by a rename: a FIFO or a device (`--junit /dev/null` as root) would be replaced.
        raise UserError(f"cannot write {flag} {path}: it is a FIFO, socket or device, not a regular file, and "
                        "topicaudit writes its files by replacing them; give the path of a regular file")
    if not path.parent.is_dir():
        what = "is a file, not a directory" if os.path.lexists(path.parent) else "does not exist"
        raise UserError(f"cannot write {flag} {path}: {path.parent} {what}; give a path in an existing directory")
    _probe(path.parent, f"{flag} {path}")
    return path


def _refuse_planted(way, path, flag: str) -> None:
    """Another user's link in a shared sticky folder on the way (``way``) to an output: refused before any work
    starts."""
    try:
        refuse_planted_link(way)
    except PlantedLink as error:
        raise UserError(f"cannot write {flag} {path}: {error.reason}") from None


def _probe(directory: Path, what: str) -> None:
    """Make and remove a file in ``directory``, by its descriptor (``topicaudit.owned_folders``: below an anchor,
    or in the run directory the writer lock holds, never through a link: the probe was made by path in the
    user's folder a cache's runs/ swapped for a link named), and put back the folder's times."""
    try:
        with open_folder(directory) as folder:
            refuse_append_only(folder, what)
            before = os.fstat(folder.fd) if folder.fd is not None else os.stat(directory)
            name, handle = folder.stage("topicaudit-probe")
            handle.close()
            folder.unlink(name)
            try:  # the folder as it was found: a command refused afterwards left a new mtime
                os.utime(folder.fd if folder.fd is not None else directory,
                         ns=(before.st_atime_ns, before.st_mtime_ns))
            except OSError:
                pass  # (a folder of another owner, writable to all: /tmp)
    except OSError as error:
        if too_many_open_files(error, what):
            raise too_many_open_files(error, what) from None
        reason = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
                  errno.EPERM: "operation not permitted", errno.ENOSPC: "no space left on device"}.get(
            error.errno, error.strerror or str(error))
        raise UserError(f"cannot write {what}: {directory} is not writable ({reason}); choose another place") \
            from None


def check_run_config(config) -> None:
    """What either command can refuse from the configuration alone, for
    ``topicaudit.engine.configuration.config_checks.validate``: the seed, the output directory, and a run's
    [synthetic] corpus."""
    check_seed(config.seed, "seed (--seed)")
    check_name(config.name)
    if config.output is not None and str(config.output).strip() == "":
        raise UserError("output (--output) is empty; give a run directory, or leave it out for a directory named after the audit")
    check_output_directory(config.run_dir, "--output")
    if config.corpus.path is None and hasattr(config, "synthetic"):
        check_synthetic(config.synthetic)


def check_synthetic(s) -> None:
    """The [synthetic] table: sizes in range and within memory (its corpus is drawn in the driver)."""
    for key, low in (("n_docs", 4), ("n_words", 2), ("k", 1)):
        value = getattr(s, key)
        if value < low:
            raise UserError(f"[synthetic] {key} must be an integer ≥ {low} (got {value})")
    for key, high in (("n_docs", MAX_DOCUMENTS), ("n_words", MAX_WORDS), ("k", MAX_TOPICS),
                      ("mean_length", MAX_MEAN_LENGTH)):
        check_at_most(getattr(s, key), high, f"[synthetic] {key}", "a synthetic corpus is for trying the tool; "
                      "audit a corpus file for more")
    for key in ("mean_length", "topic_concentration", "doc_concentration"):
        value = getattr(s, key)
        if not value > 0:
            raise UserError(f"[synthetic] {key} must be a finite number > 0 (got {value})")
    # topics k × n_words and mixtures n_docs × k (float64), tokens as sparse entries (~16 B each)
    nbytes = 8.0 * s.k * s.n_words + 8.0 * s.n_docs * s.k + 16.0 * s.n_docs * (s.mean_length + 3)
    check_fits_in_memory(nbytes, f"the [synthetic] corpus (n_docs={s.n_docs}, n_words={s.n_words}, "
                                 f"k={s.k}, mean_length={s.mean_length:g})",
                         "lower [synthetic] n_docs, n_words or mean_length")


def warn_more_topics_than_words(k: int, n_words: int, flag: str) -> None:
    """k above the vocabulary size leaves topics with nothing of their own to learn: say so."""
    if k > n_words:
        warnings.warn(f"{flag} {k} topics for a vocabulary of {n_words} words: at most {n_words} topics can "
                      "differ; the audit runs, but consider a smaller k", UserWarning, stacklevel=2)
