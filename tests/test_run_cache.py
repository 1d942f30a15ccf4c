"""The run cache of `check CONFIG`, assert_privacy and the fixture: an unchanged audit is reused without refitting,
and a change to the configuration, an input's content or the learner's code (its version, or its files) refits.

Canary-only audits (one fit in this process, no Ray) keep these fast; the finished-run fast path is checked on a
run with shadow models too.
"""
from __future__ import annotations

import json
import shutil
import sys
import time

import numpy as np
import pytest

from plugin_package import write_package
from topicaudit.cli.main import main
from topicaudit.engine.check import assert_privacy
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.engine.storage.run_cache import cache_key, cached_run_dir, resolve_root
from topicaudit.errors import UserError

CANARY_ONLY = {"synthetic": {"n_docs": 150, "n_words": 250}, "target": {"k": 3},
               "attack": {"shadows": 0, "canaries": {"count": 60}}}
# A claim these audits never refute: above the ceiling of 60 canaries (ε ≈ 2.2: no outcome proves more), and
# near it, so the verdict's search for a count that could refute it stops at a few thousand canaries (ε = 50 made
# every new process search to a million, ~10 CPU-s).
CLAIM = 5

LEARNER = '''"""A plug-in learner kept as one file, not installed as a distribution."""
import numpy as np

from topicaudit.targets.base import NO_GUARANTEE


class Counts:
    def __init__(self, k, smoothing=0.5):
        self.k, self.smoothing = k, smoothing

    def fit(self, X, seed):
        topic = np.random.default_rng(seed).integers(self.k, size=X.shape[0])
        counts = np.vstack([np.asarray(X[topic == t].sum(axis=0)).ravel() for t in range(self.k)])
        phi = counts + self.smoothing
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self):
        return NO_GUARANTEE
'''


def only_dir(root):
    found = [p for p in root.iterdir() if p.is_dir()]
    assert len(found) == 1, found
    return found[0]


def fitted_at(run_dir):
    return (run_dir / "models" / "canary-target.npz").stat().st_mtime_ns


def test_check_config_keeps_its_run_in_the_cache_and_reuses_it_unchanged(tmp_path, capsys):
    config = tmp_path / "audit.toml"
    config.write_text("[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nk = 3\n"
                      "[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    cache = tmp_path / "cache"
    assert main(["check", str(config), "--epsilon", "0.01", "--cache", str(cache)]) == 1
    first = capsys.readouterr()
    run_dir = only_dir(cache)
    assert run_dir.name.startswith("demo-lda-k3-s0-") and f"[{run_dir}]" in first.out
    fitted, results = fitted_at(run_dir), (run_dir / "results.json").read_bytes()

    started = time.perf_counter()
    assert main(["check", str(config), "--epsilon", "0.01", "--cache", str(cache)]) == 1
    seconds = time.perf_counter() - started
    second = capsys.readouterr()
    assert second.out == first.out  # the same verdict line
    assert f"reusing {run_dir}" in second.err and "nothing refitted or rescored" in second.err
    assert fitted_at(run_dir) == fitted and (run_dir / "results.json").read_bytes() == results
    assert seconds < 5, seconds

    # another seed is another audit: a second entry, fitted
    config.write_text(config.read_text().replace("[synthetic]", "seed = 1\n[synthetic]"))
    assert main(["check", str(config), "--epsilon", "0.01", "--cache", str(cache)]) == 1
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2


def test_a_changed_corpus_is_refitted_in_a_new_entry_not_refused(tmp_path):
    corpus = tmp_path / "corpus.json"
    words = [f"w{i:03d}" for i in range(200)]

    def write(seed):
        rng = np.random.default_rng(seed)
        corpus.write_text(json.dumps({"text": [" ".join(rng.choice(words, size=25)) for _ in range(150)]}))

    write(0)
    settings = {"corpus": {"path": str(corpus), "preprocess": False}, "target": {"k": 3},
                "attack": {"shadows": 0, "canaries": {"count": 40}}}
    cache = tmp_path / "cache"
    first = assert_privacy(settings, epsilon=CLAIM, cache=cache)
    write(1)  # the same path, other documents
    second = assert_privacy(settings, epsilon=CLAIM, cache=cache)
    assert first.run_dir != second.run_dir and not (second.run_dir / "results.json").read_text() == \
        (first.run_dir / "results.json").read_text()


def test_editing_a_plug_in_learners_file_refits_and_an_unchanged_one_is_reused(tmp_path, monkeypatch):
    """A learner that is not an installed distribution is identified by its source files' digest."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "ourlearner.py").write_text(LEARNER)
    monkeypatch.syspath_prepend(str(site))
    settings = {**CANARY_ONLY, "target": {"k": 3, "learner": "ourlearner:Counts"}}
    cache = tmp_path / "cache"
    try:
        first = assert_privacy(settings, epsilon=CLAIM, cache=cache)
        source = json.loads((first.run_dir / "results.json").read_text())["target"]["learner_source"]
        assert source["class"] == "ourlearner:Counts" and len(source["source_sha256"]) == 64
        fitted = fitted_at(first.run_dir)
        assert assert_privacy(settings, epsilon=CLAIM, cache=cache).run_dir == first.run_dir
        assert fitted_at(first.run_dir) == fitted  # unchanged: reused

        (site / "ourlearner.py").write_text(LEARNER.replace("phi = counts + self.smoothing",
                                                            "phi = counts + 2 * self.smoothing"))
        changed = assert_privacy(settings, epsilon=CLAIM, cache=cache)
        assert changed.run_dir != first.run_dir and (changed.run_dir / "models" / "canary-target.npz").exists()
    finally:
        sys.modules.pop("ourlearner", None)


def test_another_version_of_a_plug_in_distribution_refits(tmp_path, monkeypatch):
    site = write_package(tmp_path / "site", version="0.3")
    monkeypatch.syspath_prepend(str(site))
    settings = {**CANARY_ONLY, "target": {"k": 3, "learner": "split-counts"}}
    cache = tmp_path / "cache"
    try:
        first = assert_privacy(settings, epsilon=CLAIM, cache=cache)
        assert assert_privacy(settings, epsilon=CLAIM, cache=cache).run_dir == first.run_dir
        shutil.move(site / "tinytopics-0.3.dist-info", site / "tinytopics-0.4.dist-info")
        (site / "tinytopics-0.4.dist-info" / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: tinytopics\nVersion: 0.4\n")
        upgraded = assert_privacy(settings, epsilon=CLAIM, cache=cache)
        assert upgraded.run_dir != first.run_dir
        recorded = json.loads((upgraded.run_dir / "results.json").read_text())["target"]["learner_source"]
        assert recorded["version"] == "0.4" and len(recorded["source_sha256"]) == 64  # the version and the code
    finally:
        for name in [n for n in sys.modules if n == "tinytopics" or n.startswith("tinytopics.")]:
            del sys.modules[name]


def test_the_key_follows_the_code_and_content_not_the_spelling_of_paths(tmp_path, monkeypatch):
    corpus = tmp_path / "c.json"
    corpus.write_text(json.dumps({"text": ["a b c"] * 30}))
    monkeypatch.chdir(tmp_path)
    one = config_from_dict({"corpus": {"path": "c.json"}})
    two = config_from_dict({"corpus": {"path": str(tmp_path / "." / "c.json")}})
    assert cache_key(one) == cache_key(two)
    assert cached_run_dir(one, tmp_path) == cached_run_dir(two, tmp_path)
    key = cache_key(one)
    assert set(key["code"]) >= {"topicaudit", "source", "versions"} and "ray" not in key["code"]["versions"]
    before = cached_run_dir(one, tmp_path)
    monkeypatch.setattr("topicaudit.engine.storage.run_cache.source_digest", lambda: "topicaudit edited")
    assert cached_run_dir(one, tmp_path) != before  # an edit to topicaudit itself is another entry
    corpus.write_text(json.dumps({"text": ["a b d"] * 30}))
    assert cache_key(one)["inputs"] != key["inputs"]


def test_cache_locations_and_refusals(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOPICAUDIT_CACHE_DIR", str(tmp_path / "base"))
    assert resolve_root(None) == tmp_path / "base" / "runs"
    assert resolve_root(False) is None and resolve_root("off") is None
    monkeypatch.setenv("TOPICAUDIT_CACHE_DIR", "off")
    assert resolve_root(None) is None
    config = tmp_path / "a.toml"
    config.write_text("[attack]\nshadows = 0\n[attack.canaries]\ncount = 40\n")
    assert main(["check", str(config), "--epsilon", "1", "--cache", "x", "--output", "y"]) == 2
    assert "give one" in capsys.readouterr().err
    assert main(["check", str(tmp_path), "--cache", "x"]) == 2
    err = capsys.readouterr().err
    assert "--cache applies when TARGET is a configuration" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "file").write_text("")
    assert main(["check", str(config), "--epsilon", "1", "--cache", str(tmp_path / "file")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    with pytest.raises(UserError, match="cache must be a path"):
        assert_privacy(dict(CANARY_ONLY), epsilon=1, cache=3)


@pytest.mark.usefixtures("shared_ray")
def test_a_finished_run_is_returned_at_once_and_another_attack_list_rescored(tmp_path, small_config):
    config = small_config(tmp_path, "finished", synthetic={"n_docs": 80, "n_words": 200}, attack={"shadows": 4})
    first = execute_run(config, quiet=True)
    files = {name: (config.run_dir / name).stat().st_mtime_ns
             for name in ("results.json", "scores.npz", "statistics.npz", "manifest.json")}
    again = execute_run(small_config(tmp_path, "finished", synthetic={"n_docs": 80, "n_words": 200},
                                     attack={"shadows": 4}), quiet=True)
    assert again["resumed"] is True and again["attacks"] == first["attacks"]
    assert again["verdict"] == first["verdict"]
    assert {name: (config.run_dir / name).stat().st_mtime_ns for name in files} == files  # nothing rewritten
    # which attacks are reported is not in the config hash: another list is rescored, not returned as it stood
    fewer = execute_run(small_config(tmp_path, "finished", synthetic={"n_docs": 80, "n_words": 200},
                                     attack={"shadows": 4, "attacks": ["lira_online", "lira_offline"]}), quiet=True)
    assert set(fewer["attacks"]) == {"lira_online", "lira_offline"}
    assert (config.run_dir / "results.json").stat().st_mtime_ns != files["results.json"]


def test_the_fixture_reuses_its_cached_run(assert_privacy, tmp_path):
    """The plugin's fixture keeps its run in the cache (here the session's $TOPICAUDIT_CACHE_DIR/runs)."""
    settings = {**CANARY_ONLY, "seed": 4242}
    first = assert_privacy(settings, epsilon=CLAIM)
    assert first.run_dir.parent == resolve_root(None)
    fitted = fitted_at(first.run_dir)
    assert assert_privacy(settings, epsilon=CLAIM).run_dir == first.run_dir and fitted_at(first.run_dir) == fitted
    assert assert_privacy(settings, epsilon=CLAIM, cache=tmp_path / "own").run_dir.parent == tmp_path / "own"


def test_the_fixture_takes_its_cache_from_the_pytest_command_line(tmp_path):
    """A project's own test session: `--topicaudit-cache DIR` places the run; the second session reuses it."""
    import os
    import subprocess

    (tmp_path / "test_privacy.py").write_text(
        "def test_gate(assert_privacy):\n"
        f"    assert_privacy({CANARY_ONLY!r}, epsilon={CLAIM})\n")
    cache = tmp_path / "ci-cache"
    env = {**os.environ, "TOPICAUDIT_CACHE_DIR": "off"}  # only the option places it
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_privacy.py",
                               "--topicaudit-cache", str(cache)], cwd=tmp_path, capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        run_dir = only_dir(cache)
        if _ == 0:
            fitted = fitted_at(run_dir)
    assert fitted_at(run_dir) == fitted  # the second session refitted nothing


@pytest.mark.usefixtures("shared_ray")
def test_a_finished_run_missing_its_roc_figure_is_completed_not_returned_as_it_stands(tmp_path, small_config):
    settings = dict(synthetic={"n_docs": 80, "n_words": 200}, attack={"shadows": 4})
    config = small_config(tmp_path, "no-roc", **settings)
    execute_run(config, quiet=True)
    (config.run_dir / "roc.png").unlink()  # stopped after results.json, before the figure
    execute_run(small_config(tmp_path, "no-roc", **settings), quiet=True)
    assert (config.run_dir / "roc.png").is_file()
