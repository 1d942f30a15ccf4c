"""A learner's Φ is held to what every statistic and bound assumes where it is fitted (hostile pass XVI, N1/N2).

A plug-in whose fit returned k + 1 rows, all zeros, or a complex or boolean Φ was audited and given a verdict (and
its model file refused only by a later resume); a transposed, ragged, sparse or None Φ ended in an internal error
(exit 3). Now each is one message naming the learner (exit 2), in the driver as in a Ray worker.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import topicaudit
from topicaudit.errors import UserError
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.learners.pipeline import released_phi

SMALL = {"synthetic": {"n_docs": 120, "n_words": 200, "mean_length": 30}, "target": {"k": 3}}
GOOD = np.full((3, 5), 0.2, dtype=np.float32)


@pytest.mark.parametrize("phi, what", [
    (GOOD.tolist(), "a list"),
    (sp.csr_matrix(GOOD), "csr_matrix"),
    (None, "NoneType"),
    (GOOD.astype(bool), "of bool"),
    (GOOD.astype(complex), "of complex128"),
    ((GOOD * 1000).astype(np.int64), "of int64"),
    (GOOD.T.copy(), "shape (5, 3)"),
    (GOOD[:2], "shape (2, 5)"),
    (GOOD[:, :-1], "shape (3, 4)"),
    (GOOD.ravel(), "shape (15,)"),
    (np.where(np.eye(3, 5) > 0, np.nan, GOOD), "non-finite"),
    (GOOD - 0.3, "negative"),
    (np.zeros_like(GOOD), "row sums 0..0"),
    (GOOD * 1000, "row sums 1000..1000"),
])
def test_a_phi_that_is_no_k_by_v_matrix_of_distributions_is_refused_naming_what_it_is(phi, what):
    with pytest.raises(ValueError) as refused:
        released_phi(phi, 3, 5)
    assert what in str(refused.value) and "3 × 5" in str(refused.value)


def test_a_phi_of_distributions_is_kept_as_it_is():
    for phi in (GOOD, GOOD.astype(np.float64), GOOD + np.float32(1e-4)):
        assert released_phi(phi, 3, 5) is phi


class ExtraRow(VariationalLDA):
    """An LDA whose fit adds a topic row: a release that is not the k topics the run audits."""

    def fit(self, X, seed):
        phi = super().fit(X, seed)
        return np.vstack([phi, phi[:1]])


@pytest.mark.parametrize("shadows", [0, 2], ids=["driver", "ray"])
def test_a_run_of_a_learner_returning_a_bad_phi_is_one_message_naming_it_and_no_verdict(tmp_path, monkeypatch,
                                                                                         shared_ray, shadows):
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    config = {**SMALL, "attack": {"shadows": shadows, "canaries": {"count": 20}}, "output": str(tmp_path / "run")}
    with pytest.raises(UserError) as refused:
        topicaudit.run(config, learner=ExtraRow(k=3, max_iter=5))
    message = str(refused.value)
    assert "ExtraRow" in message and "shape (4," in message and "3 × " in message
    assert not (tmp_path / "run" / "results.json").exists()
