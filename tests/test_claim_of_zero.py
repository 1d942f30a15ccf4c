"""A claim of ε = 0 and an α too small to print (hostile pass XIX-zd, E-conf): no mechanism is "2× less private"
than ε = 0, so no canary count is searched for or sized; a confidence of 1 − 1e-300 is not printed "100%"."""
import pytest

import topicaudit
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.sizing import size_canaries
from topicaudit.engine.storage.check_result import confidence
from topicaudit.errors import UserError

CONFIG = {"synthetic": {"n_docs": 200, "n_words": 300, "k": 3, "mean_length": 30.0},
          "target": {"learner": "dp-cgs", "k": 3, "vocabulary": "all", "params": {"epsilon": 2.0}},
          "attack": {"shadows": 0, "canaries": {"count": 200}}}


def test_a_confidence_too_close_to_one_is_written_out():
    assert confidence(0.05) == "95%" and confidence(0.999) == "0.1%"
    assert confidence(1e-300) == "1 − 1e-300"
    assert confidence(0.0) == "100%"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero") / "run"
    topicaudit.run({**CONFIG, "output": str(out)})
    return out


def test_a_check_at_zero_searches_no_canary_count(run):
    result = topicaudit.check(run, epsilon=0.0)
    assert result.power is None or result.power["2x"] == 0.0
    assert result.canaries_for_power is None  # before: "the search stopped at 760,000 canaries"


def test_sizing_at_zero_is_refused_with_the_fix(tmp_path):
    config = config_from_dict({**CONFIG, "output": str(tmp_path / "auto")})
    with pytest.raises(UserError, match=r"at ε = 0 .*--canaries N"):
        size_canaries(config, 0.0)
