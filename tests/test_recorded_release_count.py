"""A learner that records another count of releases than its constants declare (hostile pass XIX-zd, L2: five
declared, the last recorded; here one declared, three made and recorded): the verdict says so, and its power
simulates the releases recorded, not the count declared."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import topicaudit
from topicaudit.bounds.verdict import VALID_BOUNDS
from topicaudit.engine.claim_tests import SHAPED
from topicaudit.engine.power import claim_scale, simulated_power
from topicaudit.engine.storage.results import RunResults

RECORDS_THREE = textwrap.dedent('''
    import dataclasses
    import numpy as np
    from topicaudit.targets.learners.dp_cgs import ZhuDPCollapsedGibbsLDA, run_dp_cgs
    from topicaudit.targets.mechanisms import LaplaceNoise, Recorder

    class RecordsThree(ZhuDPCollapsedGibbsLDA):
        """Declares one Laplace release of its counts, makes and records three."""

        def mechanism(self):
            return LaplaceNoise(self.noise_scale, self.max_doc_length)

        def guarantee(self):
            return dataclasses.replace(super().guarantee(), event=None)

        def fit(self, X, seed, record=None):
            state = run_dp_cgs(X, self.k, seed, self.epsilon, self.max_doc_length, alpha=self.alpha,
                               beta=self.beta, n_iter=self.n_iter)
            record = Recorder() if record is None else record
            m = self.mechanism()
            rng = np.random.default_rng(seed)
            noisy = [record.laplace((state.nwk + rng.laplace(0.0, m.scale, state.nwk.shape)).T, scale=m.scale,
                                    document_tokens=m.document_tokens) for _ in range(3)]
            weights = np.maximum(np.mean(noisy, axis=0), 0.0) + self.beta
            phi = (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)
            return phi / phi.sum(axis=1, keepdims=True)
''')


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    where = tmp_path_factory.mktemp("count")
    (where / "records_three.py").write_text(RECORDS_THREE)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(where))
        topicaudit.run({"synthetic": {"n_docs": 300, "n_words": 400, "k": 3, "mean_length": 30.0},
                        "target": {"learner": "records_three:RecordsThree", "k": 3, "vocabulary": "all",
                                   "params": {"epsilon": 2.0}},
                        "attack": {"shadows": 0, "canaries": {"count": 400}}, "output": str(where / "run")})
        yield where / "run"


def test_the_recorded_count_is_kept_and_noted(run):
    results = RunResults.from_json(json.loads((run / "results.json").read_text()))
    assert results.canaries.mechanism.recorded == 3
    result = topicaudit.check(run)
    assert any("recorded 3 releases where its constants declare 1" in note for note in result.unseen)


def test_the_power_simulates_the_releases_recorded(run):
    results = RunResults.from_json(json.loads((run / "results.json").read_text()))
    result = topicaudit.check(run)
    mechanism = results.canaries.mechanism
    three = mechanism.as_recorded()
    assert three.release().releases == 3 and mechanism.release().releases == 1
    bound = next(iter(result.bounds.values()))
    methods = [m for m in VALID_BOUNDS if m not in SHAPED]
    expected = simulated_power(three, np.zeros(int(bound.details["m"]), bool), result.claimed_epsilon, result.delta,
                               result.alpha / len(result.bounds), None, methods,
                               scale=claim_scale(result.claimed_epsilon, 2.0))
    assert result.power["2x"] == pytest.approx(expected["2x"])
    declared = simulated_power(mechanism, np.zeros(int(bound.details["m"]), bool), result.claimed_epsilon,
                               result.delta, result.alpha / len(result.bounds), None, methods)
    assert declared["2x"] != pytest.approx(expected["2x"])  # the count matters to this design
