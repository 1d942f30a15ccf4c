"""The non-critical findings of hostile pass XIX-zi left listed, fixed: N8 (a NumPy False for ``cache``) and N10
(the testing helpers read a string as a sequence of its letters; a list for ``expected_failures`` was a raw
ValueError)."""
import numpy as np
import pytest

from topicaudit.engine.configuration import arguments
from topicaudit.engine.configuration.validation import check_name
from topicaudit.errors import UserError
from topicaudit.learner_checks import check_learner
from topicaudit.targets.learners.dp_cgs import ZhuDPCollapsedGibbsLDA
from topicaudit.testing import parametrize_with_checks


def test_a_numpy_bool_is_a_cache_switch():
    assert arguments.cache_place(np.bool_(False)) is False and arguments.cache_place(np.bool_(True)) is True
    assert arguments.cache_place(None) is None and arguments.cache_place("runs") == "runs"
    with pytest.raises(UserError, match="cache must be a path"):
        arguments.cache_place(3)


def test_one_check_named_by_a_string_runs_that_check():
    learner = ZhuDPCollapsedGibbsLDA(k=3, epsilon=1.0, n_iter=2)
    assert check_learner(learner, checks="parameters") is None  # before: unknown checks 'a', 'e', 'm', ...


def test_parametrize_with_checks_refuses_a_string_and_a_list_of_failures():
    with pytest.raises(TypeError, match="list of learner objects"):
        parametrize_with_checks("abc")
    with pytest.raises(TypeError, match="expected_failures must be a dict"):
        parametrize_with_checks([ZhuDPCollapsedGibbsLDA(k=3, epsilon=1.0)], expected_failures=["phi"])


def test_a_numpy_bool_is_a_boolean_argument():
    """NumPy 2 names its bool type ``bool``: the check by type name took np.bool_(True) for no boolean."""
    assert arguments.boolean(np.bool_(True), "quiet") is True
    with pytest.raises(UserError, match="quiet must be True or False"):
        arguments.boolean("no", "quiet")


@pytest.mark.parametrize("name", ["a\ufffeb", "a\udcffb", "a\ufdd0b", "a\U0001ffffb"])
def test_a_run_name_with_a_noncharacter_or_a_lone_surrogate_is_refused(name):
    """N9: such names were accepted (a lone surrogate names no file; a noncharacter is no text)."""
    with pytest.raises(UserError, match="not a plain name"):
        check_name(name)
    check_name("lda-pheme-é")  # letters of any script stay plain
