"""The outputs docs/ quotes are what the commands print: every console block of docs/*.md whose commands are
`.venv/bin/topicaudit …` or `topicaudit …` (and the `cat > FILE <<'EOF'` that write their files) is run as written, in
order, in a fresh directory beside the shared data, after the ```python block directly above it when there is one
(the page's own code that makes the files the commands read); each verdict line the page shows must be the line
printed, and so must every line an `audit` or `sweep` command shows (seeded; only the seconds vary, and are
masked).

Then the blocks ``AFTERWARDS`` names run in the directory and cache those commands left: check.md's pytest block
(the plugin's fixture reuses the cached run), its inline `check RUN --json -`, and user-audit.md's Python API block
(the audit resumed, the page made). tests/test_docs_blocks.py accounts for every other block.

Verdict lines and audit reports are held to the letter; progress, timing and sizing lines vary with the machine and
are left to the prose around them. The run cache's place and key are hidden: the place
differs between machines, and the key changes with topicaudit's own source. docs/adding-a-learner.md's commands
have their own test (tests/test_adding_a_learner.py).

After a change that alters a verdict line on purpose, `TOPICAUDIT_REWRITE_DOCS=1 bash tests/run.sh
tests/test_docs_outputs.py` writes the printed lines into the pages; review the diff.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from topicaudit.engine.execution.progress import ACTIVITIES

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```\n?", re.M | re.S)
VERDICT = re.compile(r"^(VIOLATED|CONSISTENT|NO SIGNAL|NO CLAIM)\b")
REWRITE = os.environ.get("TOPICAUDIT_REWRITE_DOCS") == "1"
RUN_DIR = re.compile(r"\[[^\]]*\]")
COMMAND = re.compile(r"^\$ (\.venv/bin/topicaudit |topicaudit |cat > )")
# An audit's default directory ends in a hash of its inputs' paths, which differ between machines.
AUDIT_DIR = re.compile(r"(runs/audit-[\w.-]+)-[0-9a-f]{6}\b")


def console_blocks(page: Path) -> list[tuple[str | None, list[tuple[str, list[str]]]]]:
    """Each block of ``page`` whose commands are all runnable here: the ```python block directly above it (None
    when there is none), and its commands (continuation lines and heredocs joined) with the lines the page shows
    after each."""
    found, setup = [], None
    text = page.read_text()
    fences = list(FENCE.finditer(text))
    for i, fence in enumerate(fences):
        language, block = fence.group(1), fence.group(2)
        above = fences[i - 1] if i else None
        setup = (above.group(2) if above and above.group(1) == "python"
                 and not text[above.end():fence.start()].strip() else None)
        lines = block.splitlines()
        if language or not any(line.startswith("$ ") for line in lines):
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
            found.append((setup, steps))
    return found


def hidden(line: str) -> str:
    """A verdict line with its run-cache directory reduced to the run's name."""
    line = re.sub(r"\[(?:~|/)[^\]]*/runs/([\w.-]+)-[0-9a-f]{16}\]", r"[<cache>/runs/\1-<key>]", line)
    return AUDIT_DIR.sub(r"\1-<hash>", line)


def report_lines(shown: list[str]) -> list[str]:
    """The lines of an ``audit`` or ``sweep`` command's output the page shows, held to the letter: all but the
    elisions (``…``) and the wall time."""
    return [line for line in shown if line.strip() not in ("", "…") and "wall time" not in line]


def seconds_masked(line: str) -> str:
    """A line with its counts of seconds (``3 s elapsed``, ``~11 s left``) masked: they vary with the machine."""
    return re.sub(r"~?\b\d+ s\b", "N s", hidden(line))


def shape(line: str) -> str:
    """A line with every number and every run-cache path masked: what the sizing and cache lines of `check`
    say, without the times, counts and places that vary with the machine."""
    line = re.sub(r"(?:~|/)[^\s\]):]*/runs/[^\s\]):]*", "<cache>", line)
    return re.sub(r"\d[\d,]*(?:\.\d+)?", "N", line)


def progress_label(line: str) -> str | None:
    """The activity a heartbeat line (``  … ACTIVITY: N s so far (…)``) names, None for any other line."""
    found = re.match(r"  … (.*): \d+ s so far \(\d+ s since the command started\)$", line)
    return found.group(1) if found else None


def keeping_the_pages_directory(shown: str, printed: str) -> str:
    """The printed line with the run directory the page shows (``~/.cache/…`` rather than a test's temporary
    cache) when both name the same run."""
    page, run = RUN_DIR.search(shown), RUN_DIR.search(printed)
    if page and run and hidden(page.group(0)) == hidden(run.group(0)):
        return printed[:run.start()] + page.group(0) + printed[run.end():]
    return printed


# A page's blocks that run after its console blocks, in the directory and cache they left (found by how they
# begin): a pytest module (the plugin's fixture) or a script over the files the commands wrote; and the commands its
# prose quotes inline, with RUN the page's first run directory (``--json -``: the JSON alone on standard output).
AFTERWARDS = {"check.md": ("def test_our_released_topic_model_keeps_its_promise(assert_privacy):",
                           "topicaudit check RUN --json - | jq .verdict"),
              "user-audit.md": ("import topicaudit\n",)}


def afterwards(page: Path, work: Path, env: dict) -> None:
    """Run what ``AFTERWARDS`` names for ``page`` in ``work``; each must be on the page and do what it says."""
    text = page.read_text()
    for start in AFTERWARDS.get(page.name, ()):
        if start.startswith("topicaudit check RUN"):
            assert f"`{start}`" in text, (page.name, start)
            run_dir = re.search(r"--output (\S+)", text).group(1)
            claim = re.search(rf"check {re.escape(run_dir)} (--epsilon \S+ --delta \S+)", text).group(1)
            (work / run_dir / "check.junit.xml").unlink()  # the other file, written as usual
            done = subprocess.run([".venv/bin/topicaudit", "check", run_dir, *claim.split(), "--json", "-"],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=300)
            assert json.loads(done.stdout)["verdict"] == "VIOLATED" and done.returncode == 1, done.stderr[-2000:]
            assert done.stderr.startswith("VIOLATED: ") and (work / run_dir / "check.junit.xml").is_file()
            continue
        [code] = [m.group(2) for m in FENCE.finditer(text) if m.group(1) == "python" and m.group(2).startswith(start)]
        if code.startswith("def test_"):
            (work / "test_page.py").write_text(code)
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_page.py"]
        else:
            (work / "page_after.py").write_text(code)
            command = [sys.executable, "page_after.py"]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (page.name, start, done.stdout[-2000:], done.stderr[-2000:])


PAGES = sorted(page for page in (ROOT / "docs").glob("*.md")
               if page.name != "adding-a-learner.md" and console_blocks(page))


def test_pages_with_console_blocks_are_found():
    assert {"check.md", "user-audit.md", "sweeps-and-reports.md"} <= {page.name for page in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_quoted_verdict_lines_are_what_the_commands_print(page, tmp_path, shared_data):
    work = tmp_path / "clone"
    work.mkdir()
    (tmp_path / "shared").symlink_to(shared_data.parent)
    (work / ".venv").symlink_to(Path(sys.executable).parents[1])
    env = {**os.environ, "TOPICAUDIT_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}
    env.pop("TOPICAUDIT_INTEGRITY_KEY", None)
    compared, rewrites = 0, {}
    for setup, block in console_blocks(page):
        if setup is not None:
            (work / "page_setup.py").write_text(setup)
            done = subprocess.run([sys.executable, "page_setup.py"], cwd=work, env=env, capture_output=True,
                                  text=True, timeout=900)
            assert done.returncode == 0, (page.name, setup, done.stderr[-2000:])
        for command, shown in block:
            run = re.sub(r"^topicaudit ", ".venv/bin/topicaudit ", command)
            done = subprocess.run(["bash", "-c", run.split("  # ")[0] if "<<" not in run else run],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=900)
            expected = int(m.group(1)) if (m := re.search(r"#\s*exit (\d)", command.splitlines()[0])) else None
            printed = (done.stdout + done.stderr).splitlines()
            if expected is not None:
                assert done.returncode == expected, (command, done.stderr[-2000:])
            else:
                assert done.returncode in (0, 1), (command, done.stderr[-2000:])
            if re.match(r"(\.venv/bin/)?topicaudit (audit|sweep) ", command):
                # every line shown, in the order printed on its stream (progress goes to stderr)
                streams = [[seconds_masked(p) for p in out.splitlines()] for out in (done.stdout, done.stderr)]
                at = [0, 0]
                for line in report_lines(shown):
                    masked = seconds_masked(line)
                    where = [i for i in (0, 1) if masked in streams[i][at[i]:]]
                    assert where, (page.name, command, line, done.stdout[-3000:], done.stderr[-3000:])
                    at[where[0]] = streams[where[0]].index(masked, at[where[0]]) + 1
                    compared += 1
                continue
            # the other lines shown (a check's sizing, cache and timing lines), by their shape, in the order printed;
            # a heartbeat line by its activity, printed only when that activity outlasts its interval
            streams, at = [[shape(p) for p in out.splitlines()] for out in (done.stdout, done.stderr)], [0, 0]
            for line in shown:
                if VERDICT.match(line) or line.strip() in ("", "…"):
                    continue
                if (label := progress_label(line)) is not None:
                    assert label in ACTIVITIES.values(), (page.name, command, line)
                    continue
                where = [i for i in (0, 1) if shape(line) in streams[i][at[i]:]]
                assert where, (page.name, command, line, printed)
                at[where[0]] = streams[where[0]].index(shape(line), at[where[0]]) + 1
                compared += 1
            got = [p for p in printed if VERDICT.match(p)]
            for line in shown:
                if VERDICT.match(line):
                    if REWRITE and len(got) == 1 and hidden(line) != hidden(got[0]):
                        rewrites[line] = keeping_the_pages_directory(line, got[0])
                    else:
                        assert hidden(line) in [hidden(p) for p in got], (page.name, command, line, got)
                    compared += 1
    assert compared, f"{page.name}: no verdict line or audit report quoted"
    afterwards(page, work, env)
    if rewrites:  # TOPICAUDIT_REWRITE_DOCS=1: the page now quotes what ran (review the diff before committing)
        text = page.read_text()
        for old, new in rewrites.items():
            text = text.replace(old, new)
        page.write_text(text)
