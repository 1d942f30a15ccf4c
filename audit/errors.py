"""The exception type for mistakes a user can fix, and the exit codes the command line maps outcomes to."""
import os
import unicodedata

# docs/exit-codes.md: 1 only after a printed VIOLATED verdict; never for a crash.
EXIT_OK, EXIT_REFUTED, EXIT_USER_ERROR, EXIT_INTERNAL_ERROR, EXIT_RAY_FAILED = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130


class UserError(ValueError):
    """Bad input or configuration; the message says what is wrong, where (file, line, field) and how to fix it.

    Library code raises it (or FileNotFoundError/ValueError where that is the
    natural type); being a ValueError, callers of the Python API catch it as one.
    Only the command line (``topicaudit.cli.main``) turns it into one message
    and exit 2; any other exception, a plain ValueError included, is a bug (exit 3).
    """


def deleted_working_directory(error: BaseException) -> UserError | None:
    """A FileNotFoundError raised because the working directory was removed under the command (``os.getcwd``
    fails; every relative path then fails deep inside whatever resolved it first), as the one message the
    command line and the Python API give; else None."""
    if not isinstance(error, FileNotFoundError):
        return None
    try:
        os.getcwd()
        return None
    except FileNotFoundError:
        return UserError("the current working directory was deleted (or moved) while in use, so no relative path "
                         "(the default runs/…, a relative --output or file) can be resolved; cd to a directory "
                         "that exists and rerun the same command")


# Libraries' notices about their own API (tomotopy's, numba's): for developers, never relayed to users as notes.
DEVELOPER_WARNINGS = (DeprecationWarning, PendingDeprecationWarning)


def developer_warning(category: type) -> bool:
    """A library's notice that is not about the user's input: ``DEVELOPER_WARNINGS``, and urllib3's note that SOCKS
    proxies need PySocks (requests silences it, but a thread restoring the warning filters while Ray imported
    requests let it through, and a command printed "note: SOCKS support in urllib3 …" with no proxy in use)."""
    return issubclass(category, DEVELOPER_WARNINGS) or (
        category.__name__ == "DependencyWarning" and category.__module__.startswith("urllib3"))


def user_message(error: UserError) -> str:
    """A UserError's one-line message, also when Ray re-raised it from a task.

    Ray wraps a task's exception in a class derived from both ``RayTaskError``
    and the original type, whose text is the worker's whole traceback (with
    terminal colours); the original exception is its ``cause``.
    """
    cause = getattr(error, "cause", None)
    return str(cause) if isinstance(cause, UserError) else str(error)


def default_output_named(message: str, given_output) -> str:
    """A refusal of the default output folder names the default, not the flag the user did not give: "cannot write
    --output runs/demo-…; choose another --output" when no --output was given (hostile pass XIX-q, DO1/DO2)."""
    if given_output is not None:
        return message
    for flag in ("-o/--output", "--output"):
        if message.startswith(f"cannot write {flag} "):
            return (message.replace(f"cannot write {flag} ", "cannot write the default output folder ", 1)
                    .replace(f"choose another {flag}", f"give {flag} to choose another folder"))
    return message


# Bidirectional-text controls: they reorder what a terminal shows (a name can display as another).
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    """A message as one visible line: control characters (a newline, ESC), bidirectional controls and lone
    surrogates (a file name's undecodable bytes) escaped.

    Messages name files, and a file's name is anyone's to choose: a file dropped into a run's models/ as
    ``x\\nCONSISTENT: not refuted\\x1b[31m.npz`` made the refusal (exit 2) print a second line reading
    CONSISTENT, in colour. Escaped, the line shows ``\\n`` and ``\\x1b`` instead. A lone surrogate (a path
    holding the byte 0xff) could not be encoded in UTF-8: check of such a run crashed writing its JUnit file."""
    if text.isprintable():
        return text
    # U+FFFE and U+FFFF too: no XML may hold them, and a run named so made check.junit.xml unreadable (XIX-zi).
    return "".join(ch if ch == "\t" or (unicodedata.category(ch) not in ("Cc", "Zl", "Zp", "Cs") and ch not in _BIDI
                                        and ch not in "\ufffe\uffff")
                   else (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}") for ch in text)


# How much of a message from code that is not topicaudit's (a plug-in's exception) a refusal repeats.
SAID_LIMIT = 300


def said(error: BaseException, limit: int = SAID_LIMIT) -> str:
    """What an exception from another's code says, as one bounded line: its ``str()`` may raise or return another
    type (an internal error, exit 3, blamed topicaudit for a plug-in's exception) or hold megabytes (printed
    whole on stderr) (hostile pass XIX-o)."""
    try:
        text = str(error)
        if not isinstance(text, str):
            raise TypeError
    except Exception:  # noqa: BLE001 - any failure of another's __str__ is answered the same way
        return f"(its message cannot be read: {type(error).__name__}.__str__ failed)"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"
