"""Hostile pass XIX-zl: the last settings the Python API took without the file's checks.

``audit_model``'s ``format``, ``params``, ``candidates_options`` and ``reference_options`` were set on the
configuration as given: a str subclass holding "json" whose ``__str__`` says "uci" was read as json and recorded
in config.toml as uci, and a float subclass holding 0.7 in ``params`` was fitted as 0.7 and recorded in config.toml
and audit.json as its ``__repr__`` (0.9). ``check_learner(learner, checks=<generator>)`` consumed the generator in
its emptiness test and ran no check, returning None as a pass. The ``assert_privacy`` fixture read its ``cache``
before the API's check: NumPy's False was a TypeError. A str subclass in a free table ([target.params]) given in
Python stayed itself: used as its value, recorded in config.toml as its ``__str__``; so did one a learner object
given to ``run``/``assert_privacy`` held (dp-svi fitted with accountant "pld", config.toml said "rdp").
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import topicaudit
from topicaudit.engine.audit_inputs import audit_config
from topicaudit.engine.configuration.config import Config, with_learner
from topicaudit.engine.configuration.toml_writer import to_toml
from topicaudit.errors import UserError
from topicaudit.learner_checks import check_learner
from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA
from topicaudit.targets.registry import build_learner


class _SaysUci(str):
    def __str__(self):
        return "uci"

    def __repr__(self):
        return "'uci'"


class _SaysNinety(float):
    def __repr__(self):
        return "0.9"


def _phi(tmp_path):
    np.save(tmp_path / "phi.npy", np.full((2, 6), 1 / 6))
    (tmp_path / "vocab.json").write_text(json.dumps(list("abcdef")))
    return str(tmp_path / "phi.npy")


def test_audit_model_format_params_and_options_are_read_as_a_file_s(tmp_path):
    config = audit_config(_phi(tmp_path), format=_SaysUci("json"), params={"learning_decay": _SaysNinety(0.7)},
                          candidates_options={"text_field": _SaysUci("body")},
                          reference_options={"text_field": _SaysUci("body")})
    assert type(config.corpus.format) is str and type(config.reference.format) is str
    assert config.corpus.format == config.reference.format == "json"
    assert type(config.model.params["learning_decay"]) is float and repr(config.model.params["learning_decay"]) == "0.7"
    for options in (config.corpus.options, config.reference.options):
        assert type(options["text_field"]) is str and str(options["text_field"]) == "body"


def test_audit_model_format_and_tables_are_type_checked(tmp_path):
    phi = _phi(tmp_path)
    with pytest.raises(UserError, match="key 'format' must be a string"):
        audit_config(phi, format=5)
    with pytest.raises(UserError, match="'params' must be a table"):
        audit_config(phi, params={1: 2})


def test_check_learner_reads_a_generator_of_checks_once():
    learner = build_learner("lda", 3, {"max_iter": 2})
    with pytest.raises(ValueError, match="unknown check"):
        check_learner(learner, checks=(name for name in ["parameters", "no such check"]))
    with pytest.raises(ValueError, match="checks is empty"):
        check_learner(learner, checks=iter([]))


def test_the_fixture_takes_numpy_s_false_as_no_cache(assert_privacy):
    with pytest.raises(UserError, match="unknown key 'bogus'"):
        assert_privacy({"attack": {"bogus": 1}}, epsilon=1.0, cache=np.False_)


class _SaysPld(str):
    def __str__(self):
        return "pld"


def test_a_string_in_a_free_table_set_in_python_is_its_own_text():
    config = topicaudit.as_config({"target": {"learner": "dp-svi", "params": {"accountant": _SaysPld("rdp")}}})
    value = config.target.params["accountant"]
    assert type(value) is str and str(value) == "rdp"
    assert 'accountant = "rdp"' in to_toml(config.to_dict())


class _SaysRdp(str):
    def __str__(self):
        return "rdp"


def test_a_learner_object_s_parameters_are_recorded_as_their_own_values():
    learner = DPStochasticVariationalLDA(k=3, epsilon=2.0, accountant=_SaysRdp("pld"), n_iter=20)
    config = with_learner(Config(), learner)
    value = config.target.params["accountant"]
    assert type(value) is str and value == "pld"
    assert 'accountant = "pld"' in to_toml(config.to_dict())


class _SaysFive(int):
    def __repr__(self):
        return "5"

    __str__ = __repr__


def test_a_learner_object_s_k_is_recorded_as_its_own_value():
    learner = build_learner("lda", 3, {})
    learner.k = _SaysFive(3)
    config = with_learner(Config(), learner)
    assert type(config.target.k) is int and config.target.k == 3
    assert "\nk = 3\n" in to_toml(config.to_dict()).split("[target]", 1)[1]
