"""Every fenced block of README.md and docs/*.md is accounted for: run by a test, or said to be slow, a
configuration, shell setup, or an illustration, and then checked as far as that allows.

``BLOCKS`` classifies each block by its page and the start of its first line; a block added to a page without a
line here fails ``test_every_block_is_classified``, so a new command cannot go unrun by oversight. The kinds:

- ``runs``: run as written, its quoted output compared (the test that does it is named);
- ``same``: the same commands as a block of another page that runs (checked equal here, with any number it quotes);
- ``slow``: real-data audits of minutes to hours; their commands are parsed by the real parser here, and they run
  in the slow test below (``-m slow``);
- ``benchmark``: a benchmark script's command (benchmarks/RESULTS.md records its output); every flag it gives
  must be one the script defines;
- ``config``: a TOML fragment, loaded and validated by the real configuration loader;
- ``setup``: installs, a cluster or a CI job, which cannot run here; what can be parsed is;
- ``illustrative``: a layout, a diagram, output shown for its shape, or code over the user's own objects and
  files; a Python one must still compile.
"""
from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from topicaudit.cli.main import _build_parser
from topicaudit.cli.run import config_from_args
from topicaudit.engine.configuration.loading import load_config

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```\n?", re.M | re.S)
CHECK_MD_RUN = ".venv/bin/topicaudit run --corpus ../shared/data/pheme/pheme_clean.json --no-preprocess --k 5 \\"

# (page, start of the block's first line) → (kind, where it runs or why it cannot)
BLOCKS = {
    ("README.md", "python3 -m venv .venv"): ("setup", "the demo it ends with: test_packaging.py, installed wheel"),
    ("README.md", "bash tests/run.sh"): ("setup", "the test suite itself"),
    ("README.md", ".venv/bin/topicaudit run --corpus ../shared/data/pheme/pheme_clean.json --no-preprocess --k 5 "
                  "--shadows 128"): ("slow", "128 and 64 shadow models on PHEME and KOS"),
    ("README.md", "cat > audit.toml"): ("slow", "resumes the KOS audit above; its file is validated here"),
    ("README.md", ".venv/bin/ray start"): ("setup", "a Ray cluster: test_clusters.py"),
    ("README.md", CHECK_MD_RUN): ("same", "check.md's first block (test_docs_outputs.py)"),
    ("README.md", "cat > privacy.toml"): ("same", "check.md's CI example (test_docs_outputs.py)"),
    ("README.md", "def test_our_released_topic_model_keeps_its_promise"): ("same", "check.md's pytest block"),
    ("README.md", ".venv/bin/topicaudit audit model/phi.npy"): ("illustrative", "the user's own model and files"),
    ("README.md", ".venv/bin/topicaudit sweep audit.toml"): ("slow", "15 KOS audits of 64 shadow models"),
    ("README.md", "import topicaudit"): ("illustrative", "the user's own files and learner class"),
    ("adding-a-learner.md", "dpem-topics/"): ("illustrative", "the package's layout"),
    ("adding-a-learner.md", "[build-system]"): ("runs", "test_adding_a_learner.py: the page's package"),
    ("adding-a-learner.md", '"""'): ("runs", "test_adding_a_learner.py: the page's package"),
    ("adding-a-learner.md", "# Our CI's privacy gate"): ("runs", "test_adding_a_learner.py: the page's package"),
    ("adding-a-learner.md", "noisy = record.gaussian("): ("illustrative", "the call inside the learner shown"),
    ("adding-a-learner.md", "check_learner: RecordMismatch"): ("runs", "test_adding_a_learner.py"),
    ("adding-a-learner.md", "$ pip install ./dpem-topics"): ("runs", "test_adding_a_learner.py"),
    ("adding-a-learner.md", "$ topicaudit check privacy/audit.toml"): ("runs", "test_adding_a_learner.py"),
    ("adding-a-learner.md", "results = topicaudit.run("): ("illustrative", "the user's corpus.json"),
    ("adding-a-learner.md", "from dataclasses import dataclass"): ("runs", "test_adding_a_learner.py"),
    ("architecture.md", "audit/"): ("illustrative", "the source tree"),
    ("architecture.md", "rm -rf dist && python -m build"): ("setup", "a release upload"),
    ("architecture.md", "cli "): ("illustrative", "the layers"),
    ("architecture.md", "run (TOML, flags)"): ("illustrative", "the data flow"),
    ("bertopic.md", "pip install"): ("setup", "an install"),
    ("bertopic.md", 'topic_model.save('): ("illustrative", "the user's BERTopic model"),
    ("bertopic.md", ".venv/bin/python benchmarks/bertopic_lira.py"): ("benchmark", "bertopic_lira.py"),
    ("bertopic.md", ".venv/bin/python benchmarks/bertopic_worked_example.py"): ("benchmark", "its worked example"),
    ("canaries.md", ".venv/bin/topicaudit run --corpus"): ("same", "check.md's first block (test_docs_outputs.py)"),
    ("check.md", "$ .venv/bin/topicaudit run"): ("runs", "test_docs_outputs.py"),
    ("check.md", "$ cat > dpcgs.toml"): ("runs", "test_docs_outputs.py"),
    ("check.md", "$ cat > privacy.toml"): ("runs", "test_docs_outputs.py"),
    ("check.md", "$ .venv/bin/topicaudit check privacy.toml"): ("runs", "test_docs_outputs.py"),
    ("check.md", "def test_our_released_topic_model_keeps_its_promise"): ("runs", "test_docs_outputs.py, pytest"),
    ("check.md", "from topicaudit.testing import check_learner"): ("illustrative", "the user's own learner class"),
    ("check.md", "jobs:"): ("setup", "a GitHub Actions job; its YAML and its topicaudit command are parsed"),
    ("clusters.md", ".venv/bin/ray start"): ("setup", "a Ray cluster: test_clusters.py"),
    ("clusters.md", "readlink -f /tmp/ray-audit"): ("setup", "a Ray head started as above"),
    ("clusters.md", "# head node"): ("setup", "a cluster of several machines"),
    ("clusters.md", ". .venv/bin/activate"): ("setup", "a Ray cluster with tokens: test_clusters.py"),
    ("clusters.md", "RAY_AUTH_MODE=token ray job submit"): ("setup", "a Ray cluster: test_clusters.py"),
    ("configuration.md", 'name = "demo"'): ("config", "also equal to Config(): test_default_output.py"),
    ("configuration.md", 'name = "my-model"'): ("config", "the audit variant"),
    ("corpora.md", ".venv/bin/topicaudit run --corpus"): ("slow", "the README's corpus audits"),
    ("interop.md", "pip install"): ("setup", "an install"),
    ("interop.md", 'numpy.save("phi.npy"'): ("illustrative", "the user's gensim model"),
    ("interop.md", "topicaudit audit phi.npy"): ("illustrative", "ends in the user's other flags (...)"),
    ("interop.md", "# gensim"): ("illustrative", "excerpts of benchmarks/interop_worked_example.py"),
    ("interop.md", "topicaudit audit pheme.tomotopy"): ("benchmark", "interop_worked_example.py runs them"),
    ("interop.md", ".venv/bin/python benchmarks/audit_end_to_end.py"): ("benchmark", "audit_end_to_end.py"),
    ("run-directory.md", "runs/<name>"): ("illustrative", "a run directory's layout"),
    ("run-directory.md", '"mac":'): ("illustrative", "one key of manifest.json"),
    ("sweeps-and-reports.md", ".venv/bin/topicaudit sweep audit.toml"): ("slow", "the README's KOS sweep"),
    ("sweeps-and-reports.md", "OUT/sweep.json"): ("illustrative", "a sweep directory's layout"),
    ("sweeps-and-reports.md", "$ cat > small.toml"): ("runs", "test_docs_outputs.py"),
    ("user-audit.md", ".venv/bin/topicaudit audit model/phi.npy"): ("illustrative", "the user's own files"),
    ("user-audit.md", "import json"): ("runs", "test_docs_outputs.py: makes the worked example's files"),
    ("user-audit.md", "$ topicaudit audit lda.joblib"): ("runs", "test_docs_outputs.py"),
    ("user-audit.md", "import topicaudit"): ("runs", "test_docs_outputs.py, on the worked example's audit"),
}


def fenced_blocks() -> list[tuple[str, str, str]]:
    """Every fenced block: (page, info string, text)."""
    return [(page.name, m.group(1), m.group(2)) for page in PAGES for m in FENCE.finditer(page.read_text())]


def classified(page: str, text: str) -> list[tuple[str, str]]:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return [key for key in BLOCKS if key[0] == page and first.startswith(key[1])]


def blocks_of(kind: str) -> list[tuple[str, str, str]]:
    return [(page, info, text) for page, info, text in fenced_blocks()
            if BLOCKS[classified(page, text)[0]][0] == kind]


def commands(text: str) -> list[str]:
    """A shell block's commands: ``$ `` prompts dropped, continuation lines joined, heredocs kept whole, output
    lines (in a block with prompts) left out."""
    prompted = any(line.startswith("$ ") for line in text.splitlines())
    found, heredoc = [], None
    for line in text.splitlines():
        if heredoc is not None:
            found[-1] += "\n" + line
            heredoc = None if line.strip() == heredoc else heredoc
        elif found and found[-1].endswith("\\"):
            found[-1] = found[-1][:-1] + " " + line.strip()
        elif line.strip() and (not prompted or line.startswith("$ ")):
            found.append(line[2:] if prompted else line)
            if match := re.search(r"<<'?(\w+)'?", line):
                heredoc = match.group(1)
    return found


def spaced(command: str) -> str:
    return re.sub(r"\s+", " ", command).strip()


def block(page: str, start: str) -> str:
    """The first block of ``page`` that ``BLOCKS`` knows by ``start``."""
    return next(text for name, _, text in fenced_blocks() if name == page and classified(name, text)[0][1] == start)


def topicaudit_argv(command: str) -> list[str] | None:
    code = command.split("  #")[0]
    match = re.match(r"(\.venv/bin/)?topicaudit (.*)", code.strip(), re.S)
    return shlex.split(match.group(2)) if match else None


def test_every_block_is_classified():
    found = fenced_blocks()
    unclassified = [(page, text.splitlines()[0]) for page, _, text in found if len(classified(page, text)) != 1]
    assert not unclassified, f"classify these blocks in BLOCKS (one entry each): {unclassified}"
    unused = set(BLOCKS) - {classified(page, text)[0] for page, _, text in found}
    assert not unused, f"BLOCKS names blocks no page has any more: {unused}"


def test_blocks_shown_on_two_pages_are_the_same_commands_as_the_one_that_runs():
    """The README's and canaries.md's canary audit, and the README's CI gate, are check.md's blocks, which
    test_docs_outputs.py runs; the bound their comments quote is the one check.md's quoted verdict line holds."""
    runs = commands(block("check.md", "$ .venv/bin/topicaudit run"))
    shown = block("check.md", "$ .venv/bin/topicaudit run")
    bound = float(re.search(r"VIOLATED: \S+ proves ε ≥ ([\d.]+)", shown).group(1))
    for page in ("README.md", "canaries.md"):
        own = commands(block(page, CHECK_MD_RUN if page == "README.md" else ".venv/bin/topicaudit run --corpus"))
        assert [spaced(c.split("  #")[0]) for c in own] == [spaced(c) for c in runs], page
        quoted = re.search(r"exit 1: VIOLATED, ε ≥ ([\d.]+)", own[-1])
        assert quoted and float(quoted.group(1)) == round(bound, 2), (page, own[-1], bound)
    readme_gate = commands(block("README.md", "cat > privacy.toml"))
    assert [c if "<<" in c else c.split("   #")[0].strip() for c in readme_gate] == commands(block("check.md", "$ cat > privacy.toml"))
    readme_test = block("README.md", "def test_our_released_topic_model_keeps_its_promise")
    check_test = block("check.md", "def test_our_released_topic_model_keeps_its_promise")
    calls = [re.search(r"assert_privacy\(.*?\)", text).group(0) for text in (readme_test, check_test)]
    assert calls[0] == calls[1]


def test_configuration_files_load_through_the_real_loader(tmp_path, monkeypatch, shared_data):
    """Every TOML a page shows (a ```toml block, or a file a heredoc writes) loads and validates, beside the shared
    data as the pages assume (the files an audit variant names are read when it runs, not when it loads)."""
    (tmp_path / "shared").symlink_to(shared_data.parent)
    work = tmp_path / "clone"
    work.mkdir()
    monkeypatch.chdir(work)
    loaded = 0
    for page, info, text in fenced_blocks():
        files = [(f"{page}.toml", text)] if info == "toml" else []
        files += [(m.group(1), m.group(3)) for command in commands(text)
                  if (m := re.match(r"cat > (\S+\.toml) <<'?(\w+)'?\n(.*)\n\2$", command, re.S))]
        for name, content in files:
            if "dpem-topics/" in info:
                continue  # the plug-in's own file, loaded by test_adding_a_learner.py once it is installed
            tomllib.loads(content)
            path = work / name.replace("/", "-")
            path.write_text(content)
            config = load_config(path)
            assert config.to_dict(), (page, name)
            loaded += 1
    assert loaded >= 7


def test_the_readme_audit_file_finds_the_directory_of_the_kos_command_above():
    """README: `topicaudit run audit.toml` "resumes the KOS run above: same directory"."""
    kos = next(c for c in commands(block("README.md", ".venv/bin/topicaudit run --corpus ../shared/data/pheme/"
                                         "pheme_clean.json --no-preprocess --k 5 --shadows 128")) if "kos" in c)
    heredoc, resume = commands(block("README.md", "cat > audit.toml"))
    parse = _build_parser().parse_args
    Path("audit.toml").write_text(heredoc.split("\n", 1)[1].rsplit("\n", 1)[0] + "\n")
    try:
        assert config_from_args(parse(topicaudit_argv(resume))).run_dir == \
            config_from_args(parse(topicaudit_argv(kos))).run_dir
    finally:
        Path("audit.toml").unlink()


def test_python_blocks_compile():
    for page, info, text in fenced_blocks():
        if info.split()[0:1] == ["python"]:
            ast.parse(text, filename=page)


def test_slow_and_illustrative_topicaudit_commands_parse():
    """Commands not run by the fast suite still parse with the real command line (a renamed flag fails here)."""
    parsed = 0
    for page, _, text in blocks_of("slow") + blocks_of("illustrative") + blocks_of("setup"):
        for command in commands(text):
            argv = topicaudit_argv(command.split("&&")[-1].strip())
            if argv is None or "..." in argv:
                continue
            _build_parser().parse_args(argv)
            parsed += 1
    assert parsed >= 9


def test_benchmark_commands_give_only_flags_their_script_defines():
    for page, _, text in blocks_of("benchmark"):
        for command in commands(text):
            script = re.search(r"benchmarks/\w+\.py", command)
            if script is None:
                continue  # a command the script runs (interop.md's two audits): parsed above as topicaudit's
            source = (ROOT / script.group(0)).read_text()
            for flag in set(re.findall(r"(?<!\S)--[\w-]+", command.split("  #")[0])):
                assert f'"{flag}"' in source, (page, script.group(0), flag)


def test_interop_worked_audits_parse():
    for command in commands(block("interop.md", "topicaudit audit pheme.tomotopy")):
        _build_parser().parse_args(topicaudit_argv(command))


def test_the_ci_job_is_valid_yaml_and_its_check_parses():
    job = yaml.safe_load(block("check.md", "jobs:"))
    runs = [step["run"] for step in job["jobs"]["privacy"]["steps"] if "run" in step]
    checks = [topicaudit_argv(run.split("  #")[0]) for run in runs if "topicaudit check" in run]
    assert len(checks) == 1
    args = _build_parser().parse_args(checks[0])
    assert args.command == "check" and args.canaries == "auto" and args.junit == "privacy-check.xml"


def test_the_slow_blocks_of_other_pages_are_the_readmes():
    """corpora.md's and sweeps-and-reports.md's slow blocks repeat the README's commands (the slow test runs the
    README's); only `report runs/a runs/b`, which stands for any two runs, is not one of them."""
    readme = {spaced(c.split("  #")[0]) for _, _, text in blocks_of("slow") + blocks_of("same") for c in commands(text)}
    for page, _, text in blocks_of("slow"):
        for command in commands(text):
            assert spaced(command.split("  #")[0]) in readme or "runs/a runs/b" in command, (page, command)


@pytest.mark.slow
def test_the_readmes_slow_blocks_run_verbatim(tmp_path, shared_data):
    """The README's real-data audits, which the fast suite only parses, as written and in order (with the canary
    audit they report on) in a fresh directory beside the shared data: an hour or more on two cores. Each exits
    as documented and leaves what the next one reads."""
    work = tmp_path / "clone"
    work.mkdir()
    (tmp_path / "shared").symlink_to(shared_data.parent)
    (work / ".venv").symlink_to(Path(sys.executable).parents[1])
    ran = 0
    for page, _, text in fenced_blocks():
        if page != "README.md" or BLOCKS[classified(page, text)[0]][0] not in ("slow", "same"):
            continue
        for command in commands(text):
            if command.startswith("def "):
                break  # the pytest block, run by test_docs_outputs.py
            done = subprocess.run(["bash", "-c", command if "<<" in command else command.split("  #")[0]],
                                  cwd=work, capture_output=True, text=True, timeout=4 * 3600)
            expected = int(m.group(1)) if (m := re.search(r"#\s*(?:in CI: )?exit (\d)", command)) else 0
            assert done.returncode == expected, (command, done.stderr[-2000:])
            ran += 1
    assert ran >= 9


# configuration.md's limits: row → (the constant, a configuration just above it, the key its refusal names)
LIMITS = {
    "topics": ("MAX_TOPICS", {"target": {"k": 10_001}}, "k"),
    "shadow models": ("MAX_SHADOWS", {"attack": {"shadows": 4_098}}, "shadows"),
    "canaries": ("MAX_CANARIES", {"attack": {"shadows": 0, "canaries": {"count": 2_000_001}}}, "count"),
    "tokens of one canary": ("MAX_CANARY_LENGTH", {"attack": {"canaries": {"count": 10, "length": 100_001}}},
                             "length"),
    "iterations of a learner": ("MAX_ITERATIONS", {"target": {"params": {"max_doc_update_iter": 100_001}}},
                                "max_doc_update_iter"),
    "vocabulary size": ("MAX_WORDS", {"corpus": {"max_words": 10_000_001}}, "max_words"),
    "synthetic corpus": ("MAX_DOCUMENTS", {"synthetic": {"mean_length": 100_001}}, "mean_length"),
    "a local Ray instance's CPUs": ("MAX_NUM_CPUS", {"ray": {"num_cpus": 4_097}}, "num_cpus"),
    "α, 1 − the confidence of every bound": (None, {"attack": {"alpha": 0.51}}, "alpha"),
    "other integer learner parameters": ("MAX_INTEGER", {"target": {"params": {"batch_size": 2**31}},
                                                         }, "batch_size"),
}


def test_the_limits_table_states_the_bounds_the_code_holds(tmp_path, monkeypatch):
    """docs/configuration.md#limits: each row's number is the constant, and a value just above it is refused by
    the configuration's validation (the same for flags, files and the API) naming the key, before any work."""
    from topicaudit.engine.configuration import validation
    from topicaudit.engine.configuration.config_checks import validate
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.errors import UserError
    from topicaudit.targets import build_learner, params

    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text[text.index('<a id="limits"></a>'):text.index("## Flags")]
    rows = {cells[0]: cells[-1] for line in section.splitlines() if line.startswith("| ")
            and (cells := [c.strip() for c in line.strip("|").split("|")])[0] not in ("what", "---")}
    assert set(rows) == set(LIMITS)
    number = {"2³¹ − 1": 2**31 - 1}
    for row, (constant, settings, key) in LIMITS.items():
        stated = [number.get(part.strip()) or float(part.replace(",", "")) for part in rows[row].split(" / ")]
        if constant is not None:
            bound = getattr(validation, constant, None) or getattr(params, constant)
            assert stated[0] == bound, (row, stated, constant, bound)
        with pytest.raises(UserError) as refused:
            config = config_from_dict({"output": str(tmp_path / "out"), **settings})
            validate(config)
            build_learner(config.target.learner, config.target.k, config.target.params)
        message = str(refused.value)  # the key, and the bound the row states (the last, for n_docs / mean_length)
        assert key in message and str(int(stated[-1]) if float(stated[-1]).is_integer() else stated[-1]) in message.replace(",", ""), (row, message)
    assert rows["synthetic corpus"] == f"{validation.MAX_DOCUMENTS:,} / {validation.MAX_MEAN_LENGTH:,}"
