"""docs/adding-a-learner.md works as written: its learner is registered, fitted and audited end to end."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from planted import matched_topic_errors, planted_corpus
from topicaudit.engine.config import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.errors import UserError
from topicaudit.targets import LEARNERS, build_target

DOC = Path(__file__).resolve().parents[1] / "docs" / "adding-a-learner.md"


@pytest.fixture
def nmf_learner(tmp_path, monkeypatch):
    """The page's module written out, importable, and registered the way the page says."""
    text = DOC.read_text()
    module = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    (tmp_path / "doc_nmf.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    line = re.search(r'^"nmf": \("topicaudit\.targets\.learners\.nmf:NMFTopics", \{\}\),$', text, re.M)
    assert line, "the page's registry line changed: update this test"
    monkeypatch.setitem(LEARNERS, "nmf", ("doc_nmf:NMFTopics", {}))
    yield
    sys.modules.pop("doc_nmf", None)


def test_the_documented_learner_recovers_planted_topics(nmf_learner):
    X, phi = planted_corpus(seed=1)
    release = build_target("nmf", 3, "all").fit(X, seed=0)
    assert release.phi.dtype == np.float32
    np.testing.assert_allclose(release.phi.sum(axis=1), 1, atol=1e-5)
    assert matched_topic_errors(release.phi, phi).max() < 0.2
    np.testing.assert_array_equal(build_target("nmf", 3, "all").fit(X, seed=0).phi, release.phi)


def test_the_documented_learner_passes_the_conformance_suite_as_the_page_runs_it(nmf_learner):
    """The page's test module, its import pointed at the page's learner module, run as written."""
    test_module = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[1]
    assert "from topicaudit.targets.nmf import NMFTopics" in test_module, "the page's test changed: update this test"
    namespace = {}
    exec(test_module.replace("topicaudit.targets.nmf", "doc_nmf"), namespace)
    namespace["test_nmf_passes_the_learner_conformance_suite"]()


def test_the_documented_learner_refuses_a_bad_parameter_by_name(nmf_learner):
    with pytest.raises(UserError, match=r"\[target.params\]: max_iter must be an integer"):
        build_target("nmf", 3, params={"max_iter": 0})


def test_the_documented_learner_is_audited_end_to_end(nmf_learner, tmp_path):
    """The page's shadow-free canary audit: no Ray, so the learner need not be importable by workers."""
    config = config_from_dict({"synthetic": {"n_docs": 200, "n_words": 300}, "target": {"learner": "nmf", "k": 3},
                               "attack": {"shadows": 0, "canaries": {"count": 100}},
                               "output": str(tmp_path / "run")})
    results = execute_run(config, quiet=True)
    assert results["target"]["learner"] == "nmf"
    assert results["target"]["guarantee"]["epsilon"] is None
    assert results["canaries"]["members"] > 0


def test_the_documented_parametrize_with_checks_runs_one_test_per_check():
    """The page's parametrize_with_checks example, every (learner, check) run as pytest would."""
    block = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[2]
    assert "parametrize_with_checks" in block, "the page's example changed: update this test"
    namespace = {}
    exec(block, namespace)
    (mark,) = namespace["test_conformance"].pytestmark
    assert len(mark.args[1]) == 20 and "ZhuDPCollapsedGibbsLDA(k=3,epsilon=2.0,n_iter=20)-canary audit" in \
        [p.id for p in mark.args[1]]
    for param in mark.args[1]:
        namespace["test_conformance"](*param.values)
