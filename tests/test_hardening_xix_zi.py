"""Hostile pass XIX-zi: the Python API's settings checked as the configuration file's keys are.

``topicaudit.audit_model(PKL, …, trust_pickle="no")`` unpickled the Φ file, running the code its author put in
it, where the same value in a TOML file or a dict (``[model] trust_pickle = "no"``) is refused: "must be true
or false". The keyword settings were set on the configuration without the type check every key of a file gets.
"""
from __future__ import annotations

import json
import os
import pickle

import pytest

import topicaudit
from topicaudit.errors import UserError, printable
from topicaudit.targets.registry import build_learner


class _Planted:
    def __reduce__(self):
        return (os.mkdir, (self.where,))


def _evil_pickle(tmp_path):
    planted = _Planted()
    planted.where = str(tmp_path / "UNPICKLED")
    _Planted.where = planted.where
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps(planted))
    (tmp_path / "c.json").write_text(json.dumps({"text": ["a b c d"] * 10}))
    (tmp_path / "r.json").write_text(json.dumps({"text": ["a b c e"] * 20}))
    return tmp_path / "evil.pkl"


@pytest.mark.parametrize("value", ["no", "false", 1, "0"])
def test_trust_pickle_must_be_a_bool_in_audit_model(tmp_path, value):
    phi = _evil_pickle(tmp_path)
    with pytest.raises(UserError, match="trust_pickle.*must be true or false"):
        topicaudit.audit_model(phi, tmp_path / "c.json", tmp_path / "r.json", trust_pickle=value, shadows=2,
                               output=tmp_path / "o")
    assert not (tmp_path / "UNPICKLED").exists()  # the pickle's code never ran


@pytest.mark.parametrize("name, value, wanted", [("show_text", "no", "true or false"),
                                                 ("preprocess", "no", "true or false"),
                                                 ("normalize", "yes", "true or false"),
                                                 ("seed", "3", "an integer"),
                                                 ("tolerance", "x", "a number")])
def test_audit_model_settings_are_type_checked(tmp_path, name, value, wanted):
    phi = _evil_pickle(tmp_path)
    with pytest.raises(UserError, match=f"{name}.*must be {wanted}"):
        topicaudit.audit_model(phi, tmp_path / "c.json", tmp_path / "r.json", shadows=2, output=tmp_path / "o",
                               **{name: value})


@pytest.mark.parametrize("name", ["show_text", "compare_vocabularies", "quiet"])
def test_report_flags_must_be_bools(tmp_path, name):
    with pytest.raises(UserError, match=f"{name} must be True or False"):
        topicaudit.report([tmp_path], output=tmp_path / "rep", **{name: "no"})


def test_run_quiet_must_be_a_bool(tmp_path):
    with pytest.raises(UserError, match="quiet must be True or False"):
        topicaudit.run({"output": str(tmp_path / "run")}, quiet="no")
    assert not (tmp_path / "run").exists()


def test_printable_escapes_the_characters_xml_forbids():
    """A run directory named with U+FFFE (``--name $'a\\xef\\xbf\\xbeb'``, accepted) made check.junit.xml
    ill-formed XML: a CI's JUnit reader could not read the VIOLATED it recorded."""
    import xml.etree.ElementTree as ElementTree
    for ch in ("\ufffe", "\uffff"):
        shown = printable(f"a{ch}b")
        assert ch not in shown and shown.startswith("a\\u")
        ElementTree.fromstring(f'<t name="{shown}"/>')


def test_unknown_keys_and_parameters_are_named_in_a_bounded_message():
    """A 60,000-character unknown key was echoed whole (a 60 KB error line), and 20,000 unknown learner parameters
    were all listed (149 KB): the bounds on configuration files (docs/exit-codes.md) hold for their messages."""
    with pytest.raises(UserError) as raised:
        topicaudit.as_config({"target": {"k" * 60_000: 1}})
    assert len(str(raised.value)) < 1000 and "unknown key" in str(raised.value)
    config = topicaudit.as_config({"target": {"learner": "lda", "k": 3,
                                              "params": {f"p{i}": i for i in range(20_000)}}})
    with pytest.raises(UserError) as raised:
        build_learner(config.target.learner, config.target.k, config.target.params)
    assert len(str(raised.value)) < 2000 and "unknown parameter(s) p0, p1" in str(raised.value)


def test_a_configuration_object_built_in_python_is_checked_as_a_file_is(tmp_path):
    """The same through an AuditConfig set in Python (``config.model.trust_pickle = "no"``): it was unpickled too;
    and a Config whose canary count is "60" was a TypeError deep in the run (exit 3's kind)."""
    from topicaudit import AuditConfig, Config
    phi = _evil_pickle(tmp_path)
    config = AuditConfig()
    config.model.phi, config.corpus.path, config.reference.path = str(phi), str(tmp_path / "c.json"), str(
        tmp_path / "r.json")
    config.attack.shadows, config.output, config.model.trust_pickle = 2, tmp_path / "o", "no"
    with pytest.raises(UserError, match="trust_pickle.*must be true or false"):
        topicaudit.audit_model(config)
    assert not (tmp_path / "UNPICKLED").exists()
    run = Config()
    run.attack.shadows, run.output = 0, tmp_path / "run"
    run.attack.canaries.count = "60"
    with pytest.raises(UserError, match="count.*must be an integer"):
        topicaudit.run(run)
    run.attack.canaries.count, run.corpus.preprocess = 60, "no"
    with pytest.raises(UserError, match="preprocess.*must be true or false"):
        topicaudit.assert_privacy(run, epsilon=1)
    assert not (tmp_path / "run").exists()


_CLOSED_STREAMS = """
import os, sys
os.close(1); os.close(2)
from topicaudit.engine.check import assert_privacy
config = {"synthetic": {"n_docs": 60, "n_words": 80, "k": 2}, "target": {"k": 2, "vocabulary": "all"},
          "attack": {"shadows": 0}}
try:
    assert_privacy(config, epsilon=1000, canaries=20, cache=sys.argv[1])
    outcome = "passed"
except BaseException as error:
    outcome = f"{type(error).__name__}: {error}"
with open(sys.argv[2], "w") as out:
    out.write(outcome)
"""


def test_a_cached_assert_privacy_in_a_process_whose_streams_are_closed(tmp_path):
    """With standard output and error closed, os.pipe() gave the answer's pipe descriptors 1 and 2: the new
    process's stderr was the answer's pipe, its notes corrupted the answer, and every cached assert_privacy
    failed ("ended (exit code 1) before it answered"), CONSISTENT or not, where the command line works."""
    import subprocess
    import sys
    subprocess.run([sys.executable, "-c", _CLOSED_STREAMS, str(tmp_path / "cache"), str(tmp_path / "outcome")],
                   check=True, timeout=600)
    assert (tmp_path / "outcome").read_text() == "passed"


def test_a_swept_parameter_is_named_in_a_bounded_message():
    from topicaudit import Config
    from topicaudit.engine.sweep import with_parameter
    with pytest.raises(UserError) as raised:
        with_parameter(Config(), "target." + "k" * 5000, 2)
    assert len(str(raised.value)) < 600 and "unknown key" in str(raised.value)
