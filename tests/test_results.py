"""Typed results (topicaudit.engine.storage.results): results.json, audit.json and check's JSON as frozen records.

What the engine writes is the record it built, byte for byte; every file round-trips
through its record; a schema this version does not read is one clear UserError.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import topicaudit
from topicaudit.bounds.epsilon import EpsilonBound
from topicaudit.engine import run as engine_run
from topicaudit.engine.check import check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.audit_results import AuditResults
from topicaudit.engine.storage.check_result import CheckResult
from topicaudit.engine.storage.results import RunResults
from topicaudit.errors import UserError

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")

CANARIES = {"synthetic": {"n_docs": 200, "n_words": 300}, "target": {"k": 3},
            "attack": {"shadows": 0, "canaries": {"count": 100}}}
# DP-CGS records what its mechanism released: the canaries observe the mechanism (results.json "mechanism");
# a DP vocabulary step's threshold canaries add what it released of them ("fresh_released", "anchors").
MECHANISM = {"synthetic": {"n_docs": 300, "n_words": 400, "mean_length": 30},
             "target": {"learner": "dp-cgs", "k": 3, "vocabulary": "all",
                        "params": {"epsilon": 2.0, "n_iter": 10, "max_doc_length": 8}},
             "attack": {"shadows": 0, "canaries": {"count": 40}}}
DPSU = {"synthetic": {"n_docs": 300, "n_words": 400, "mean_length": 30},
        "target": {"learner": "lda", "k": 3, "vocabulary": "dpsu-laplace", "vocabulary_params": {"epsilon": 2.0}},
        "attack": {"shadows": 0, "canaries": {"count": 200, "kind": "threshold"}}}
SHADOWS = {"synthetic": {"n_docs": 200, "n_words": 400}, "target": {"k": 3},
           "attack": {"shadows": 4, "canaries": {"count": 40}}, "ray": {"num_cpus": 1}}


def plain_values(value, where="results"):
    """Every value a record holds, nested records and ε bounds included, is a plain JSON value of Python's own
    types (no NumPy scalar, no tuple, no enum): what json.loads gives back."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            if f.name != "absent" and f.metadata.get("json", True):
                plain_values(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str, f"{where}: key {key!r}"
            plain_values(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            plain_values(item, f"{where}[{i}]")
    else:
        assert value is None or type(value) in (str, int, float, bool), f"{where}: {type(value).__name__}"


def same_record(built, read):
    """The record built in memory and the one its file reads back hold the same values, field by field."""
    for f in dataclasses.fields(built):
        if f.name == "absent" or not f.metadata.get("json", True):
            continue
        assert getattr(built, f.name) == getattr(read, f.name), f.name


@pytest.mark.parametrize("settings", [CANARIES, MECHANISM, DPSU, SHADOWS],
                         ids=["canaries", "mechanism", "dpsu", "shadows"])
def test_results_json_is_the_engines_record_and_round_trips(tmp_path, settings):
    results = engine_run.execute_run(config_from_dict({**settings, "output": str(tmp_path / "run")}), quiet=True)
    text = (tmp_path / "run" / "results.json").read_text()
    assert json.dumps(results.to_json(), indent=2) + "\n" == text  # written once, from the record it built
    plain_values(results)  # NumPy scalars converted as the record was built, so it equals what the file reads
    assert not results.extra and not results.absent
    data = json.loads(text)
    again = RunResults.from_json(data)
    assert json.dumps(again.to_json(), indent=2) + "\n" == text  # key order included
    assert again == results and results == data  # the record, and the mapping it reads as
    same_record(results, again)
    assert not again.extra and not again.absent  # every key known, none missing
    if settings is SHADOWS:
        assert isinstance(again.epsilon_lower_bounds.by_attack["lira_online"], EpsilonBound)
        assert again.attacks["lira_online"].tpr_at_fpr_0_001 == data["attacks"]["lira_online"]["tpr_at_fpr_0.001"]
    if settings is MECHANISM:
        assert again.canaries.observe == "mechanism" and again.canaries.mechanism.stage == "learner"
    if settings is DPSU:
        assert again.canaries.mechanism.stage == "vocabulary" and again.canaries.mechanism.fresh_released


def test_the_api_returns_typed_results(tmp_path):
    results = topicaudit.run({**CANARIES, "output": str(tmp_path / "run")})
    assert isinstance(results, topicaudit.RunResults) and results.canaries.count == 100
    assert results.to_json() == json.loads((tmp_path / "run" / "results.json").read_text())
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.name = "other"  # type: ignore[misc]
    verdict = topicaudit.check(tmp_path / "run", epsilon=1)
    assert CheckResult.from_json(verdict.to_json()) == verdict


def _minimal(**changes):
    return {"schema": "topicaudit.results/1",
            "target": {"learner": "lda", "guarantee": {"epsilon": None, "delta": 0.0, "adjacency": None}},
            "epsilon_lower_bounds": {"delta": 1e-5}, **changes}


def test_a_record_built_in_memory_holds_what_its_file_reads_back():
    """NumPy scalars, tuples, enum members and ∞ in a bound's details are converted as the record is built, so
    the record equals the one its JSON reads back, type for type; a key a record has no field for is an error
    where the record is built, not an extra key in the file."""
    from topicaudit.bounds.epsilon import Method
    from topicaudit.engine.storage.records import plain
    from topicaudit.engine.storage.results import AttackMetrics, CanaryBounds, CanaryResults, MechanismInfo

    bound = EpsilonBound(np.float64(1.5), Method.ONE_RUN, 0.95, 1e-5, {"guesses": np.int64(7), "tail": math.inf})
    built = CanaryResults(
        observe="mechanism", paired=np.bool_(True), count=np.int64(100),
        mechanism=MechanismInfo(kind="gaussian", parameters={"noise_std": np.float32(0.5), "shape": (3, 4)},
                                fresh_released=(np.int64(2), 10)),
        scores={"zeta": AttackMetrics.of({"auc": np.float64(0.75), "tpr_at_fpr_0.001": 0.0,
                                          "tpr_at_fpr_0.01": np.float64(0.1), "balanced_accuracy": 0.6})},
        epsilon_lower_bounds=CanaryBounds(epsilon=np.float64(1.5), by_test={"canaries/zeta:one-run": bound}))
    read = CanaryResults.from_json(json.loads(json.dumps(built.to_json())), "canaries")
    assert read == built
    plain_values(built)
    assert built.mechanism.parameters == {"noise_std": 0.5, "shape": [3, 4]}
    assert built.epsilon_lower_bounds.by_test["canaries/zeta:one-run"].details["tail"] == "inf"  # as the file has it
    assert plain({1: np.arange(2), None: (np.str_("a"),)}) == {"1": [0, 1], "null": ["a"]}
    with pytest.raises(TypeError, match="tpr_at_fpr_0.1"):
        AttackMetrics.of({"auc": 0.5, "tpr_at_fpr_0.1": 0.2})
    with pytest.raises(TypeError, match="not a JSON value"):
        plain({"x": object()})


def test_a_file_with_fewer_keys_reads_and_writes_back_unchanged():
    data = _minimal(future_key={"kept": True})
    results = RunResults.from_json(data)
    assert results.to_json() == data and list(results.to_json()) == list(data)
    assert results.corpus is None and results.attacks == {} and results.recorded_bounds.delta == 1e-5
    assert results.extra == {"future_key": {"kept": True}}


@pytest.mark.parametrize("schema, words", [
    ("topicaudit.results/2", "newer than this topicaudit reads (topicaudit.results/1); upgrade topicaudit"),
    ("topicaudit.user-audit/1", "does not read"),
    (None, "does not read"),
    ("topicaudit.results/x", "does not read"),
])
def test_an_unknown_or_newer_schema_is_one_clear_error(schema, words):
    with pytest.raises(UserError, match=re.escape(words)) as caught:
        RunResults.from_json(_minimal(schema=schema), "runs/x/results.json")
    assert "runs/x/results.json" in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_claim_is_named():
    data = _minimal()
    del data["target"]["guarantee"]["delta"]
    with pytest.raises(UserError, match=r"target.guarantee lacks 'delta'.*rerun the audit"):
        RunResults.from_json(data, "results.json")


def test_check_reads_results_through_the_record(tmp_path):
    """An unknown schema stops `check` before any bound (the reader is RunResults)."""

    rng = np.random.default_rng(0)
    member = rng.random(400) < 0.5
    np.savez(tmp_path / "scores.npz", is_member=member, doc_index=np.arange(400), lira_online=member * 1.0,
             lira_offline=member * 1.0)
    (tmp_path / "results.json").write_text(json.dumps(_minimal(schema="topicaudit.results/9")))
    with pytest.raises(UserError, match="upgrade topicaudit"):
        check_run(tmp_path, epsilon=1.0)
    (tmp_path / "results.json").write_text(json.dumps(_minimal()))
    assert check_run(tmp_path, epsilon=1.0).violated


def test_check_results_round_trip_and_refuse_an_edited_verdict():
    bound = EpsilonBound(math.inf, "delta-tail", 0.95, 1e-5, {"released": 3, "fresh_canaries": 10, "p_value": 1e-9})
    result = CheckResult(Path("runs/r"), 1.0, 1e-5, 0.05, {"canaries/mechanism:delta-tail": bound}, 3.5,
                         "document", {"canaries/": "canaries on the released Φ"}, False, None)
    data = json.loads(json.dumps(result.to_json()))
    assert data["epsilon_lower_bound"] == "inf"
    assert CheckResult.from_json(data) == result and CheckResult.from_json(data).to_json() == data
    with pytest.raises(UserError, match="edited"):
        CheckResult.from_json({**data, "verdict": "CONSISTENT"})
    with pytest.raises(UserError, match="newer"):
        CheckResult.from_json({**data, "schema": "topicaudit.check/2"})


def test_audit_results_round_trip():
    data = {"schema": "topicaudit.user-audit/2", "name": "m", "config_hash": "h", "inputs": {"phi": {"k": 3}},
            "learner": {"name": "lda", "k": 3, "params": {}, "settings_from": "defaults", "vocabulary": "v",
                        "guarantee": {"epsilon": None, "delta": 0.0, "adjacency": None, "basis": "none",
                                      "accountant": None, "parameters": {}, "event": None}},
            "shadows": {"n_shadows": 4}, "ranking": {"by": "lira_online", "rank_by": "online_llr",
                                                    "recommended": True, "rule": "r", "order": "o"},
            "scores": {"file": "scores.csv"}, "summary": {"n_candidates": 2}, "top": [{"rank": 1}],
            "statistics": {}, "seeds": {"seed": 0}, "versions": {}, "ray": {}, "timings_s": {}, "resumed": False,
            "warnings": []}
    results = AuditResults.from_json(data)
    assert results.to_json() == data and list(results.to_json()) == list(data) and results == data
    assert results.ranking.by == "lira_online" and results.learner.guarantee.epsilon is None
    with pytest.raises(UserError, match="does not read"):
        AuditResults.from_json({**data, "schema": "topicaudit.results/1"})
