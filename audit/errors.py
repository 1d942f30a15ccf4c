"""The exception type for mistakes a user can fix, and the exit codes the command line maps outcomes to."""

# docs/exit-codes.md: 1 only after a printed VIOLATED verdict; never for a crash.
EXIT_OK, EXIT_REFUTED, EXIT_USER_ERROR, EXIT_INTERNAL_ERROR, EXIT_RAY_FAILED = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """Bad input or configuration: the CLI prints the message and exits non-zero.

    Messages say what is wrong, where (file, line, field) and how to fix it.
    """
