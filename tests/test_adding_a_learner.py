"""docs/adding-a-learner.md runs as written: its package is written out of the page, installed with pip, and its
tests and commands run, with the outcomes and exit codes the page shows.

The page's files are the blocks whose info string names a path under ``dpem-topics/``; they must equal
tests/packages/dpem-topics, the same package kept in the repository (the benchmarks install it from there). The
page's console blocks are run line by line in the package's directory: ``pip install ./dpem-topics`` by this
module's install (the same pip, into a directory of its own, offline: ``--no-deps --no-build-isolation``, the
dependencies being this environment's), ``pytest`` and ``topicaudit`` as the environment's own, with that
directory on PYTHONPATH. A command's documented exit code is its ``# exit N`` comment (0 without one); a
``topicaudit`` command's last line (the verdict, with its bounds) and pytest's count of passed tests must be the
page's.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.attacks import mechanism as scoring
from topicaudit.attacks.canaries import make_canaries
from topicaudit.engine.check import check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.mechanisms import MECHANISMS, Recorder

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "adding-a-learner.md"
PACKAGE = ROOT / "tests" / "packages" / "dpem-topics"
FILE_BLOCK = re.compile(r"^```\w+ dpem-topics/(\S+)\n(.*?)^```$", re.S | re.M)
CONSOLE_BLOCK = re.compile(r"^```console\n(.*?)^```$", re.S | re.M)
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def page_files() -> dict[str, str]:
    return {path: text for path, text in FILE_BLOCK.findall(DOC.read_text())}


def console_lines() -> list[tuple[str, list[str]]]:
    """Each ``$`` command of the page's console blocks, in order, with the output lines the page shows after it."""
    found: list[tuple[str, list[str]]] = []
    for block in CONSOLE_BLOCK.findall(DOC.read_text()):
        for line in block.splitlines():
            if line.startswith("$ "):
                found.append((line[2:], []))
            elif found:
                found[-1][1].append(line)
    return found


def cache_key_hidden(line: str) -> str:
    """A verdict line with its run-cache directory reduced to the run's name: the cache's place differs between
    machines, and its key changes with topicaudit's own source."""
    return re.sub(r"\[/[^\]]*/runs/([\w.-]+)-[0-9a-f]{16}\]", r"[<cache>/runs/\1-<key>]", line)


def documented_exit(command: str) -> int:
    found = re.search(r"#\s*exit (\d)", command)
    return int(found.group(1)) if found else 0


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The page's package written out of the page, installed with pip into a directory of its own."""
    root = tmp_path_factory.mktemp("user-project")
    for path, text in page_files().items():
        (root / "dpem-topics" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "dpem-topics" / path).write_text(text)
    site = root / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(site), str(root / "dpem-topics")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    sys.path.insert(0, str(site))
    yield root, site, env
    sys.path.remove(str(site))
    for name in [n for n in sys.modules if n == "dpem_topics" or n.startswith("dpem_topics.")]:
        del sys.modules[name]


def run_line(command: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """One of the page's commands, as this environment runs it."""
    words = shlex.split(command.split("  #")[0])
    program = {"pytest": [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
               "topicaudit": [str(Path(sys.executable).with_name("topicaudit"))]}[words[0]]
    return subprocess.run(program + words[1:], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_page_shows_the_package_as_it_is_kept():
    kept = {str(p.relative_to(PACKAGE)): p.read_text() for p in sorted(PACKAGE.rglob("*"))
            if p.is_file() and not {"__pycache__", "build"} & set(p.parts) and ".egg-info" not in str(p)}
    assert page_files() == kept


def test_the_packages_ci_and_the_page_commands_give_what_the_page_shows(project):
    """pip install, the package's pytest module (the conformance suite, the record mismatch caught, the claim held
    by the audit, both planted bugs VIOLATED), then `topicaudit check` green and the halved noise red."""
    root, _, env = project
    cwd = root
    lines = console_lines()
    assert [c.split()[0] for c, _ in lines] == ["pip", "cd", "pytest", "topicaudit", "topicaudit", "topicaudit"]
    for command, shown in lines:
        if command == "pip install ./dpem-topics":
            continue  # the module's install, into its own directory
        if command.startswith("cd "):
            cwd = cwd / command[3:]
            continue
        done = run_line(command, cwd, env)
        out = done.stdout.strip().splitlines()
        assert done.returncode == documented_exit(command), (command, done.stdout[-3000:], done.stderr[-3000:])
        if command.startswith("pytest"):
            passed = re.search(r"(\d+) passed", shown[-1]).group(1)
            assert re.search(rf"\b{passed} passed\b", out[-1]) and "failed" not in out[-1], done.stdout[-3000:]
        else:  # the verdict's line as the page shows it, to the last digit (the audit is seeded)
            assert out and cache_key_hidden(out[-1]) == cache_key_hidden(shown[-1]), (command, done.stdout, shown)
    verdict = json.loads((cwd / "runs" / "halved-noise" / "check.json").read_text())
    assert verdict["verdict"] == "VIOLATED"


def test_the_installed_learner_fits_in_ray_workers_and_is_recorded_with_its_version(project, shared_ray, tmp_path,
                                                                                     monkeypatch):
    """The package's directory is on the driver's sys.path only (workers started before it existed do not see it):
    the pipeline shipped to them carries it. Named by its entry point, recorded with the distribution's version."""
    import topicaudit

    monkeypatch.setenv("TOPICAUDIT_DRIVER_FITS", "0")  # every fit in a worker
    results = topicaudit.run({"synthetic": {"n_docs": 120, "n_words": 200, "mean_length": 30},
                              "target": {"learner": "dpem", "k": 3, "params": {"n_iter": 3}},
                              "attack": {"shadows": 2}, "ray": {"num_cpus": 2}, "output": str(tmp_path / "run")})
    assert results["ray"]["fitted_in_driver"] == 0 and sum(results["ray"]["models_by_node"].values()) == 3
    recorded = dict(results["target"]["learner_source"])
    assert len(recorded.pop("source_sha256")) == 64  # the installed code's digest: its version does not follow it
    assert recorded == {"class": "dpem_topics:DPEMTopics", "distribution": "dpem-topics", "version": "0.1.0"}


def test_check_learner_fails_the_record_mismatch_naming_its_release(project):
    from dpem_topics.planted import RecordMismatch

    from topicaudit.testing import check_learner

    with pytest.raises(AssertionError) as failed:
        check_learner(RecordMismatch(k=3, epsilon=1.0, n_iter=5), checks=["record used"])
    shown = re.search(r"^(check_learner: RecordMismatch.*?) \(…\)$", DOC.read_text(), re.M).group(1)
    assert str(failed.value).startswith(shown)
    assert "the recorded subsampled-gaussian-steps release" in str(failed.value)


@pytest.fixture
def new_kind(tmp_path, monkeypatch):
    """The page's new kind of release (section 7) as a module of a package of the user's, and a learner recording
    it; both forgotten afterwards, as a process that never imported them would not know them."""
    block = next(b for b in PYTHON_BLOCK.findall(DOC.read_text()) if "class DiscreteGaussianNoise" in b)
    (tmp_path / "pagekind.py").write_text(block)
    (tmp_path / "pagekind_learner.py").write_text(LEARNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    scorers = list(scoring.SCORERS)
    import pagekind

    yield pagekind
    forget_new_kind(scorers)


def forget_new_kind(scorers) -> None:
    scoring.SCORERS[:] = scorers
    MECHANISMS.pop("discrete-gaussian-counts", None)
    for name in ("pagekind", "pagekind_learner"):
        sys.modules.pop(name, None)


LEARNER = '''"""A learner recording the page's new kind: each topic's counts over a random split, noised once."""
import numpy as np

from pagekind import DiscreteGaussianNoise
from topicaudit.mechanisms import Recorder
from topicaudit.targets.base import Adjacency, Basis, Guarantee


class SplitCounts:
    def __init__(self, k, sigma=20.0, cap=8):
        self.k, self.sigma, self.cap = k, sigma, cap

    def mechanism(self):
        return DiscreteGaussianNoise(self.sigma, self.cap)

    def guarantee(self):
        return Guarantee(epsilon=3.0, delta=1e-5, adjacency=Adjacency.DOCUMENT, basis=Basis.PAPER_CLAIM)

    def fit(self, X, seed, record=None):
        record = Recorder() if record is None else record
        rng = np.random.default_rng(seed)
        X = X.copy()
        X.data = np.minimum(X.data, self.cap)
        topic = rng.integers(self.k, size=X.shape[0])
        counts = np.vstack([np.asarray(X[topic == t].sum(axis=0)).ravel() for t in range(self.k)])
        noisy = record.release(self.mechanism(), counts + np.round(rng.normal(0.0, self.sigma, counts.shape)))
        phi = np.maximum(noisy, 0.0) + 0.1
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)
'''


@pytest.mark.parametrize("kind", ["unique-word", "paired"])
def test_the_pages_new_kind_of_release_scores_as_computed_by_hand(new_kind, kind):
    X = sp.csr_matrix(np.random.default_rng(0).integers(0, 3, (20, 12)).astype(np.float64))
    canaries = make_canaries(X, 6, kind, 5, seed=0)
    columns = canaries.observed_columns
    noisy = np.random.default_rng(1).normal(0.0, 4.0, (3, canaries.n_columns + canaries.count)).round()
    record = Recorder(columns[:-1])  # the last canary's column not observed: it scores 0
    assert record.release(new_kind.DiscreteGaussianNoise(sigma=4.0, document_tokens=2), noisy) is noisy
    scores = scoring.mechanism_scores(record.transcript(), canaries)["mechanism"]

    def by_hand(word):
        if word not in columns[:-1]:
            return 0.0
        return math.log(sum(math.exp((2 * noisy[t, word] - 2) / 16.0) for t in range(3)) / 3)

    tails = canaries.alternate_words if kind == "paired" else [None] * canaries.count
    want = [by_hand(w) - (by_hand(a) if a is not None else 0.0) for w, a in zip(canaries.words, tails)]
    np.testing.assert_allclose(scores, want, rtol=1e-12)
    simulated = scoring.simulate_score_sets(new_kind.DiscreteGaussianNoise(4.0, 2), canaries.coins, 5, 2.0,
                                            np.random.default_rng(2), paired=kind == "paired", k=3)
    assert simulated["mechanism"].shape == (canaries.count,)


def test_a_plug_in_kind_is_audited_and_checked_in_a_process_that_never_imported_it(new_kind, tmp_path,
                                                                                    short_power_search):
    """A fresh `check` of the run imports the recorded plug-in's module: the kind and its scorer come back, and so
    does the verdict's power estimate."""
    scorers = list(scoring.SCORERS)
    config = config_from_dict({"synthetic": {"n_docs": 200, "n_words": 300}, "target": {
        "learner": "pagekind_learner:SplitCounts", "k": 3}, "attack": {"shadows": 0, "canaries": {"count": 300}},
        "output": str(tmp_path / "run")})
    results = execute_run(config, quiet=True)
    assert results["canaries"]["mechanism"]["kind"] == "discrete-gaussian-counts"
    forget_new_kind(scorers[1:])  # neither the class, nor its scorer, nor the modules
    assert "discrete-gaussian-counts" not in MECHANISMS
    verdict = check_run(tmp_path / "run")
    assert verdict.power is not None and not any("unknown release kind" in note for note in verdict.unseen)
    assert "discrete-gaussian-counts" in MECHANISMS
