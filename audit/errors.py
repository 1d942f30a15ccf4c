"""The exception type for mistakes a user can fix, and the exit codes the command line maps outcomes to."""

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


# Libraries' notices about their own API (tomotopy's, numba's): for developers, never relayed to users as notes.
DEVELOPER_WARNINGS = (DeprecationWarning, PendingDeprecationWarning)


def user_message(error: UserError) -> str:
    """A UserError's one-line message, also when Ray re-raised it from a task.

    Ray wraps a task's exception in a class derived from both ``RayTaskError``
    and the original type, whose text is the worker's whole traceback (with
    terminal colours); the original exception is its ``cause``.
    """
    cause = getattr(error, "cause", None)
    return str(cause) if isinstance(cause, UserError) else str(error)
