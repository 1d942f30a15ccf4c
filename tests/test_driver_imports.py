"""The driver imports what its command needs: ``topicaudit run`` does not import the other subcommands (nor the
report pages behind ``report``); ``--help`` and a mistyped command still see every subcommand."""
from __future__ import annotations

import subprocess
import sys

import pytest

from topicaudit.cli.main import COMMANDS, _build_parser, _requested

PROBE = ("import sys; from topicaudit.cli.main import _build_parser; _build_parser({command!r}); "
         "print(' '.join(sorted(m for m in sys.modules if m.startswith(('topicaudit.cli.', 'topicaudit.reports')))))")


def imported_after_parsing(command: str | None) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(command=command)], capture_output=True, text=True,
                          check=True)
    return set(done.stdout.split())


def test_run_imports_only_its_own_subcommand():
    loaded = imported_after_parsing("run")
    assert "topicaudit.cli.run" in loaded
    assert not {"topicaudit.cli.report", "topicaudit.cli.sweep", "topicaudit.cli.audit"} & loaded
    assert not any(name.startswith("topicaudit.reports") for name in loaded)


def test_without_a_known_command_every_subcommand_is_registered():
    assert {f"topicaudit.cli.{name}" for name in COMMANDS} <= imported_after_parsing(None)
    with pytest.raises(SystemExit):
        _build_parser(_requested(["bogus"])).parse_args(["bogus"])


@pytest.mark.parametrize("argv, command", [(["run", "--k", "5"], "run"), (["--version"], None),
                                           (["-h"], None), (["check", "runs/x", "--epsilon", "3"], "check")])
def test_the_requested_command_is_the_first_argument_that_is_not_an_option(argv, command):
    assert _requested(argv) == command
