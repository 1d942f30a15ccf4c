"""tests/slow_tests.txt names tests that exist: a renamed slow test would otherwise join the default run unseen."""
from __future__ import annotations

import re
from pathlib import Path

from conftest import SLOW_TESTS, _listed_slow

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_slow_test_is_a_test_function_of_its_file():
    listed = _listed_slow()
    assert listed, f"{SLOW_TESTS} lists no test"
    missing = []
    for node in sorted(listed):
        file, _, name = node.partition("::")
        function = name.split("[")[0].split("::")[-1]
        path = ROOT / file
        if not path.is_file() or not re.search(rf"^\s*def {re.escape(function)}\(", path.read_text(), re.M):
            missing.append(node)
    assert not missing, f"{SLOW_TESTS} names tests that are not there (rename them in the list): {missing[:5]}"
