"""The attack registry: names map to functions and their inputs; only what is asked for is computed, each input once;
`run` and `audit` name their scores the same way."""
import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.attacks import ranking as ranking_module
from topicaudit.attacks import registry
from topicaudit.attacks.ranking import OFFLINE, RANKINGS, SCORE_COLUMNS, check_rank_by
from topicaudit.attacks.registry import (ATTACKS, AUDIT_INPUTS, RUN_INPUTS, AttackInputs, Population, attack_names,
                                         attack_scores, compute_attacks)
from topicaudit.errors import UserError

RNG = np.random.default_rng(3)
N_DOCS, N_SHADOWS = 12, 4
SHADOW_IN = np.zeros((N_SHADOWS, N_DOCS), dtype=bool)
SHADOW_IN[0] = RNG.random(N_DOCS) < 0.5
SHADOW_IN[1] = ~SHADOW_IN[0]
SHADOW_IN[2] = RNG.random(N_DOCS) < 0.5
SHADOW_IN[3] = ~SHADOW_IN[2]
STATS = ("zeta", "neg_entropy", "logit_max", "std", "max")
TARGET = {name: -RNG.gamma(5.0, 3.0, size=N_DOCS) for name in STATS}
SHADOW = {name: -RNG.gamma(5.0, 3.0, size=(N_SHADOWS, N_DOCS)) for name in STATS}
COUNTS = sp.csr_matrix(RNG.integers(0, 3, size=(N_DOCS, 15)) + np.eye(N_DOCS, 15, dtype=int))
N_TOKENS = np.asarray(COUNTS.sum(axis=1), dtype=np.float64).ravel()


def test_every_attack_name_is_listed_once_and_run_names_are_a_subset():
    names = attack_names()
    assert len(names) == len(set(names)) and set(ATTACKS) <= set(names)
    assert attack_names(RUN_INPUTS) == ATTACKS and "rmia_population" not in ATTACKS  # needs reference documents
    assert "rmia_population" in attack_names(AUDIT_INPUTS) and "threshold_max_theta" not in attack_names(AUDIT_INPUTS)


def test_only_the_requested_attacks_are_computed(monkeypatch):
    called = []
    for name in ("shrunk_online_scores", "shrunk_offline_scores", "rmia_scores", "quantile_scores"):
        real = getattr(registry, name)
        monkeypatch.setattr(registry, name,
                            lambda *a, _real=real, _name=name, **k: called.append(_name) or _real(*a, **k))
    scores = attack_scores(TARGET, SHADOW, SHADOW_IN, N_TOKENS, ["lira_online", "lira_offline"], COUNTS)
    assert list(scores) == ["lira_online", "lira_offline"] and called == []


def test_each_input_is_computed_once(monkeypatch):
    calls = []
    real = registry.document_features
    monkeypatch.setattr(registry, "document_features", lambda counts: calls.append(1) or real(counts))
    scores = attack_scores(TARGET, SHADOW, SHADOW_IN, N_TOKENS, counts=COUNTS)
    assert {"lira_online_shrunk", "lira_offline_shrunk", "quantile_regression"} <= set(scores)
    assert len(calls) == 1  # the shrunk variances and quantile regression share one computation of the features


def test_scores_come_in_registry_order_whatever_order_they_are_asked_in():
    asked = ["rmia_offline", "lira_online", "threshold_max_theta"]
    assert list(attack_scores(TARGET, SHADOW, SHADOW_IN, N_TOKENS, asked)) == \
        [name for name in ATTACKS if name in asked]


def test_an_attack_whose_inputs_are_missing_is_left_out():
    inputs = AttackInputs({"zeta": TARGET["zeta"]}, {"zeta": SHADOW["zeta"]}, SHADOW_IN)
    assert list(compute_attacks(inputs, ["lira_online", "rmia_online", "threshold_max_theta"])) == ["lira_online"]


def test_population_scores_reuse_rmia_online():
    population = Population(TARGET["zeta"][:5], SHADOW["zeta"][:, :5], SHADOW_IN[:, :5], N_TOKENS[:5])
    inputs = AttackInputs(TARGET, SHADOW, SHADOW_IN, N_TOKENS, COUNTS, population)
    scores = compute_attacks(inputs, ["rmia_online", "rmia_population"])
    assert ((scores["rmia_population"] >= 0) & (scores["rmia_population"] <= 1)).all()
    empty = Population(np.empty(0), np.empty((N_SHADOWS, 0)), np.empty((N_SHADOWS, 0), bool), np.empty(0))
    assert "rmia_population" not in compute_attacks(AttackInputs(TARGET, SHADOW, SHADOW_IN, N_TOKENS, None, empty),
                                                    ["rmia_population"])


def test_audit_and_run_name_their_scores_the_same_way():
    """Every attack column of an audit's scores.csv is a registry name (offline LiRA with _p, as its p-value)."""
    attack_columns = SCORE_COLUMNS[SCORE_COLUMNS.index("zeta") + 1:]
    names = [c[: -len("_p")] if c.endswith("_p") else c for c in attack_columns]
    assert set(names) <= set(attack_names()) and set(RANKINGS) <= set(names)
    assert all(ranking_module.column(name) == name + "_p" for name in OFFLINE)


@pytest.mark.parametrize("old, new", [("offline", "lira_offline"), ("online-shrunk", "lira_online_shrunk"),
                                      ("quantile", "quantile_regression"), ("rmia-online", "rmia_online")])
def test_old_ranking_names_are_refused_with_their_new_name(old, new):
    with pytest.raises(UserError, match=f"'{old}'.*use '{new}'"):
        check_rank_by(old, "[ranking] by (--rank-by)")
    assert check_rank_by(new, "--rank-by") == new
    with pytest.raises(UserError, match="unknown ranking 'lira_nope'"):
        check_rank_by("lira_nope", "--rank-by")
