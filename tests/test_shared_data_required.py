"""In CI (TOPICAUDIT_REQUIRE_DATA=1, .ci/run) a real-data test whose corpus is missing fails; elsewhere it skips."""
import pytest

from conftest import _shared_file


def test_a_missing_corpus_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("TOPICAUDIT_REQUIRE_DATA", "1")
    with pytest.raises(pytest.fail.Exception, match="absent.*TOPICAUDIT_REQUIRE_DATA=1 requires it"):
        _shared_file("no-such-corpus")
    monkeypatch.delenv("TOPICAUDIT_REQUIRE_DATA")
    with pytest.raises(pytest.skip.Exception, match="absent"):
        _shared_file("no-such-corpus")
