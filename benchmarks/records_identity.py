"""Do two versions of topicaudit write the same results.json, audit.json and check.json, byte for byte?

For a change to how those files are built (issue 34, "records built as types"):
it runs the same commands with two installs, a base commit's and this tree's,
and compares what they wrote. Three commands, as the issue names them:

- ``demo``: ``topicaudit run --shadows 8`` on the built-in synthetic corpus, then ``check RUN_DIR --epsilon 1
  --json`` (the demo's learner claims no ε);
- ``dp``: a canary-only DP-CGS run (``vocabulary = "all"``, ``--shadows 0 --canaries 500``) on PHEME
  (``--no-preprocess``), then ``check RUN_DIR --json``;
- ``audit``: a small ``topicaudit audit`` of a Φ drawn from a seeded Dirichlet over the 300 most frequent
  words of PHEME's first 1,200 documents (200 candidates, 400 reference documents, 4 shadows).

Each file is compared as bytes after masking what differs by nature or by design between two runs of
two code versions in two directories: ``timings_s``; ``ray`` (addresses, cluster, ``models_by_node``);
``versions.topicaudit_source`` (a digest of the code itself); the output directory's own path (the two
versions write to two directories). Masking parses the file, replaces those values with a marker and
serialises it as the command does (``indent=2``); the script first checks that this serialisation
gives back the file's exact bytes, so a difference in layout, key order or number formatting is caught
too. The summary ``run`` prints is compared as well (its wall-time line and paths masked).

    # a base install beside this one: its sources at the base commit, a venv reading the same packages
    mkdir /tmp/base && git archive BASE_COMMIT | tar -x -C /tmp/base
    python3.11 -m venv /tmp/base/.venv && cp .venv/lib/python3.11/site-packages/main_venv.pth \\
        /tmp/base/.venv/lib/python3.11/site-packages/
    /tmp/base/.venv/bin/pip install -q --no-deps --no-build-isolation -e /tmp/base \\
        --config-settings editable_mode=strict
    .venv/bin/python benchmarks/records_identity.py --base-python /tmp/base/.venv/bin/python \\
        --workdir /tmp/records-identity

A version's outputs already in ``--workdir`` are reused (``--fresh`` reruns them), so the base can be
run once and the head as often as it changes. Exit 0 when every file is identical, 1 with the
differences listed.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

PHEME = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "pheme" / "pheme_clean.json"
MASK = "<masked>"

DP_CONFIG = """\
[target]
learner = "dp-cgs"
vocabulary = "all"
"""


def audit_inputs(directory: Path, pheme: Path) -> list[str]:
    """The audit's inputs, written once and shared by both versions (their paths are in audit.json)."""
    directory.mkdir(parents=True, exist_ok=True)
    texts = json.loads(pheme.read_text(encoding="utf-8"))["text"][:1200]
    counts = Counter(word for text in texts for word in text.split())
    words = sorted(word for word, _ in counts.most_common(300))
    phi = np.random.default_rng(34).dirichlet(np.full(len(words), 0.1), size=5)
    np.save(directory / "phi.npy", phi)
    (directory / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    (directory / "cand.json").write_text(json.dumps({"text": texts[:200]}), encoding="utf-8")
    (directory / "ref.json").write_text(json.dumps({"text": texts[200:600]}), encoding="utf-8")
    return [str(directory / "phi.npy"), "--vocabulary", str(directory / "vocab.txt"),
            "--candidates", str(directory / "cand.json"), "--reference", str(directory / "ref.json"),
            "--no-preprocess", "--shadows", "4", "--seed", "3"]


def commands(out: Path, inputs: Path, pheme: Path) -> dict[str, list[list[str]]]:
    """Each scenario's commands (arguments after ``topicaudit``), writing under ``out``."""
    (out / "dp.toml").write_text(DP_CONFIG, encoding="utf-8")
    return {
        "demo": [["run", "--shadows", "8", "--output", str(out / "demo")],
                 ["check", str(out / "demo"), "--epsilon", "1", "--json", str(out / "demo-check.json")]],
        "dp": [["run", str(out / "dp.toml"), "--corpus", str(pheme), "--no-preprocess", "--shadows", "0",
                "--canaries", "500", "--output", str(out / "dp")],
               ["check", str(out / "dp"), "--json", str(out / "dp-check.json")]],
        "audit": [["audit", *audit_inputs(inputs, pheme), "--output", str(out / "audit")]],
    }


FILES = {"demo": ["demo/results.json", "demo-check.json"], "dp": ["dp/results.json", "dp-check.json"],
         "audit": ["audit/audit.json"]}


def run_version(python: Path, out: Path, inputs: Path, pheme: Path, fresh: bool) -> dict[str, str]:
    """Run every scenario with one install; the standard output of each command, by scenario."""
    script = python.parent / "topicaudit"
    out.mkdir(parents=True, exist_ok=True)
    printed: dict[str, str] = {}
    for scenario, steps in commands(out, inputs, pheme).items():
        log = out / f"{scenario}.stdout"
        if not fresh and log.exists() and all((out / name).exists() for name in FILES[scenario]):
            printed[scenario] = log.read_text(encoding="utf-8")
            continue
        for name in FILES[scenario]:
            target = out / name
            shutil.rmtree(target.parent) if target.parent != out and target.parent.exists() else None
            target.unlink(missing_ok=True)
        text = ""
        for args in steps:
            print(f"[{out.name}] topicaudit {' '.join(args)}", file=sys.stderr, flush=True)
            done = subprocess.run([str(script), *args, "--num-cpus", "2"] if args[0] in ("run", "audit") else
                                  [str(script), *args], capture_output=True, text=True,
                                  env={**os.environ, "PYTHONHASHSEED": "0"})
            if done.returncode not in (0, 1):  # check exits 1 on a violated claim
                raise SystemExit(f"{script} {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            text += done.stdout
        log.write_text(text, encoding="utf-8")
        printed[scenario] = text
    return printed


def serialise(name: str, data) -> str:
    """The file's text as its command writes it."""
    return json.dumps(data, indent=2, ensure_ascii=not name.endswith("audit.json")) + "\n"


def masked(name: str, raw: str, root: Path) -> tuple[str, list[str]]:
    """The file's text with what differs by nature masked; and its problems (a layout this script cannot
    reproduce would hide differences, so it is one)."""
    data = json.loads(raw)
    problems = [] if serialise(name, data) == raw else [f"{name}: not in the layout its command writes"]
    if isinstance(data, dict):
        if "timings_s" in data:
            data["timings_s"] = MASK
        if "ray" in data:
            data["ray"] = MASK
        if isinstance(data.get("versions"), dict) and "topicaudit_source" in data["versions"]:
            data["versions"]["topicaudit_source"] = MASK
    text = serialise(name, data)
    for form in (str(root), json.dumps(str(root))[1:-1]):
        text = text.replace(form, "<out>")
    return text, problems


def masked_summary(text: str, root: Path) -> str:
    text = text.replace(str(root), "<out>")
    return re.sub(r"wall time [^\n]*", "wall time <masked>", text)


def compare(base: Path, head: Path, printed: dict[str, dict[str, str]]) -> list[str]:
    problems: list[str] = []
    for scenario, names in FILES.items():
        for name in names:
            a, a_problems = masked(name, (base / name).read_text(encoding="utf-8"), base)
            b, b_problems = masked(name, (head / name).read_text(encoding="utf-8"), head)
            problems += [f"base {p}" for p in a_problems] + [f"head {p}" for p in b_problems]
            if a != b:
                diff = "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), "base/" + name,
                                                    "head/" + name, n=1))
                problems.append(f"{name} differs:\n{diff[:4000]}")
            else:
                print(f"identical: {name} ({len(a.encode())} bytes compared, masked: timings_s, ray, "
                      "versions.topicaudit_source, the output directory's path)")
        a, b = (masked_summary(printed[v][scenario], root) for v, root in (("base", base), ("head", head)))
        if a != b:
            diff = "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), "base", "head", n=1))
            problems.append(f"{scenario}: printed output differs:\n{diff[:4000]}")
        else:
            print(f"identical: {scenario}'s printed output ({len(a.splitlines())} lines)")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base-python", type=Path, required=True, help="the base install's interpreter")
    parser.add_argument("--head-python", type=Path, default=Path(sys.executable),
                        help="this tree's interpreter (default: the one running this script)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/records-identity"))
    parser.add_argument("--pheme", type=Path, default=PHEME.resolve())
    parser.add_argument("--fresh", action="store_true", help="rerun both versions even if their outputs exist")
    parser.add_argument("--only", choices=("base", "head"), help="run one version and compare nothing")
    args = parser.parse_args()
    work = args.workdir.resolve()
    inputs = work / "inputs"
    printed = {}
    for version, python in (("base", args.base_python), ("head", args.head_python)):
        if args.only in (None, version):
            printed[version] = run_version(python, work / version, inputs, args.pheme, args.fresh)
    if args.only:
        return 0
    problems = compare(work / "base", work / "head", printed)
    for problem in problems:
        print(problem)
    print("IDENTICAL" if not problems else f"{len(problems)} DIFFERENCE(S)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
