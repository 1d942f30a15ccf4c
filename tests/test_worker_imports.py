"""A Ray worker imports what its tasks need: fitting a learner (the target and its shadows, private or not) and
scoring it never loads dp-accounting (about 1 CPU-s per worker), which only the driver's guarantees use.

The worker is imitated by a fresh process that unpickles the tasks as Ray ships them (the task functions by
reference, the pipelines as objects) and runs them.
"""
from __future__ import annotations

import json
import pickle
import subprocess
import sys

import dp_accounting
import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.engine.execution.tasks import fit_and_score, fit_and_score_sharing_vocabulary, fit_release, warm_up
from topicaudit.targets import build_target, shadow_pipeline

WORKER = """
import json, pickle, sys
for function, args in pickle.loads(sys.stdin.buffer.read()):
    function(*args)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("dp_accounting", "topicaudit"))))
"""


def worker_modules(calls) -> set[str]:
    """The dp_accounting and topicaudit modules a fresh process has loaded after unpickling and running ``calls``."""
    done = subprocess.run([sys.executable, "-c", WORKER], input=pickle.dumps(calls), capture_output=True,
                          check=True)
    return set(json.loads(done.stdout))


@pytest.fixture(scope="module")
def counts() -> sp.csr_matrix:
    rng = np.random.default_rng(0)
    return sp.csr_matrix(rng.poisson(0.3, size=(40, 60)).astype(np.float64))


@pytest.mark.parametrize("vocabulary", ["observed", "all"])
def test_a_worker_fitting_lda_never_imports_dp_accounting(counts, vocabulary):
    target, shadow = build_target("lda", 3, vocabulary), shadow_pipeline("lda", 3)
    rows = np.arange(20)
    calls = [(warm_up, (target,)),
             (fit_and_score_sharing_vocabulary, (target, counts, rows, 1, None, counts, 1e-8)),
             (fit_and_score, (shadow, counts, rows + 20, 2, np.arange(60), counts, 1e-8)),
             (fit_release, (shadow, counts, rows, 3, np.arange(60)))]
    loaded = worker_modules(calls)
    assert {"topicaudit.engine.execution.tasks", "topicaudit.targets.learners.lda",
            "topicaudit.targets.learners.vocabulary"} <= loaded  # the tasks ran in the worker
    assert not {m for m in loaded if m.startswith("dp_accounting")}
    assert "topicaudit.targets.privacy.events" not in loaded


def test_the_driver_still_gets_the_public_vocabularys_event():
    """The event is built when the guarantee is asked for, and is dp-accounting's no-op event as before."""
    step = build_target("lda", 3, "all").vocabulary_step
    assert step.guarantee().event == dp_accounting.NoOpDpEvent()
    assert step.guarantee() is step.guarantee()


@pytest.mark.parametrize("learner, vocabulary, params", [
    ("dp-cgs", "all", {"epsilon": 2.0, "n_iter": 3}), ("dp-svi", "all", {"epsilon": 2.0, "n_iter": 3}),
    ("hdp-lda", "all", {"n_iter": 2}), ("lp-lda", "all", {"epsilon": 2.0, "n_iter": 2}),
    ("lppf", "all", {"epsilon": 2.0, "n_iter": 2}), ("dp-cgs", "dpsu-gaussian", {"epsilon": 2.0, "n_iter": 3}),
])
def test_a_worker_fitting_a_dp_pipeline_never_imports_dp_accounting(counts, learner, vocabulary, params):
    target = build_target(learner, 3, vocabulary, params)
    # the driver built the claim, with its event (a pipeline whose parts' neighbours differ composes by the sum)
    assert target.guarantee().event is not None or "neighbours differ" in target.guarantee().accountant
    rows = np.arange(20)
    loaded = worker_modules([(warm_up, (target,)), (fit_release, (target, counts, rows, 3, None))])
    assert not {m for m in loaded if m.startswith("dp_accounting")}, (learner, vocabulary)


def test_a_pipeline_reaches_a_worker_without_its_guarantee():
    target = build_target("dp-cgs", 3, "all", {"epsilon": 2.0})
    shipped = pickle.loads(pickle.dumps(target))
    assert target.guarantee().epsilon == pytest.approx(2.0)  # the driver's copy keeps it
    with pytest.raises(RuntimeError, match="without its guarantee"):
        shipped.guarantee()
