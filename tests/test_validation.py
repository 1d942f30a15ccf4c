"""Each input rule is checked in one place, and every caller gives the same answer (docs/architecture.md#errors)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.attacks.zeta import solve_zeta
from topicaudit.bounds.epsilon import check_level, eps_lb_bonferroni
from topicaudit.engine.execution.plan import make_plan
from topicaudit.engine.configuration.validation import check_shadows
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import corpus_from_counts
from topicaudit.inputs.phi_io import check_phi
from topicaudit.targets import build_target
from topicaudit.targets.learners.cgs import tokens_from_counts
from topicaudit.targets.counts import check_counts
from topicaudit.targets.params import check_topics


@pytest.mark.parametrize("bad, message", [
    (np.array([[1.0, np.nan]]), "NaN or infinity"),
    (np.array([[1.0, -1.0]]), "negative values"),
    (np.array([[1.0, 0.5]]), "fractions"),
    (np.ones(3), "2-D"),
    (np.array([["a", "b"]]), "not numeric"),
])
def test_every_reader_of_counts_refuses_the_same_way(bad, message):
    with pytest.raises(UserError, match=message):
        check_counts(bad, "X")
    with pytest.raises(UserError, match=message):
        corpus_from_counts(bad, ["a", "b"] if np.ndim(bad) == 2 else ["a", "b", "c"])
    with pytest.raises(ValueError, match=message):  # a learner, for a Python caller: a standard exception
        tokens_from_counts(bad)


def test_check_counts_canonicalises_without_touching_the_callers_matrix():
    X = sp.csr_matrix((np.array([1.0, 2.0]), np.array([1, 1]), np.array([0, 2])), shape=(1, 2))  # duplicate entry
    assert not X.has_canonical_format
    Y = check_counts(X)
    assert Y.toarray().tolist() == [[0.0, 3.0]] and Y.has_canonical_format and Y.dtype == np.float64
    assert X.nnz == 2  # the caller's arrays are left as they were
    canonical = sp.csr_matrix(np.array([[1.0, 0.0, 2.0]]))
    assert np.shares_memory(check_counts(canonical).data, canonical.data)  # no copy when nothing needs changing
    assert check_counts(np.array([[0.5, 1.0]]), whole=False).toarray().tolist() == [[0.5, 1.0]]  # weights
    with pytest.raises(UserError, match="3 columns but Φ has 2 words"):
        check_counts(canonical, "X", n_columns=2, columns_of="Φ")
    with pytest.raises(UserError, match="needs at least one document"):
        check_counts(sp.csr_matrix((0, 3)), nonempty=True)


def test_phi_values_are_checked_once_for_files_and_for_the_attack():
    phi = np.full((2, 4), 0.25)
    assert check_phi(phi, "phi") is phi  # float64 in, no copy
    bad = phi.copy()
    bad[1, 2] = -0.1
    with pytest.raises(UserError, match="negative value.*row 1, column 2"):
        check_phi(bad, "phi.npy")
    with pytest.raises(ValueError, match="negative value.*row 1, column 2"):
        solve_zeta(bad, sp.csr_matrix((1, 4)))
    with pytest.raises(ValueError, match="2-D"):
        solve_zeta(phi[0], sp.csr_matrix((1, 4)))


@pytest.mark.parametrize("n", [0, 1, 3, -2, 2.0, True])
def test_shadows_must_be_an_even_integer_of_at_least_two(n):
    with pytest.raises(UserError, match=r"--shadows must be an even number ≥ 2 .*complementary pairs"):
        check_shadows(n, "--shadows")
    with pytest.raises(UserError, match="even number ≥ 2"):
        make_plan(10, n, seed=0)


def test_zero_shadows_where_allowed_and_a_good_count_passes():
    assert check_shadows(0, "[attack.canaries] shadows", 0) == 0
    assert check_shadows(4, "--shadows") == 4
    assert make_plan(10, 4, seed=0).shadow_in.shape == (4, 10)


@pytest.mark.parametrize("k", [1, 0, 2.5, True, "3"])
def test_the_number_of_topics_is_one_rule(k):
    with pytest.raises(UserError, match=r"\[target\] k, the number of topics, must be an integer ≥ 2"):
        check_topics(k, "[target] k")
    with pytest.raises(UserError, match="k, the number of topics, must be an integer ≥ 2"):
        build_target("lda", k)
    assert check_topics(2, "--k") == 2


def test_confidence_and_delta_are_one_rule():
    with pytest.raises(UserError, match=r"--alpha must be in \(0, 1\) \(got 1.5\)"):
        check_level(1.5, 1e-5, "--alpha", "--delta")
    with pytest.raises(UserError, match=r"--delta must be in \[0, 1\) \(got 1.0\)"):
        check_level(0.05, 1.0, "--alpha", "--delta")
    with pytest.raises(ValueError, match="alpha must be in"):  # the bounds' own callers get the same check
        eps_lb_bonferroni(np.ones(4), np.array([True, False, True, False]), 1e-5, alpha=0.0)
