"""Hostile pass XIX, helper yc (tests/hostile_xix_yc_cases.md): the users' two jobs, end to end.

- ``check RUN --epsilon E --delta D`` with E the learner's own ε and D another δ ran the claimed mechanism's own
  trade-off-curve test (``fdp-one-run-curve``), which holds the learner's whole curve (its δ among it), and printed
  VIOLATED for the claim (E, D) even at D = 0.999999, which no audit of 100 canaries can refute (the same claim at
  E − 1e-13 was CONSISTENT, ε ≥ 0.000). The same for a Gaussian DPSU step's μ-GDP test ("proves ε ≥ 5.960
  (δ = 0.999999)"). These tests of the claim's shape now run only for the learner's (step's) own claim, ε and δ.
"""
from __future__ import annotations

import pytest

import topicaudit
from topicaudit.engine.configuration.loading import config_from_dict

UNDER_NOISED_SVI = {
    "synthetic": {"n_docs": 200, "n_words": 300, "k": 3},
    "target": {"k": 3, "learner": "dp-svi", "test_under_noise": 1000, "vocabulary": "all"},
    "attack": {"shadows": 0, "canaries": {"count": 100}},
}


@pytest.fixture(scope="module")
def under_noised_run(tmp_path_factory):
    config = config_from_dict(UNDER_NOISED_SVI)
    config.output = str(tmp_path_factory.mktemp("yc") / "svi")
    results = topicaudit.run(config)
    return config.output, results.target.guarantee


def test_the_learners_own_claim_is_refuted_by_its_curve(under_noised_run):
    run_dir, guarantee = under_noised_run
    own = topicaudit.check(run_dir)
    assert own.violated  # the curve test bites on a learner with 1000× too little noise


@pytest.mark.parametrize("delta", [0.5, 0.999999])
def test_a_claim_with_another_delta_is_not_held_to_the_learners_curve(under_noised_run, delta):
    run_dir, guarantee = under_noised_run
    result = topicaudit.check(run_dir, epsilon=guarantee.epsilon, delta=delta)
    nearby = topicaudit.check(run_dir, epsilon=guarantee.epsilon * (1 - 1e-9), delta=delta)
    assert not nearby.violated
    assert not result.violated, result.message()
    assert "curve" not in str(result.strongest_attack)


def test_a_gaussian_vocabulary_steps_gdp_test_is_for_its_own_claim_only(tmp_path):
    """The sibling: the μ-GDP test of a Gaussian DPSU step (its σ, read at half its δ) printed "proves ε ≥ 5.960
    (δ = 0.999999)" for ``check RUN --epsilon 3 --delta 0.999999`` (the step's own ε, another δ)."""
    config = config_from_dict({
        "synthetic": {"n_docs": 200, "n_words": 300, "k": 3},
        "target": {"k": 3, "learner": "lda", "vocabulary": "dpsu-gaussian", "test_bug": "dpsu-noise-tenth"},
        "attack": {"shadows": 0, "canaries": {"count": 400}},
    })
    config.output = str(tmp_path / "dpsu")
    topicaudit.run(config)
    assert topicaudit.check(config.output).violated  # its own claim (ε = 3, δ = 1e-5): noise ÷ 10 is caught
    other = topicaudit.check(config.output, epsilon=3.0, delta=0.999999)
    assert not other.violated, other.message()


def test_a_swept_whole_number_is_the_run_s_float(tmp_path):
    """N1 (listed by this pass, fixed after it): `sweep --param target.test_under_noise --values 1,1000` lists 1
    where the run's configuration holds 1.0; its report refused the sweep as "moved or copied". Another value still
    is refused."""
    from types import SimpleNamespace

    from topicaudit.errors import UserError
    from topicaudit.reports.collect import _in_its_slot
    run = SimpleNamespace(config={"target": {"test_under_noise": 1.0}}, seed=0, path=tmp_path / "run")
    assert _in_its_slot(run, {"value": 1, "seed": 0}, "target.test_under_noise", tmp_path) is run
    with pytest.raises(UserError, match="moved or copied"):
        _in_its_slot(run, {"value": 1000, "seed": 0}, "target.test_under_noise", tmp_path)
