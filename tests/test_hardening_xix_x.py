"""Hostile pass XIX-x (tests/hostile_xix_x_cases.md): a tie is no evidence, and a plug-in's code loaded
outside sys.modules is still held against its files."""
from __future__ import annotations

import numpy as np
import pytest

from topicaudit.attacks.canaries import canary_coins
from topicaudit.bounds.fdp import eps_lb_fdp_one_run
from topicaudit.bounds.guesses import guess_outcomes
from topicaudit.bounds.one_run import eps_lb_one_run


@pytest.mark.parametrize("count", [8, 10, 16, 20])
def test_tied_scores_prove_nothing_whatever_the_coins(count):
    """R1: a learner whose Φ is uniform scores every canary the same; the tie-break's seeded order (seed 0) put
    the five members of the default 10 canaries (CANARY_SEED 0) first, so a learner that reads nothing of its data
    was VIOLATED ε ≥ 0.247 (10 of 10 'correct'). A guess inside a tie counts as the worst the tie allows."""
    labels = canary_coins(count, 0)
    tied = np.full(count, -174.18830469)
    for family in ("pure", "gdp"):
        assert eps_lb_fdp_one_run(tied, labels, 1e-5, family=family).epsilon == 0.0
    assert eps_lb_one_run(tied, labels, 1e-5).epsilon == 0.0


def test_a_tie_across_the_cut_counts_its_worst():
    scores = np.array([3.0, 2.0, 2.0, 2.0, 1.0])
    labels = np.array([True, True, False, True, False])
    # top 2: the 3.0 (a member) and one of the tied 2.0s, which may be the non-member: 1 sure hit
    # bottom 2: the 1.0 (a non-member) and one of the tied 2.0s, which may be a member: 1 sure hit
    assert guess_outcomes(scores, labels, [(2, 0), (0, 2), (2, 2), (1, 1)]) == [
        (2, 0, 2, 1), (0, 2, 2, 1), (2, 2, 4, 2), (1, 1, 2, 2)]
