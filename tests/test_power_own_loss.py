"""The stated power is computed against the learner's real loss when its record shows more than its claim
(hostile pass XIX-zd, L1): a plug-in claiming ε = 1.5 whose recorded Laplace release realises ε = 6 was checked at
ε = 3 with its power against a mechanism "2× less private than 3" simulated from the record divided by 2, a
mechanism 4× less private than that."""
from __future__ import annotations

import json
import textwrap

import pytest

import topicaudit
from topicaudit.engine.power import own_loss
from topicaudit.engine.storage.results import MechanismInfo, RunResults
from topicaudit.targets.privacy.guarantee import Guarantee, Neighbours
from topicaudit.targets.privacy.release_check import realised_epsilon

CONFIG = {"synthetic": {"n_docs": 300, "n_words": 400, "k": 3, "mean_length": 30.0},
          "attack": {"shadows": 0, "canaries": {"count": 400}}}
UNDERSTATED = textwrap.dedent('''
    import dataclasses
    from topicaudit.targets.learners.dp_cgs import ZhuDPCollapsedGibbsLDA

    class Understated(ZhuDPCollapsedGibbsLDA):
        """DP-CGS at ε = 6 whose claim says 1.5, with no dp-accounting event to check its record against."""

        def guarantee(self):
            return dataclasses.replace(super().guarantee(), epsilon=1.5, event=None)
''')


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    where = tmp_path_factory.mktemp("own")
    (where / "understated_cgs.py").write_text(UNDERSTATED)
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(where))
        for name, learner in (("honest", "dp-cgs"), ("understated", "understated_cgs:Understated")):
            config = {**CONFIG, "target": {"learner": learner, "k": 3, "vocabulary": "all",
                                           "params": {"epsilon": 6.0}}, "output": str(where / name)}
            topicaudit.run(config)
            out[name] = where / name
        yield out


def _mechanism(run) -> MechanismInfo:
    return RunResults.from_json(json.loads((run / "results.json").read_text())).canaries.mechanism


def test_a_laplace_record_realises_the_honest_learner_s_claim(runs):
    release = _mechanism(runs["honest"]).release()
    assert realised_epsilon(release, Neighbours.REPLACE_ONE) == pytest.approx(6.0, rel=1e-9)


def test_the_own_loss_is_what_the_record_realises_when_the_claim_says_less(runs):
    mechanism = _mechanism(runs["understated"])
    claim = Guarantee(epsilon=1.5, delta=0.0, adjacency="document", neighbours="replace-one",
                      basis="paper-claim")
    assert own_loss(mechanism, claim) == (pytest.approx(6.0), None)
    more = Guarantee(epsilon=9.0, delta=0.0, adjacency="document", neighbours="replace-one",
                      basis="paper-claim")
    assert own_loss(mechanism, more)[0] == 9.0  # more noise on record than claimed: the claim (conservative)


def test_a_gaussian_record_with_no_event_is_said_to_be_taken_at_its_claim():
    mechanism = MechanismInfo(kind="subsampled-gaussian-steps", stage="learner",
                              parameters={"noise_std": 6.0, "document_tokens": 10, "steps": 1})
    own, note = own_loss(mechanism, Guarantee(epsilon=1.0, delta=1e-5, adjacency="document", basis="paper-claim"))
    assert own == 1.0 and "no dp-accounting event" in note


def test_the_understated_learner_s_power_is_that_of_the_honest_one_at_the_same_claim(runs):
    honest = topicaudit.check(runs["honest"], epsilon=3.0)
    understated = topicaudit.check(runs["understated"], epsilon=3.0)
    assert honest.power is not None and understated.power is not None
    # before: the understated run's power simulated the record ÷ 2 as "2× less private than 3" (a 4× leakier one)
    assert understated.power == pytest.approx(honest.power)
    assert understated.power["2x"] < 0.95
