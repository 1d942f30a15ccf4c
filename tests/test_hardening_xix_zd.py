"""Hostile pass XIX-zd: the power a verdict states for a claim below the learner's own.

`check RUN --epsilon 3.1` of DP-CGS at ε = 6 (a learner 1.94× less private than the claim tested) said
CONSISTENT with "a mechanism 2× less private than claimed is refuted in 100% of simulated audits": the
simulation divided the recorded noise by 2, a mechanism 2× less private than the learner's own ε = 6, not
than the claim tested. Now the factor is scaled by the claim over the learner's own (``claim_scale``)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import topicaudit
from topicaudit.bounds.verdict import VALID_BOUNDS
from topicaudit.engine.claim_tests import SHAPED
from topicaudit.engine.power import claim_scale, simulated_power
from topicaudit.engine.storage.results import RunResults


def test_claim_scale():
    assert claim_scale(3.0, 3.0) == 1.0
    assert claim_scale(5.0, 3.0) == 1.0          # a larger claim: the recorded mechanism (conservative)
    assert claim_scale(1.5, 6.0) == 0.25
    assert claim_scale(0.0, 6.0) == 0.0
    assert claim_scale(1.0, float("inf")) == 1.0 and claim_scale(1.0, None) == 1.0


@pytest.fixture(scope="module")
def cgs6(tmp_path_factory):
    out = tmp_path_factory.mktemp("zd") / "run"
    config = {"synthetic": {"n_docs": 300, "n_words": 400, "k": 3, "mean_length": 30.0},
              "target": {"learner": "dp-cgs", "k": 3, "vocabulary": "all", "params": {"epsilon": 6.0}},
              "attack": {"shadows": 0, "canaries": {"count": 600}}, "output": str(out)}
    topicaudit.run(config)
    return out


def test_the_power_against_2x_a_smaller_claim_is_that_of_a_mechanism_2x_less_private_than_it(cgs6):
    own = topicaudit.check(cgs6)
    claim = 3.1
    result = topicaudit.check(cgs6, epsilon=claim, delta=own.delta)
    assert result.power is not None
    # this design facing the recorded DP-CGS with its noise divided by 2 × 3.1 / 6 (10 × 3.1 / 6): a mechanism
    # 2× (10×) less private than the claim tested, scored by the recorded constants as the audit scores it
    results = RunResults.from_json(json.loads((cgs6 / "results.json").read_text()))
    bound = next(iter(result.bounds.values()))
    labels = np.zeros(int(bound.details["m"]), bool)
    methods = [m for m in VALID_BOUNDS if m not in SHAPED]
    s = claim / 6.0
    expected = simulated_power(results.canaries.mechanism, labels, claim, own.delta, result.alpha / len(result.bounds),
                               None, methods, factors=(2.0 * s, 10.0 * s))
    assert result.power["2x"] == pytest.approx(expected[f"{2.0 * s:g}x"])
    assert result.power["10x"] == pytest.approx(expected[f"{10.0 * s:g}x"])
    # before: 100% against "2× less private", the learner itself being 1.94× less private than the claim
    assert result.power["2x"] < 0.95



def test_a_claim_of_zero_states_no_power_above_zero(cgs6):
    result = topicaudit.check(cgs6, epsilon=0.0)
    assert result.power is None or result.power["2x"] == 0.0
