"""The outputs docs/ quotes are what the commands print: every console block of docs/*.md whose commands are
`.venv/bin/topicaudit …` (and the `cat > FILE <<'EOF'` that write their files) is run as written, in order, in a
fresh directory beside the shared data, and each verdict line the page shows must be the line printed.

Only verdict lines are held to the letter (they are seeded and deterministic); progress, timing and sizing lines
vary with the machine and are left to the prose around them. The run cache's place and key are hidden: the place
differs between machines, and the key changes with topicaudit's own source. docs/adding-a-learner.md's commands
have their own test (tests/test_adding_a_learner.py).

After a change that alters a verdict line on purpose, `TOPICAUDIT_REWRITE_DOCS=1 bash tests/run.sh
tests/test_docs_outputs.py` writes the printed lines into the pages; review the diff.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)
VERDICT = re.compile(r"^(VIOLATED|CONSISTENT|NO SIGNAL|NO CLAIM)\b")
REWRITE = os.environ.get("TOPICAUDIT_REWRITE_DOCS") == "1"
RUN_DIR = re.compile(r"\[[^\]]*\]")
COMMAND = re.compile(r"^\$ (\.venv/bin/topicaudit |cat > )")


def console_blocks(page: Path) -> list[list[tuple[str, list[str]]]]:
    """Each block of ``page`` whose commands are all runnable here: its commands (continuation lines and heredocs
    joined) with the lines the page shows after each."""
    found = []
    for block in FENCE.findall(page.read_text()):
        lines = block.splitlines()
        if not any(line.startswith("$ ") for line in lines):
            continue
        steps: list[tuple[str, list[str]]] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ "):
                command = line[2:]
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                heredoc = re.search(r"<<'?(\w+)'?", command)
                if heredoc:
                    while i + 1 < len(lines):
                        i += 1
                        command += "\n" + lines[i]
                        if lines[i].strip() == heredoc.group(1):
                            break
                steps.append((command, []))
            elif steps:
                steps[-1][1].append(line)
            i += 1
        if steps and all(COMMAND.match("$ " + command) for command, _ in steps):
            found.append(steps)
    return found


def hidden(line: str) -> str:
    """A verdict line with its run-cache directory reduced to the run's name."""
    return re.sub(r"\[(?:~|/)[^\]]*/runs/([\w.-]+)-[0-9a-f]{16}\]", r"[<cache>/runs/\1-<key>]", line)


def keeping_the_pages_directory(shown: str, printed: str) -> str:
    """The printed line with the run directory the page shows (``~/.cache/…`` rather than a test's temporary
    cache) when both name the same run."""
    page, run = RUN_DIR.search(shown), RUN_DIR.search(printed)
    if page and run and hidden(page.group(0)) == hidden(run.group(0)):
        return printed[:run.start()] + page.group(0) + printed[run.end():]
    return printed


PAGES = sorted(page for page in (ROOT / "docs").glob("*.md")
               if page.name != "adding-a-learner.md" and console_blocks(page))


def test_pages_with_console_blocks_are_found():
    assert "check.md" in {page.name for page in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_quoted_verdict_lines_are_what_the_commands_print(page, tmp_path, shared_data):
    work = tmp_path / "clone"
    work.mkdir()
    (tmp_path / "shared").symlink_to(shared_data.parent)
    (work / ".venv").symlink_to(Path(sys.executable).parents[1])
    env = {**os.environ, "TOPICAUDIT_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}
    env.pop("TOPICAUDIT_INTEGRITY_KEY", None)
    compared, rewrites = 0, {}
    for block in console_blocks(page):
        for command, shown in block:
            done = subprocess.run(["bash", "-c", command.split("  # ")[0] if "<<" not in command else command],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=900)
            expected = int(m.group(1)) if (m := re.search(r"#\s*exit (\d)", command.splitlines()[0])) else None
            printed = (done.stdout + done.stderr).splitlines()
            if expected is not None:
                assert done.returncode == expected, (command, done.stderr[-2000:])
            else:
                assert done.returncode in (0, 1), (command, done.stderr[-2000:])
            got = [p for p in printed if VERDICT.match(p)]
            for line in shown:
                if VERDICT.match(line):
                    if REWRITE and len(got) == 1 and hidden(line) != hidden(got[0]):
                        rewrites[line] = keeping_the_pages_directory(line, got[0])
                    else:
                        assert hidden(line) in [hidden(p) for p in got], (page.name, command, line, got)
                    compared += 1
    assert compared, f"{page.name}: no verdict line quoted"
    if rewrites:  # TOPICAUDIT_REWRITE_DOCS=1: the page now quotes what ran (review the diff before committing)
        text = page.read_text()
        for old, new in rewrites.items():
            text = text.replace(old, new)
        page.write_text(text)
