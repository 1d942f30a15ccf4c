"""One module per ``topicaudit`` subcommand.

Each module defines ``register(subparsers)``, which adds its parser, and
``execute(args) -> int``, which runs it and returns the exit code. User errors
are raised as ``topicaudit.errors.UserError``; ``topicaudit.cli.main`` turns them into one
message and exit code 2.
"""
