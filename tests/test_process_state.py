"""The command line leaves the process as it found it: a library call after `main()` behaves as in a fresh
process (no CLI warning printer, no exit when a raylet dies, no supervisor hook)."""
import warnings

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.execution import parallel


def test_a_library_call_after_the_command_line_meets_the_process_as_it_was(tmp_path, capsys):
    before = warnings.showwarning, parallel.EXIT_WHEN_RAYLET_DIES, parallel.ON_RAY_START
    assert main(["check", str(tmp_path / "missing"), "--epsilon", "1"]) == 2   # a failed command
    with pytest.raises(SystemExit):                                            # and argparse's own exit
        main(["--version"])
    capsys.readouterr()
    assert (warnings.showwarning, parallel.EXIT_WHEN_RAYLET_DIES, parallel.ON_RAY_START) == before
    assert parallel.EXIT_WHEN_RAYLET_DIES is False
    with warnings.catch_warnings(record=True) as caught:   # warnings reach the library caller as warnings
        warnings.simplefilter("always")
        warnings.warn("from the library", UserWarning)
    assert [str(w.message) for w in caught] == ["from the library"]


def test_assert_privacy_leaves_the_callers_configuration_as_it_was(tmp_path):
    """It set the caller's output, canary count and run directory (the cache's) on the Config it was given."""
    import copy

    from topicaudit import assert_privacy
    from topicaudit.engine.configuration.loading import config_from_dict

    config = config_from_dict({"synthetic": {"n_docs": 150, "n_words": 250}, "target": {"k": 3},
                               "attack": {"shadows": 0, "canaries": {"count": 60}}})
    before = copy.deepcopy(config)
    assert_privacy(config, epsilon=50, canaries=80, cache=tmp_path / "cache")
    assert config == before
