"""``python -m topicaudit``: the ``topicaudit`` command without its shell launcher (docs/exit-codes.md).

There was no such module: Python said "No module named topicaudit.__main__" and exited 1, the code of a refuted
claim, for every command run this way, though the documentation names it. It runs the console script's entry, so
its exit codes are the supervised command's; only an interpreter that cannot start is not caught (no launcher).
"""
from topicaudit.cli.console import main

if __name__ == "__main__":
    raise SystemExit(main())
