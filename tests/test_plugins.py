"""Learners from outside topicaudit: by "module:Class" path, by entry point, as objects in the Python API.

The package is ``tests/plugin_package.py``'s ``tinytopics``, written into the
test's directory with a ``.dist-info`` and put on ``sys.path`` only (never
installed): importlib.metadata finds its version and entry points there, and
Ray's workers, which do not see the driver's ``sys.path``, must still import it.
"""
from __future__ import annotations

import json
import math
import sys

import pytest

import topicaudit
from plugin_package import write_package
from topicaudit.cli.main import main
from topicaudit.engine.check import assert_privacy
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.configuration.preflight import check_claim_inputs
from topicaudit.errors import UserError
from topicaudit.targets import build_target, learner_settings
from topicaudit.targets.learners.dp_cgs import ZhuDPCollapsedGibbsLDA
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.learners.vocabulary import CorpusVocabulary, ObservedVocabulary

SMALL = {"synthetic": {"n_docs": 120, "n_words": 200, "mean_length": 30}, "target": {"k": 3},
         "ray": {"num_cpus": 2}}


@pytest.fixture
def tinytopics(tmp_path, monkeypatch):
    """The package's learners module, importable through ``sys.path`` only; forgotten afterwards."""
    monkeypatch.syspath_prepend(str(write_package(tmp_path / "site")))
    import tinytopics.learners  # on sys.path for this test only

    yield tinytopics.learners
    for name in [n for n in sys.modules if n == "tinytopics" or n.startswith("tinytopics.")]:
        del sys.modules[name]


def test_a_learner_by_path_or_entry_point_builds_and_records_its_distribution(tinytopics):
    for name in ("tinytopics.learners:SplitCounts", "split-counts"):
        target = build_target(name, 3, params={"smoothing": 0.2})
        assert isinstance(target.learner, tinytopics.SplitCounts) and target.learner.smoothing == 0.2
        assert isinstance(target.vocabulary_step, ObservedVocabulary)  # no claim: the paper's vocabulary
        identity = config_from_dict({"target": {"learner": name}}).identity()["target"]
        recorded = dict(identity["learner_source"])
        assert len(recorded.pop("source_sha256")) == 64  # the installed code's digest: its version does not follow it
        assert recorded == {"class": "tinytopics.learners:SplitCounts", "distribution": "tinytopics", "version": "0.3"}
    assert isinstance(build_target("lda", 3, "all-again").vocabulary_step, CorpusVocabulary)  # a step's entry point


@pytest.mark.parametrize("learner, message", [
    ("tinytopics.broken:Learner", "module 'tinytopics.broken' does not import (ModuleNotFoundError: No module "
                                  "named 'numpy_that_does_not_exist')"),
    ("nowhere.at_all:Learner", "module 'nowhere.at_all' does not import"),
    ("tinytopics.learners:Missing", "has no 'Missing'; its classes: NoFit, NoK, NoisySplitCounts, Renamed, "
                                    "SplitCounts, Unpicklable"),
    ("tinytopics.learners:not_a_class", "'not_a_class' is a int, not a class"),
    ("tinytopics.learners:NoFit", "NoFit is not a learner: it has no fit method"),
    ("tinytopics.learners:NoK", "NoK's constructor takes no k"),
    ("tinytopics.learners:Unpicklable", "the instance cannot be pickled (TypeError: cannot pickle '_thread.lock'"),
    ("split-count", "unknown learner 'split-count' in [target] learner (--learner); known: lda,"),
])
def test_a_learner_that_cannot_be_audited_is_refused_before_any_fit(tinytopics, tmp_path, capsys, learner, message):
    with pytest.raises(UserError) as refused:
        build_target(learner, 3)
    assert message in str(refused.value)
    config = config_from_dict({**SMALL, "target": {"learner": learner, "k": 3}, "output": str(tmp_path / "run")})
    with pytest.raises(UserError, match="learner"):
        check_claim_inputs(config, epsilon=1.0)  # check CONFIG's preflight: the same error
    code = main(["run", "--learner", learner, "--k", "3", "--shadows", "2", "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("topicaudit: error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "run").exists()


def test_a_known_name_lists_the_installed_plug_ins(tinytopics):
    with pytest.raises(UserError, match="noisy-split-counts.*\"package.module:Class\""):
        build_target("bert", 3)


def test_a_learner_claiming_epsilon_gets_the_public_vocabulary_by_default(tinytopics):
    noisy = build_target("noisy-split-counts", 3, params={"epsilon": 2.0})
    assert isinstance(noisy.vocabulary_step, CorpusVocabulary) and noisy.guarantee().epsilon == 2.0
    assert math.isinf(build_target("noisy-split-counts", 3, "observed", {"epsilon": 2.0}).guarantee().epsilon)
    assert isinstance(build_target("dp-cgs", 3, params={"epsilon": 2.0}).vocabulary_step, CorpusVocabulary)
    # "auto" is the step it stands for: a default non-DP run keeps the hash it had when "observed" was the default
    for learner, step in (("lda", "observed"), ("dp-cgs", "all"), ("noisy-split-counts", "all")):
        default, explicit = Config(), Config()
        default.target.learner = explicit.target.learner = learner
        explicit.target.vocabulary = step
        assert default.short_hash() == explicit.short_hash()
    assert Config().short_hash() == "5d2cd0"  # the demo run's directory, as recorded before "auto"


def test_a_learner_object_is_recorded_as_its_class_path_and_parameters(tinytopics):
    assert learner_settings(tinytopics.SplitCounts(k=3, smoothing=0.2)) == \
        ("tinytopics.learners:SplitCounts", 3, {"smoothing": 0.2})
    assert learner_settings(ZhuDPCollapsedGibbsLDA(4, epsilon=2.0)) == ("dp-cgs", 4, {"epsilon": 2.0})
    assert learner_settings(VariationalLDA(3, backend="sklearn", max_iter=5)) == ("sklearn-lda", 3, {"max_iter": 5})
    with pytest.raises(UserError, match=r"does not store its constructor parameter\(s\) alpha under their own names"):
        learner_settings(tinytopics.Renamed(3, alpha=0.2))
    with pytest.raises(UserError, match="cannot be pickled"):
        learner_settings(tinytopics.Unpicklable(3))
    with pytest.raises(UserError, match="is not a learner"):
        learner_settings(object())


def test_a_learner_object_runs_through_ray_resumes_and_is_identified(tinytopics, tmp_path, shared_ray, monkeypatch):
    """Shadow models fitted by Ray workers started before the package existed, which cannot see the driver's
    sys.path (without the pipeline carrying its directory they fail: No module named 'tinytopics'); resumed by
    the same object."""
    monkeypatch.setenv("TOPICAUDIT_DRIVER_FITS", "0")  # every fit in a worker
    config = config_from_dict({**SMALL, "attack": {"shadows": 2}, "output": str(tmp_path / "run")})
    learner = tinytopics.SplitCounts(k=3, smoothing=0.2)
    results = topicaudit.run(config, learner=learner)
    assert results["target"]["learner"] == "tinytopics.learners:SplitCounts"
    assert results["target"]["learner_source"]["version"] == "0.3"
    assert results["ray"]["fitted_in_driver"] == 0 and sum(results["ray"]["models_by_node"].values()) == 3
    assert not results["resumed"]
    recorded = (tmp_path / "run" / "config.toml").read_text()
    assert 'learner = "tinytopics.learners:SplitCounts"' in recorded and "smoothing = 0.2" in recorded
    assert topicaudit.run(config, learner=tinytopics.SplitCounts(k=3, smoothing=0.2))["resumed"]
    with pytest.raises(UserError, match="another configuration|other settings|different"):
        topicaudit.run(config, learner=tinytopics.SplitCounts(k=3, smoothing=0.3))


def test_assert_privacy_takes_a_learner_object_and_keeps_its_claim(tinytopics, tmp_path):
    """The false claim of NoisySplitCounts is refuted: the default public vocabulary leaves its ε claimed."""
    config = {**SMALL, "attack": {"shadows": 0, "delta": 0.0}}
    with pytest.raises(AssertionError, match="VIOLATED"):
        assert_privacy(config, canaries=300, output=tmp_path / "run",
                       learner=tinytopics.NoisySplitCounts(k=3, epsilon=1.0))
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["target"]["vocabulary_step"] == "all" and results["target"]["guarantee"]["epsilon"] == 1.0


def test_a_sweep_runs_a_plug_in_by_path(tinytopics, tmp_path):
    (tmp_path / "sweep.toml").write_text(
        '[synthetic]\nn_docs = 120\nn_words = 200\n[target]\nlearner = "tinytopics.learners:SplitCounts"\nk = 3\n'
        '[attack]\nshadows = 0\n[attack.canaries]\ncount = 100\n')
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--param", "target.params.smoothing", "--values", "0.1,1",
                 "--output", str(tmp_path / "s"), "--quiet"]) == 0
    index = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert [r["status"] for r in index["runs"]] == ["done", "done"]
