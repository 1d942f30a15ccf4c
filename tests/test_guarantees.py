"""Guarantees as data: the Adjacency and Basis enums, each mechanism's dp-accounting event, composition.

* the enums keep results.json's strings and round-trip through to_json/from_json (events too);
* a finite ε without a basis is refused, naming the mechanism;
* pure ε-DP parts add exactly (dp-accounting's PLD gives ε = ∞ at δ = 0, so the sum is used);
* Gaussian parts compose tighter than the sum, to dp-accounting's own number;
* word-level and document-level parts do not compose; NONE is the weakest basis;
* every DP learner carries the event of its mechanism, and that event accounted alone gives back its ε.
"""
import json
import math

import dp_accounting
import pytest
from dp_accounting import dp_event, pld

from topicaudit.attacks.canaries import resolve_kind
from topicaudit.bounds.dp_region import claim_of
from topicaudit.targets import build_target
from topicaudit.targets.privacy.dp_svi_accounting import pld_epsilon, subsampled_gaussian_event
from topicaudit.targets.privacy.composition import NEIGHBORING_RELATIONS, PLDAccountant, compose
from topicaudit.targets.privacy.events import EpsilonDeltaDpEvent, guarantee_from_json
from topicaudit.targets.privacy.guarantee import (
    NO_GUARANTEE,
    Adjacency,
    Basis,
    Guarantee,
    adjacency_of,
    basis_of,
    weakest_basis,
)

DOC = Adjacency.DOCUMENT

# (learner, params) with quick constructors; every one that claims something.
DP_LEARNERS = [
    ("dp-cgs", {"epsilon": 2.0, "max_doc_length": 16}),
    ("hdp-lda", {"epsilon_l": 0.5, "clip": 4, "n_iter": 3}),
    ("dp-svi", {"noise_multiplier": 1.5, "sampling_rate": 0.1, "n_iter": 20}),
    ("lp-lda", {"p": 0.8}),
    ("lppf", {"alpha": 0.5}),
    ("lppf-naive", {"epsilon": 1.5, "precision": 3}),
]


def _laplace(epsilon: float) -> Guarantee:
    return Guarantee(epsilon, 0.0, DOC, Basis.THEOREM, "Laplace", event=dp_accounting.LaplaceDpEvent(1 / epsilon))


def _gaussian(z: float, delta: float) -> Guarantee:
    eps = dp_accounting.get_epsilon_gaussian(z, delta)
    return Guarantee(eps, delta, DOC, Basis.THEOREM, "analytic Gaussian", event=dp_accounting.GaussianDpEvent(z))


# --------------------------------------------------------------------------
# enums and JSON
# --------------------------------------------------------------------------

def test_enums_keep_the_strings_results_json_always_held():
    assert [a.value for a in Adjacency] == ["document", "word", "local-word"]
    assert [b.value for b in Basis] == ["none", "monitor", "paper-claim", "theorem"]
    assert Adjacency.LOCAL_WORD == "local-word" and f"{Adjacency.WORD}-level" == "word-level"
    assert [a for a in Adjacency if a.document_level] == [Adjacency.DOCUMENT]
    assert adjacency_of(None) is None and adjacency_of("word") is Adjacency.WORD and basis_of(None) is Basis.NONE
    with pytest.raises(ValueError, match="unknown adjacency 'local-document'"):
        adjacency_of("local-document")
    with pytest.raises(ValueError, match="unknown basis"):
        basis_of("folklore")


@pytest.mark.parametrize("learner, params", DP_LEARNERS + [("lda", {}), ("cgs-monitor", {})])
def test_every_learners_guarantee_round_trips_through_json(learner, params):
    for vocabulary in ("all", "dpsu-gw") if learner in ("dp-cgs", "dp-svi") else ("all",):
        g = build_target(learner, 3, vocabulary, params).guarantee()
        data = json.loads(json.dumps(g.to_json()))
        assert data["adjacency"] in (None, "document", "word", "local-word")
        assert data["basis"] in ("none", "monitor", "paper-claim", "theorem")
        back = guarantee_from_json(data)
        assert back == g and type(back.adjacency) in (Adjacency, type(None)) and type(back.basis) is Basis
        assert back.event == g.event


def test_a_claim_without_a_basis_is_refused_and_names_its_mechanism():
    with pytest.raises(ValueError, match="the guarantee of my-learner claims ε = 2 but sets no basis"):
        Guarantee(epsilon=2.0, adjacency=DOC, parameters={"learner": "my-learner"})
    with pytest.raises(ValueError, match="sets no basis"):
        guarantee_from_json({"epsilon": 1.0, "delta": 0.0, "adjacency": "document"})
    assert NO_GUARANTEE.basis is Basis.NONE and math.isinf(NO_GUARANTEE.epsilon)
    assert Guarantee(epsilon=math.inf, basis=Basis.MONITOR).basis is Basis.MONITOR
    with pytest.raises(ValueError, match="need ε ≥ 0"):
        Guarantee(epsilon=-1.0, basis=Basis.THEOREM)


def test_readers_classify_adjacency_by_its_level():
    def results(adjacency):
        return {"target": {"guarantee": {"epsilon": 2.0, "delta": 0.0, "adjacency": adjacency, "basis": "theorem"}}}

    assert claim_of(results("document")).document_level and claim_of(results(None)).document_level
    assert not claim_of(results("local-word")).document_level and not claim_of(results("word")).document_level
    assert claim_of(results("word")).basis is Basis.THEOREM
    assert [resolve_kind("auto", a) for a in ("word", Adjacency.LOCAL_WORD, "document", None)] == [
        "paired-word", "word", "unique-word", "unique-word"]


# --------------------------------------------------------------------------
# composition
# --------------------------------------------------------------------------

def test_pure_laplace_parts_add_exactly():
    total = compose(_laplace(1.5), _laplace(3.0))
    assert total.epsilon == 4.5 and total.delta == 0.0
    assert total.accountant.startswith("basic composition") and "pure ε-DP" in total.accountant
    assert total.event == dp_accounting.ComposedDpEvent([dp_accounting.LaplaceDpEvent(1 / 1.5),
                                                         dp_accounting.LaplaceDpEvent(1 / 3.0)])
    # why: dp-accounting's PLD cannot state pure DP (mass left at infinity by its truncated tails)
    accountant = pld.PLDAccountant()
    accountant.compose(total.event)
    assert math.isinf(accountant.get_epsilon(0.0))


def test_gaussian_parts_compose_tighter_than_the_sum_to_dp_accountings_number():
    a, b = _gaussian(2.0, 1e-6), _gaussian(3.0, 2e-6)
    total = compose(a, b)
    assert total.delta == pytest.approx(3e-6)
    reference = pld.PLDAccountant(value_discretization_interval=1e-4)
    reference.compose(dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(2.0),
                                                     dp_accounting.GaussianDpEvent(3.0)]))
    assert total.epsilon == pytest.approx(reference.get_epsilon(3e-6), rel=1e-9)
    assert total.epsilon < 0.85 * (a.epsilon + b.epsilon)
    assert "PLD" in total.accountant and total.basis is Basis.THEOREM


def test_a_part_without_an_event_means_basic_composition_and_says_so():
    no_event = Guarantee(1.0, 1e-6, DOC, Basis.PAPER_CLAIM, parameters={"learner": "opaque"})
    total = compose(_gaussian(2.0, 1e-6), no_event)
    assert total.epsilon == pytest.approx(no_event.epsilon + _gaussian(2.0, 1e-6).epsilon)
    assert "no dp-accounting event for opaque" in total.accountant and total.event is None
    assert total.basis is Basis.PAPER_CLAIM


def test_word_and_document_level_parts_do_not_compose():
    word = Guarantee(1.0, 0.0, Adjacency.WORD, Basis.THEOREM)
    with pytest.raises(ValueError, match="different adjacencies"):
        compose(_laplace(1.0), word)


def test_none_is_the_weakest_basis_and_the_weakest_part_sets_it():
    assert weakest_basis([Basis.THEOREM, Basis.NONE]) is Basis.NONE
    assert weakest_basis(["theorem", "monitor", "paper-claim"]) is Basis.MONITOR
    assert sorted(Basis, key=lambda b: b.strength) == [Basis.NONE, Basis.MONITOR, Basis.PAPER_CLAIM, Basis.THEOREM]
    claim = Guarantee(1.0, 0.0, DOC, Basis.PAPER_CLAIM, event=dp_accounting.LaplaceDpEvent(1.0))
    assert compose(_laplace(2.0), claim).basis is Basis.PAPER_CLAIM
    assert compose(_laplace(2.0), NO_GUARANTEE) == NO_GUARANTEE


def test_a_pipeline_with_one_spending_part_keeps_that_parts_guarantee():
    target = build_target("dp-svi", 3, "all", {"noise_multiplier": 1.5, "sampling_rate": 0.1, "n_iter": 20})
    g, learner = target.guarantee(), target.learner.guarantee()
    assert (g.epsilon, g.delta, g.accountant, g.event) == (learner.epsilon, learner.delta, learner.accountant,
                                                          learner.event)
    assert [p["accountant"] for p in g.parameters["parts"]] == ["data-independent (public vocabulary)",
                                                                learner.accountant]
    assert target.guarantee() is g  # cached


def test_dpsu_then_dp_svi_is_accounted_by_pld_at_the_summed_delta():
    target = build_target("dp-svi", 3, "dpsu-gaussian", {"epsilon": 2.0, "n_iter": 50},
                          {"epsilon": 1.0, "delta": 1e-5})
    g, step, learner = target.guarantee(), target.vocabulary_step.guarantee(), target.learner.guarantee()
    assert g.delta == pytest.approx(2e-5) and "PLD" in g.accountant
    reference = PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    reference.compose(dp_accounting.ComposedDpEvent([step.event, learner.event]))
    assert g.epsilon == pytest.approx(reference.get_epsilon(2e-5), rel=1e-9)
    assert g.epsilon < step.epsilon + learner.epsilon - 0.1


# --------------------------------------------------------------------------
# each mechanism's event
# --------------------------------------------------------------------------

def test_each_dp_learner_carries_the_event_of_its_mechanism():
    def learner(name, params):
        return build_target(name, 3, "all", params).learner

    assert learner("dp-cgs", {"epsilon": 2.0, "max_doc_length": 16}).guarantee().event == \
        dp_accounting.LaplaceDpEvent(0.5)  # scale 2L/ε over sensitivity 2L
    hdp = learner("hdp-lda", {"epsilon_l": 0.5, "clip": 4, "n_iter": 3, "beta": 0.01}).guarantee().event
    assert hdp == dp_accounting.SelfComposedDpEvent(dp_accounting.ComposedDpEvent([
        dp_accounting.LaplaceDpEvent(2.0), EpsilonDeltaDpEvent(2 * math.log(4 / 0.01 + 1))]), 3)
    svi = learner("dp-svi", {"noise_multiplier": 1.5, "sampling_rate": 0.1, "n_iter": 20})
    assert svi.guarantee().event == subsampled_gaussian_event(1.5, 0.1, 20)
    assert learner("dp-svi", {"noise_multiplier": 1.5, "accountant": "zcdp-park"}).guarantee().event is None
    assert learner("lp-lda", {"p": 0.8}).guarantee().event == dp_accounting.RandomizedResponseDpEvent(
        pytest.approx(0.4), 2)
    assert learner("lppf", {"alpha": 0.5}).guarantee().event == dp_event.DiscreteLaplaceDpEvent(
        pytest.approx(math.log(2)), 1)
    assert learner("cgs-monitor", {}).guarantee().event is None
    for name in ("dpsu-laplace", "dpsu-gaussian", "dpsu-gw", "dpsu-gw-public-code"):
        step = build_target("lda", 3, name, vocabulary_params={"epsilon": 1.5, "delta": 2e-5}).vocabulary_step
        assert step.guarantee().event == EpsilonDeltaDpEvent(1.5, 2e-5)
    assert build_target("lda", 3, "all").vocabulary_step.guarantee().event == dp_accounting.NoOpDpEvent()
    under = build_target("dp-cgs", 3, "all", {"epsilon": 2.0}, under_noise=10.0).learner.guarantee()
    assert under.event == dp_accounting.LaplaceDpEvent(0.5)  # the claim's mechanism, not the broken one


@pytest.mark.parametrize("learner, params", DP_LEARNERS)
def test_each_event_accounted_alone_gives_back_the_learners_epsilon(learner, params):
    g = build_target(learner, 3, "all", params).learner.guarantee()
    accountant = PLDAccountant(NEIGHBORING_RELATIONS[g.relation])
    accountant.compose(g.event)
    if g.delta == 0:  # pure ε-DP: the PLD's ε at a vanishing δ, discretised upwards
        assert accountant.get_epsilon(1e-12) == pytest.approx(g.epsilon, abs=2e-3)
    else:  # DP-SVI's default RDP ε is an upper bound on the exact (PLD) one
        exact = pld_epsilon(1.5, 0.1, 20, g.delta, value_discretization_interval=1e-4).epsilon
        assert accountant.get_epsilon(g.delta) == pytest.approx(exact, rel=1e-6) and exact <= g.epsilon
