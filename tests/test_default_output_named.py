"""A refused default output folder is named as the default, not as a flag the user did not give (hostile pass XIX-q,
DO1/DO2: "cannot write --output runs/demo-…; choose another --output" with no --output on the command line)."""
from __future__ import annotations

import os
import subprocess

from cluster import VENV_BIN
from topicaudit.errors import default_output_named

REFUSED = "cannot write --output runs/demo-x: /w/runs is a file, so runs/demo-x cannot be created; choose another --output"


def test_the_default_is_named_and_the_flag_offered_as_the_fix():
    said = default_output_named(REFUSED, None)
    assert said.startswith("cannot write the default output folder runs/demo-x: /w/runs is a file")
    assert said.endswith("give --output to choose another folder")
    report = default_output_named("cannot write -o/--output R/report: …; choose another -o/--output", None)
    assert report.startswith("cannot write the default output folder R/report") and "give -o/--output" in report


def test_a_given_output_and_other_messages_are_left_as_they_are():
    assert default_output_named(REFUSED, "runs/demo-x") == REFUSED
    other = "rerun the audit into a new directory (--output)"
    assert default_output_named(other, None) == other


def test_check_of_a_configuration_beside_a_file_named_runs(tmp_path):
    (tmp_path / "runs").write_text("the user's notes\n")
    (tmp_path / "c.toml").write_text("[synthetic]\nn_docs = 60\nn_words = 100\n[target]\nk = 3\n")
    done = subprocess.run([str(VENV_BIN / "topicaudit"), "check", "c.toml", "--epsilon", "3"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "TOPICAUDIT_CACHE_DIR": "off"})
    assert done.returncode == 2 and "the default output folder runs/" in done.stderr
    assert "give --output" in done.stderr and "cannot write --output" not in done.stderr
    assert (tmp_path / "runs").read_text() == "the user's notes\n"
