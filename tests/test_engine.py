"""End-to-end audits on small corpora with real Ray: files, determinism, resume, an unreachable cluster."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import ray

from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.engine.storage import manifest

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")

VENV_BIN = Path(sys.executable).parent


def load_scores(run_dir):
    with np.load(Path(run_dir) / "scores.npz") as z:
        return {k: z[k] for k in z.files}


def test_run_directory_holds_every_artefact(finished_run):
    config, results = finished_run
    run_dir = config.run_dir
    for name in ("config.toml", "plan.npz", "statistics.npz", "scores.npz", "results.json",
                 "models/target.npz"):
        assert (run_dir / name).exists(), name
    assert len(list((run_dir / "models").glob("shadow-*.npz"))) == 8
    assert json.loads((run_dir / "results.json").read_text()) == results
    assert results["schema"] == "topicaudit.results/1"
    assert set(results) >= {"corpus", "target", "shadows", "attacks", "seeds", "versions", "timings_s", "config_hash"}
    assert results["shadows"]["in_per_document"] == 4
    assert results["statistics"]["max_zeta_gap"] <= 1e-8
    with np.load(run_dir / "models" / "target.npz") as z:
        assert z["phi"].dtype == np.float32
        np.testing.assert_allclose(z["phi"].sum(axis=1), 1.0, rtol=1e-5)


def test_scores_agree_with_metrics_and_the_attack_beats_chance(finished_run):
    from topicaudit.attacks.metrics import summarize

    config, results = finished_run
    scores = load_scores(config.run_dir)
    for name, metrics in results["attacks"].items():
        assert summarize(scores[name], scores["is_member"]) == metrics
    # synthetic LDA documents with rare words do leak
    assert results["attacks"]["lira_online"]["auc"] > 0.6


def test_same_configuration_gives_identical_numbers(tmp_path, finished_run, small_config):
    config, results = finished_run
    again = small_config(tmp_path, "again")
    second = execute_run(again, quiet=True)
    assert second["attacks"] == results["attacks"]
    first_scores, second_scores = load_scores(config.run_dir), load_scores(again.run_dir)
    for name in first_scores:
        np.testing.assert_array_equal(first_scores[name], second_scores[name])


def test_interrupted_run_resumes_without_refitting(tmp_path, finished_run, small_config):
    reference, reference_results = finished_run
    run_dir = tmp_path / "interrupted"
    config_file = tmp_path / "small.toml"
    config_file.write_text(
        "[synthetic]\nn_docs = 300\nn_words = 1000\nmean_length = 40\n"
        "[attack]\nshadows = 8\n[target]\nk = 4\n[ray]\nnum_cpus = 1\n"
    )
    # Every fit in a worker, one at a time: the driver would fit all eight while Ray starts, and save them at once.
    proc = subprocess.Popen([str(VENV_BIN / "topicaudit"), "run", str(config_file), "--output", str(run_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "TOPICAUDIT_DRIVER_FITS": "0"})
    deadline = time.time() + 120
    while time.time() < deadline and len(list((run_dir / "models").glob("shadow-*.npz"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # A model the kill caught between its file and its manifest entry is refitted, by design: only listed ones survive.
    listed = manifest.entries(run_dir) or {}
    survivors = {p.name: p.stat().st_mtime_ns for p in (run_dir / "models").glob("shadow-*.npz")
                 if f"models/{p.name}" in listed}
    assert 2 <= len(survivors) < 8 and not (run_dir / "results.json").exists()

    resumed = execute_run(small_config(tmp_path, "interrupted", ray={"num_cpus": 1}), quiet=True)
    assert resumed["resumed"] is True
    for name, mtime in survivors.items():
        assert (run_dir / "models" / name).stat().st_mtime_ns == mtime, f"{name} was refitted"
    assert resumed["attacks"] == reference_results["attacks"]
    for name, values in load_scores(reference.run_dir).items():
        np.testing.assert_array_equal(values, load_scores(run_dir)[name])


def test_a_run_joins_the_callers_ray_and_leaves_it_running(tmp_path, small_config):
    """A Ray the caller initialised (here the session's shared instance) is used as it is, and not stopped after."""
    node = ray.get_runtime_context().get_node_id()
    results = execute_run(small_config(tmp_path, "joined", synthetic={"n_docs": 60, "n_words": 200},
                                       attack={"shadows": 2}), quiet=True)
    assert ray.is_initialized() and ray.get_runtime_context().get_node_id() == node
    assert results["ray"]["models_by_node"] == {node: 3}  # the target and both shadows, fitted on its node


def test_a_different_configuration_cannot_reuse_the_directory(finished_run, small_config):
    from topicaudit.errors import UserError

    config, _ = finished_run
    changed = small_config(config.run_dir.parent, config.run_dir.name, seed=1)
    with pytest.raises(UserError, match="different configuration"):
        execute_run(changed, quiet=True)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_learner_refusing_the_data_is_a_user_error_and_leaves_no_directory(tmp_path, small_config):
    from topicaudit.errors import UserError

    config = small_config(tmp_path, "too-large", target={"learner": "lppf", "vocabulary": "all",
                                                          "params": {"epsilon": 1.0, "max_cells": 1000}})
    with pytest.raises(UserError, match=r"LocallyPrivatePoissonFactorization.*too large.*max_words"):
        execute_run(config, quiet=True)
    assert not config.run_dir.exists()


def test_an_unreachable_cluster_is_a_user_error(tmp_path, small_config, own_ray):
    from topicaudit.errors import UserError

    config = small_config(tmp_path, "nowhere", ray={"address": f"127.0.0.1:{_free_port()}"})
    with pytest.raises(UserError, match="nothing is listening"):
        execute_run(config, quiet=True)
    assert not config.run_dir.exists()


def _pheme_config(tmp_path, pheme_path, shadows: int, seed: int):
    """The paper's corpus (already cleaned) and learner (k = 5) with this many shadows."""
    return config_from_dict({"corpus": {"path": str(pheme_path), "preprocess": False}, "target": {"k": 5},
                             "attack": {"shadows": shadows}, "seed": seed, "output": str(tmp_path / "pheme")})


def _assert_the_papers_corpus(results) -> None:
    assert results["corpus"]["n_docs"] == 5698
    assert 4000 < results["target"]["vocabulary_size"] < 4500   # the paper's code: 4,203


def test_real_pheme_audit_with_four_shadows(tmp_path, pheme_path):
    """The paper's corpus and learner with 4 shadows, the default suite's real-data audit (16: marked slow).

    With this few shadows the few-model attacks (docs/attacks.md) are the ones that see the leak.
    """
    config = _pheme_config(tmp_path, pheme_path, shadows=4, seed=0)
    results = execute_run(config, quiet=True)
    _assert_the_papers_corpus(results)
    attacks = results["attacks"]
    assert attacks["lira_offline_shrunk"]["auc"] > 0.70
    assert attacks["rmia_online"]["auc"] > 0.68
    assert attacks["lira_offline_global"]["tpr_at_fpr_0.01"] > 0.08     # 8x the FPR
    assert results["statistics"]["max_zeta_gap"] <= 1e-8


@pytest.mark.slow
def test_real_pheme_audit_with_few_shadows_finds_members(tmp_path, pheme_path):
    """The paper's corpus and learner, 16 shadows: the leak is already visible."""
    config = _pheme_config(tmp_path, pheme_path, shadows=16, seed=0)
    results = execute_run(config, quiet=True)
    _assert_the_papers_corpus(results)
    attacks = results["attacks"]
    assert attacks["lira_online"]["auc"] > 0.68
    assert attacks["lira_offline"]["auc"] > 0.68
    assert attacks["lira_online"]["tpr_at_fpr_0.01"] > 0.08     # 8x the FPR
    assert results["statistics"]["max_zeta_gap"] <= 1e-8


@pytest.mark.slow
def test_real_pheme_audit_reproduces_the_paper(tmp_path, pheme_path):
    """The paper's setting (k=5, N=128): online TPR at 0.1% FPR near 12.8%, AUC near 0.76."""
    config = _pheme_config(tmp_path, pheme_path, shadows=128, seed=2)
    attacks = execute_run(config, quiet=True)["attacks"]
    assert attacks["lira_online"]["auc"] > 0.74
    assert attacks["lira_online"]["tpr_at_fpr_0.001"] > 0.08
    assert attacks["lira_offline"]["auc"] > 0.76


def _write_json_corpus(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = [f"w{i:03d}" for i in range(300)]
    path.write_text(json.dumps({"text": [" ".join(rng.choice(words, size=30)) for _ in range(200)]}))


def test_resume_follows_the_corpus_content_not_its_spelling_or_the_working_directory(tmp_path, monkeypatch):
    """The same audit resumes from another directory with the path spelled another way; other content is refused.

    A canary-only audit (no shadow models, no Ray) keeps this fast: its canary release is the saved model.
    """
    from topicaudit.errors import UserError

    data = tmp_path / "data"
    data.mkdir()
    _write_json_corpus(data / "corpus.json", seed=0)
    output = tmp_path / "run"

    def config(path):
        return config_from_dict({"corpus": {"path": path, "preprocess": False}, "target": {"k": 3},
                                 "attack": {"shadows": 0, "canaries": {"count": 20}}, "output": str(output)})

    monkeypatch.chdir(tmp_path)
    first = execute_run(config("./data/corpus.json"), quiet=True)
    model = output / "models" / "canary-target.npz"
    fitted_at = model.stat().st_mtime_ns
    monkeypatch.chdir(data)
    again = execute_run(config("../data/../data/corpus.json"), quiet=True)
    assert again["resumed"] is True and again["config_hash"] == first["config_hash"]
    assert model.stat().st_mtime_ns == fitted_at, "the canary release was refitted"
    assert again["canaries"]["epsilon_lower_bounds"] == first["canaries"]["epsilon_lower_bounds"]

    _write_json_corpus(data / "corpus.json", seed=1)  # same path, other documents
    with pytest.raises(UserError, match="different configuration"):
        execute_run(config("corpus.json"), quiet=True)


def test_warnings_raised_in_ray_workers_reach_the_results_and_the_summary(tmp_path, small_config):
    """A ζ tolerance no solver can certify makes every statistics task warn, inside Ray workers."""
    from topicaudit.engine.presentation.summary import summary_table

    config = small_config(tmp_path, "warn", synthetic={"n_docs": 60, "n_words": 200},
                          attack={"shadows": 2, "tol": 1e-300})
    results = execute_run(config, quiet=True)
    assert any("solve_zeta" in message and "gap > tol" in message for message in results["warnings"])
    saved = json.loads((config.run_dir / "results.json").read_text())
    assert saved["warnings"] == results["warnings"]
    assert "warning from a Ray worker: RuntimeWarning: solve_zeta" in summary_table(results)
