"""The README's command blocks, in order: each command parses, and every path it reads exists after the ones before.

The fast test replays the README on paper: it parses each `topicaudit` line with
the real command-line parser and follows what each command creates (files
written by heredocs, run, sweep and report directories), so a command that
reads a directory no earlier command made (`report runs/kos-k-sweep` after a
sweep into another place) fails here. The slow test runs the affordable
commands verbatim in a fresh directory and checks their documented exit codes.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from topicaudit.cli.main import _build_parser
from topicaudit.cli.run import config_from_args
from topicaudit.engine.configuration.loading import load_config
from topicaudit.engine.sweep import default_output, parse_values

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# The user's own files, which the README's "Auditing your own model" block stands for.
USER_FILES = {"model/phi.npy", "model/vocab.txt", "suspects.json", "public.json", "my-model.toml"}


def blocks(text: str) -> list[str]:
    """The README's unlabelled fenced blocks (shell), in order; labelled ones (```python) are left out."""
    found, current, label = [], None, None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, label = [], line[3:].strip()
            else:
                if not label:
                    found.append("\n".join(current) + "\n")
                current = None
            continue
        if current is not None:
            current.append(line)
    return found


def commands(block: str) -> list[str]:
    """Shell lines of a block, continuation lines joined; heredocs kept whole."""
    lines, out, heredoc = block.splitlines(), [], None
    for line in lines:
        if heredoc is not None:
            out[-1] += "\n" + line
            if line.strip() == heredoc:
                heredoc = None
            continue
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1] + " " + line.strip()
        else:
            out.append(line)
        found = re.search(r"<<'?(\w+)'?", line)
        if found:
            heredoc = found.group(1)
    return [line for line in out if line.strip()]


def documented_exit(line: str) -> int:
    found = re.search(r"#\s*(?:in CI: )?exit (\d)", line)
    return int(found.group(1)) if found else 0


def topicaudit_argv(line: str) -> list[str] | None:
    code = line.split("  #")[0].split(" # ")[0]
    if "bin/topicaudit " not in code and not code.rstrip().endswith("bin/topicaudit"):
        return None
    words = shlex.split(code[code.index("bin/topicaudit"):])
    return words[1:]


def created_by(argv: list[str]) -> list[Path]:
    """The paths a topicaudit command leaves behind (that later commands may read)."""
    args = _build_parser().parse_args(argv)
    if args.command == "run":
        return [config_from_args(args).run_dir]
    if args.command == "sweep":
        config = load_config(args.config)
        return [Path(args.output) if args.output else default_output(config, args.param, parse_values(args.values))]
    if args.command == "report":
        return [Path(args.output) if args.output else Path(args.inputs[0]) / "report"]
    if args.command == "audit":
        return [Path(args.output)] if args.output else []
    if args.command == "check":
        made = [Path(p) for p in (args.json, args.junit) if p]
        if Path(args.target).suffix == ".toml":
            config = load_config(args.target)
            if args.output:
                config.output = args.output
            if args.canaries is not None:
                config.attack.canaries.count = args.canaries
            made.append(config.run_dir)
        return made
    return []


def read_by(argv: list[str]) -> list[str]:
    args = _build_parser().parse_args(argv)
    if args.command == "run":
        return [p for p in (args.config, args.corpus) if p]
    if args.command in ("sweep",):
        return [args.config]
    if args.command == "check":
        return [args.target]
    if args.command == "report":
        return list(args.inputs)
    if args.command == "audit":
        return [p for p in (args.phi, args.candidates, args.reference, args.vocabulary) if p]
    return []


def test_readme_commands_parse_and_read_only_what_earlier_ones_made(tmp_path, monkeypatch, shared_data):
    monkeypatch.chdir(tmp_path)
    (tmp_path.parent / "shared").exists() or os.symlink(shared_data.parent, tmp_path.parent / "shared")
    made: set[Path] = set()
    checked = 0
    for block in blocks(README.read_text()):
        for line in commands(block):
            heredoc = re.match(r"cat > (\S+) <<'?(\w+)'?\n(.*)\n\2$", line, flags=re.S)
            if heredoc:
                Path(heredoc.group(1)).write_text(heredoc.group(3) + "\n")
                continue
            argv = topicaudit_argv(line)
            if argv is None:
                continue
            for path in read_by(argv):
                exists = Path(path).exists() or any(Path(path) == p or p in Path(path).parents for p in made)
                assert exists or path in USER_FILES, f"README: `{line}` reads {path}, which no earlier command made"
            made.update(created_by(argv))
            checked += 1
    assert checked >= 12


def test_readme_report_reads_the_sweep_the_readme_made(tmp_path, monkeypatch):
    """The mismatch a new user met: the sweep's directory and the report's argument are one path."""
    text = README.read_text()
    sweep = re.search(r"topicaudit sweep .*--output (\S+)", text)
    assert sweep and f"topicaudit report {sweep.group(1)}" in text


@pytest.mark.slow
def test_readme_affordable_commands_run_verbatim_in_a_fresh_directory(tmp_path, shared_data):
    """The main job, the canary audit and its check, and the canary report, as written, with their exit codes.

    The 64- and 128-shadow corpus audits, the sweep and the cluster are not
    run here (tens of minutes); the fast test above follows their paths.
    """
    fresh = tmp_path / "clone"
    fresh.mkdir()
    (tmp_path / "shared").symlink_to(shared_data.parent)
    (fresh / ".venv").symlink_to(Path(sys.executable).parents[1])
    affordable = ("bin/topicaudit run\n", "--shadows 0 --canaries 1000", "check runs/pheme-canaries",
                  "report runs/pheme-canaries")
    ran = 0
    for block in blocks(README.read_text()):
        for line in commands(block):
            code = line.split("&&")[-1].strip() if line.startswith("python3 -m venv") else line
            if not any(marker in code + "\n" for marker in affordable):
                continue
            result = subprocess.run(code.split("  #")[0], shell=True, cwd=fresh, capture_output=True, text=True,
                                    timeout=900)
            assert result.returncode == documented_exit(line), f"{code}\n{result.stderr[-2000:]}"
            ran += 1
    assert ran == 4
    assert list((fresh / "runs").glob("demo-lda-k5-s0-*/results.json"))
    assert (fresh / "runs" / "pheme-canaries" / "report" / "report.html").exists()
    shutil.rmtree(fresh / "runs")
