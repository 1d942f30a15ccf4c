"""The one exception type for mistakes a user can fix."""


class UserError(Exception):
    """Bad input or configuration: the CLI prints the message and exits non-zero.

    Messages say what is wrong, where (file, line, field) and how to fix it.
    """
