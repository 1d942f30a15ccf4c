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
from topicaudit.errors import UserError


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

