"""The development install resolves ``topicaudit`` for type checkers, and the public API type-checks.

tests/run.sh installs the package in setuptools' strict editable mode: a tree
of links under ``build/`` named by a static ``.pth`` file, which mypy and
editors read like any installed package (docs/architecture.md#one-package).
The default editable mode maps the folders (audit/ → topicaudit, targets/,
reports/) with an import hook that only a running interpreter sees; mypy then
answers "Can't find package 'topicaudit'".
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import topicaudit

ROOT = Path(__file__).resolve().parents[1]
# The modules a user imports: the API, the pytest plugin, and the two mapped folders' packages.
PUBLIC = ("topicaudit", "topicaudit.api", "topicaudit.testing", "topicaudit.targets", "topicaudit.reports",
          "topicaudit.mechanisms", "topicaudit.learner_checks", "topicaudit.canary_design")


def test_mypy_finds_the_package_and_the_public_api_type_checks():
    pytest.importorskip("mypy", reason="mypy (test extra) is not installed")
    # The cache lives with the environment, so only the first run after an install reads every dependency.
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               "--cache-dir", str(Path(sys.prefix) / ".mypy_cache"), *(arg for m in PUBLIC for arg in ("-m", m))]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT.parent, timeout=600, check=False)
    assert "Can't find" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"no issues found in {len(PUBLIC)} source files" in done.stdout


def test_the_development_install_links_every_file_of_the_package():
    """A module added since the install is missing from the link tree: say so, rather than "No module named"."""
    installed = Path(topicaudit.__file__).parent
    if installed == ROOT / "audit":
        pytest.skip("topicaudit is imported from the folders themselves, not from a strict editable install")
    folders = {"": ROOT / "audit", "targets": ROOT / "targets", "reports": ROOT / "reports"}
    missing = [f"{folder.name}/{path.relative_to(folder)}" for sub, folder in folders.items()
               for path in folder.rglob("*.py") if "__pycache__" not in path.parts
               and not (installed / sub / path.relative_to(folder)).exists()]
    assert not missing, f"not in the development install: {', '.join(missing)}; run bash tests/run.sh to refresh it"
