"""The ``topicaudit`` command line.

Each subcommand lives in ``audit/commands/<name>.py``. Exit codes: 0 success,
1 a privacy claim refuted (``check``), 2 bad input or configuration (one
message, no traceback), 130 interrupted (rerun the same command to resume).
"""
from __future__ import annotations

import argparse
import importlib
import sys
import warnings

from audit.errors import UserError

# subcommand → module under audit.commands, in the order ``--help`` lists them
COMMANDS = ("run", "check", "sweep", "audit", "report")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="topicaudit",
        description="Measure how much a released topic model reveals about its training documents.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"audit.commands.{name}").register(commands)
    return parser


def _show_note(message, category, filename, lineno, file=None, line=None):
    print(f"topicaudit: note: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    warnings.showwarning = _show_note  # loaders warn about tolerated oddities in input files
    try:
        return importlib.import_module(f"audit.commands.{args.command}").execute(args)
    except UserError as error:
        print(f"topicaudit: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ntopicaudit: interrupted; finished models are kept — rerun the same command to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
