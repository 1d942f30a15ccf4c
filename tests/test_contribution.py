"""A Gaussian step's power simulation uses what a canary really contributed: the shares the learner recorded,
believed only where the transcript's own sums agree, and never the whole contribution its E-step did not add
(which overstated DP-SVI's power: 17 of 20 real audits caught a 2× bug where the simulation said 100%)."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import power_search_cut_short
from topicaudit.attacks.canaries import make_canaries
from topicaudit.attacks.contribution import measured_contribution, observed_share
from topicaudit.attacks.mechanism import simulate_score_sets
from topicaudit.engine import sizing
from topicaudit.engine.check import _evidence, assert_privacy, check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.sizing import size_canaries
from topicaudit.engine.storage.bounded_read import load_arrays
from topicaudit.engine.verdict import run_verdict
from topicaudit.mechanisms import GaussianNoise, Recorder, Transcript
from topicaudit.targets.mechanisms import mechanism_from_json

# DP-SVI whose E-step stops after two passes: a one-word canary's tokens stay split over the topics, so the whole
# contribution in one topic overstates its score plainly (a short E-step, not a bug: its claim still holds).
WEAK_E_STEP = {"synthetic": {"n_docs": 300, "n_words": 300},
               "target": {"learner": "dp-svi", "k": 3, "vocabulary": "all",
                          "params": {"n_iter": 50, "max_doc_tokens": 20, "epsilon": 3.0, "max_doc_update_iter": 2}},
               "attack": {"shadows": 0}}


def _difference(trained: np.ndarray, untrained: np.ndarray) -> tuple[float, float]:
    """Mean score of trained minus untrained canaries, and its standard error."""
    return (float(trained.mean() - untrained.mean()),
            math.sqrt(trained.var() / trained.size + untrained.var() / untrained.size))


@pytest.fixture(scope="module")
def weak_fit(tmp_path_factory):
    out = tmp_path_factory.mktemp("weak") / "run"
    with power_search_cut_short():  # the tests read the power, never the count it suggests
        result = assert_privacy(WEAK_E_STEP, canaries=3000, output=out)
    return out, result, json.loads((out / "results.json").read_text())


def test_the_simulated_separation_of_a_real_dp_svi_fit_is_not_overstated(weak_fit):
    """Trained minus untrained mechanism scores at the claimed noise: the simulation with the run's measured
    contribution is no larger than the real fit's (3 standard errors), where the whole contribution is."""
    out, _, results = weak_fit
    canaries, scores = load_arrays(out / "canaries.npz"), load_arrays(out / "canary_scores.npz")
    coins = canaries["coins"].astype(bool)
    position = {int(i): j for j, i in enumerate(scores["ids"])}
    real = scores["mechanism"][[position[int(i)] for i in canaries["ids"]]]
    observed, observed_error = _difference(real[coins], real[~coins])
    info = results["canaries"]["mechanism"]
    assert info["contribution"] and np.mean(info["contribution"]) < 0.9  # the short E-step's shares, measured
    release = mechanism_from_json(info["kind"], info["parameters"])
    simulated = {}
    for label, contribution in (("measured", info["contribution"]), ("whole", None)):
        rng = np.random.default_rng(0)
        trained, untrained = (simulate_score_sets(release, np.full(20_000, present), info["tokens"], 1.0, rng,
                                                  k=info["topics"], arrays=tuple(info["arrays"]),
                                                  contribution=contribution)["mechanism"] for present in (True, False))
        simulated[label] = _difference(trained, untrained)
    tolerance = 3 * math.hypot(observed_error, simulated["measured"][1])
    assert simulated["measured"][0] <= observed + tolerance, (simulated, observed, observed_error)
    # the guard has teeth: the old simulation, the whole contribution in one topic, fails it
    assert simulated["whole"][0] > observed + 3 * math.hypot(observed_error, simulated["whole"][1])


def test_the_verdicts_power_is_simulated_with_the_measured_contribution(weak_fit, short_power_search):
    out, result, results = weak_fit
    again = check_run(out)
    assert again.power == result.power
    assert results["canaries"]["mechanism"]["contribution"] == sorted(results["canaries"]["mechanism"]["contribution"])


def _transcript(trained_share: float, recorded: np.ndarray | None, steps: int = 400, columns: int = 400,
                seed: int = 0) -> tuple[Transcript, object]:
    """A Gaussian transcript of half trained one-word canaries, each adding ``trained_share`` of N = 10 to its
    scored topic at every step (q = 1), σ = 10; ``recorded``: the shares the learner claims to have added."""
    canaries = make_canaries(sp.csr_matrix(np.ones((4, 5))), columns, "unique-word", 10, seed=seed)
    rng = np.random.default_rng(seed)
    mechanism = GaussianNoise(10.0, 10, 1.0, None, steps)
    order = np.argsort(canaries.words)
    y = rng.normal(0.0, 10.0, (steps, 2, columns))
    y[:, 0, :] += 10.0 * trained_share * canaries.coins[order]
    arrays = {"noisy_sums": y, "top_topics": np.zeros((steps, columns), np.int32)}
    if recorded is not None:
        arrays["contributions"] = recorded
    return Transcript(mechanism, canaries.words[order], arrays), canaries


def test_recorded_shares_are_used_where_the_transcript_agrees_and_not_where_it_contradicts():
    agreeing, canaries = _transcript(0.5, np.full(1000, 0.5, np.float32))
    share, error = observed_share(agreeing, canaries)
    assert abs(share - 0.5) < 4 * error and error < 0.05
    assert measured_contribution(agreeing, canaries) == [0.5] * 100
    lying, canaries = _transcript(0.5, np.ones(1000, np.float32))  # claims the whole contribution
    believed = measured_contribution(lying, canaries)
    assert len(believed) == 1 and believed[0] < 0.5 + 1e-9  # the share the data support at 95%, no more
    unrecorded, canaries = _transcript(0.5, None)
    assert measured_contribution(unrecorded, canaries) == believed


def test_the_recorder_keeps_each_sampled_columns_share_in_its_scored_topic():
    record = Recorder(np.array([1, 3]))
    clean = np.zeros((2, 5))
    clean[:, 1] = [6.0, 4.0]   # column 1 sampled: 6 of its 10 in topic 0, the one its affinity points to
    affinity = np.zeros((2, 5))
    affinity[0, :] = 1.0
    record.gaussian(clean + 1.0, noise_std=1.0, document_tokens=10, sampling_rate=0.5, steps=2,
                    topic_affinity=affinity, clean=clean)
    clean[:, 1], clean[:, 3] = 0.0, [2.0, 8.0]  # next step: column 3 sampled, 2 of 10 in its scored topic
    record.gaussian(clean + 1.0, noise_std=1.0, document_tokens=10, sampling_rate=0.5, steps=2,
                    topic_affinity=affinity, clean=clean)
    np.testing.assert_allclose(record.transcript().arrays["contributions"], [0.6, 0.2])


def test_sizing_simulates_the_pilots_measured_contribution_and_says_when_the_power_is_out_of_reach(monkeypatch):
    """The short E-step's canaries add about 60% of their tokens where the score looks: no count the search
    tries reaches the power, and the sizing says so; the whole contribution would have promised more."""
    monkeypatch.setattr(sizing, "LIMIT", 4_000)  # the search's reach, kept short
    measured = size_canaries(config_from_dict(WEAK_E_STEP), budget=600)
    assert not measured.reached and "cannot reach the power asked for" in measured.message()
    monkeypatch.setattr(sizing, "_pilot_contribution", lambda *args: None)
    whole = size_canaries(config_from_dict(WEAK_E_STEP), budget=600)
    assert max(p for p, _ in whole.tried.values()) > max(p for p, _ in measured.tried.values())


def test_a_run_without_a_measured_contribution_says_its_power_may_overstate(weak_fit):
    """A run from before the measurement: its power is simulated as before, and the verdict says what that cost."""
    out = weak_fit[0]
    results, natural, found, _ = _evidence(out)
    old = dataclasses.replace(results, canaries=dataclasses.replace(
        results.canaries, mechanism=dataclasses.replace(results.canaries.mechanism, contribution=None)))
    verdict = run_verdict(old, natural, found, out)
    assert verdict.power is not None and any("whole contribution" in note for note in verdict.unseen)
    assert not any("whole contribution" in note for note in run_verdict(results, natural, found, out).unseen)
