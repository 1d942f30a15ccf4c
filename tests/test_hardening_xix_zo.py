"""Hostile pass XIX-zo (tests/hostile_xix_zo_cases.md): a start-up file, unchanged throughout, that put its own
function in the built-in learner's place when a flag file existed, hidden where the start-up probe did not look:
behind a ``property``, behind ``functools.singledispatch`` (the standard library's wrapper function) or
``functools.lru_cache`` (zn's O5), or behind the module's own class (``module.__class__ = Sub``). The key (the start's
files) was the same with and without the patch, and a run fitted with the stub was reused without it."""
from __future__ import annotations

from test_hardening_xix_zn import STUB, _key  # noqa: E402 - the zn pass's probe runner

HEAD = STUB + "import functools, os, types\nimport topicaudit.targets.learners.lda as _m\n" \
              "ON = os.path.exists(os.environ.get('ZN_FLAG', '/nonexistent'))\n"
STARTS = {
    "property": HEAD + "if ON: _m.VariationalLDA.fit = property(lambda self: functools.partial(_uniform, self))\n",
    "singledispatch": HEAD + "if ON: _m.VariationalLDA.fit = functools.singledispatch(_uniform)\n",
    "lru_cache": HEAD + "if ON: _m.VariationalLDA.fit = functools.lru_cache(_uniform)\n",
    "module-class": HEAD + ("_Real = _m.VariationalLDA\n"
                            "class _Stub(_Real):\n    fit = _uniform\n"
                            "class _Module(types.ModuleType):\n"
                            "    def __getattribute__(self, name):\n"
                            "        return _Stub if name == 'VariationalLDA' else super().__getattribute__(name)\n"
                            "if ON: _m.__class__ = _Module\n"),
}

import pytest  # noqa: E402


@pytest.mark.parametrize("name", list(STARTS))
def test_a_start_that_hides_its_function_in_a_library_keys_no_run(tmp_path, name):
    """V1 (property), V2 (singledispatch), O5 (lru_cache), V5 (the module's class): with the flag, no run is keyed;
    without it (the same file replacing nothing), the start is keyed."""
    flag = tmp_path / "flag"
    flag.write_text("")
    found, warned = _key(tmp_path, STARTS[name], ZN_FLAG=str(flag))
    assert found == [], warned
    assert "no run is reused from the run cache" in warned and "by start-up code" in warned
    flag.unlink()
    found, warned = _key(tmp_path, STARTS[name], ZN_FLAG=str(flag))
    assert found and "no run is reused" not in warned, warned
