"""Hostile pass XIX-zj: a configuration object given to the API is read once, against the configuration's own
schema, into a copy of topicaudit's; the caller's object is neither trusted further nor changed.

``audit_model(config, trust_pickle=True)`` set the keyword into the caller's AuditConfig, so a later
``audit_model(config)`` on another Φ file unpickled it (its code ran) with no trust given; a ``ModelConfig``
subclass declaring ``trust_pickle: bool | str`` passed the check with "no", and one whose ``trust_pickle`` is a
property said False to the check and True to the loader: the checks read the object's own field types, and the
run read the object again after them.
"""
from __future__ import annotations

import dataclasses
import json
import pickle

import numpy as np
import pytest

import topicaudit
from topicaudit import AuditConfig, Config
from topicaudit.engine.configuration.config import AuditAttackConfig, ModelConfig
from topicaudit.errors import UserError
from test_hardening_xix_zi import _Planted  # noqa: E402 - the pickle that makes a folder when loaded


def _files(tmp_path):
    planted = _Planted()
    planted.where = str(tmp_path / "UNPICKLED")
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps(planted))
    np.save(tmp_path / "good.npy", np.full((2, 6), 1 / 6))
    (tmp_path / "vocab.json").write_text(json.dumps(list("abcdef")))
    (tmp_path / "c.json").write_text(json.dumps({"text": ["a b c d"] * 10}))  # empty after pre-processing
    (tmp_path / "r.json").write_text(json.dumps({"text": ["a b c e f"] * 20}))


def _audit_config(tmp_path, model=None) -> AuditConfig:
    config = AuditConfig(model=model or ModelConfig(phi=str(tmp_path / "evil.pkl")))
    config.corpus.path, config.reference.path = str(tmp_path / "c.json"), str(tmp_path / "r.json")
    config.attack.shadows, config.output = 2, str(tmp_path / "out")
    return config


def test_an_audit_model_keyword_stays_out_of_the_caller_s_configuration(tmp_path):
    _files(tmp_path)
    config = _audit_config(tmp_path, ModelConfig(phi=str(tmp_path / "good.npy"),
                                                 vocabulary=str(tmp_path / "vocab.json")))
    with pytest.raises(UserError, match="empty after pre-processing"):
        topicaudit.audit_model(config, trust_pickle=True, params={"max_iter": 3})
    assert config.model.trust_pickle is False and config.model.params == {}
    config.model = ModelConfig(phi=str(tmp_path / "evil.pkl"))  # another Φ, no trust given
    with pytest.raises(UserError, match="refusing to unpickle"):
        topicaudit.audit_model(config)
    assert not (tmp_path / "UNPICKLED").exists()


@dataclasses.dataclass
class _LooseModel(ModelConfig):
    trust_pickle: bool | str = "no"


class _TwoFacedModel(ModelConfig):
    """False to the first reader, True to every later one."""

    @property
    def trust_pickle(self):
        self.reads = getattr(self, "reads", 0) + 1
        return self.reads > 1

    @trust_pickle.setter
    def trust_pickle(self, value):
        pass


@pytest.mark.parametrize("model", [_LooseModel, _TwoFacedModel])
def test_a_table_is_checked_against_the_schema_and_read_once(tmp_path, model):
    _files(tmp_path)
    try:
        topicaudit.audit_model(_audit_config(tmp_path, model(phi=str(tmp_path / "evil.pkl"))))
    except UserError as error:
        assert "trust_pickle" in str(error) or "refusing to unpickle" in str(error)
    assert not (tmp_path / "UNPICKLED").exists()


def test_unknown_keys_and_tables_of_another_kind_set_in_python_are_refused(tmp_path):
    config = Config(output=str(tmp_path / "run"))
    config.attack.canaries.cuont = 60  # a misspelt key: refused in a file, silently the default here
    with pytest.raises(UserError, match="unknown key 'cuont'"):
        topicaudit.run(config)
    config = Config(output=str(tmp_path / "run"))
    config.attack = AuditAttackConfig()  # was an AttributeError from inside the run
    with pytest.raises(UserError, match=r"\[attack\]"):
        topicaudit.run(config)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("params, wanted", [({"epsilon": True}, "epsilon"), ({"epsilon": "2"}, "epsilon"),
                                            ({"noise_multiplier": True}, "noise_multiplier"),
                                            ({"noise_multiplier": 1e-160}, "too small")])
def test_dp_svi_refuses_a_bool_a_string_and_a_noise_no_accountant_can_state(params, wanted):
    """dp-svi took ``epsilon = true`` as ε = 1 (dp-cgs refuses it), "2" was a TypeError, and a noise multiplier of
    1e-160 was claimed as ε = 0 by the RDP accountant (its arithmetic overflowed): a claim of perfect privacy for
    a learner adding no noise to speak of."""
    from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA
    with pytest.raises(ValueError, match=wanted):
        DPStochasticVariationalLDA(k=3, **params)


def test_a_table_given_in_python_names_its_keys(tmp_path):
    """``audit_model(params={1: 2})`` was "Precision not allowed in integer format specifier" (a ValueError from a
    message's formatting) and ``candidates_options={1: 2}`` a TypeError; a file's keys are always names."""
    for name in ("params", "candidates_options"):
        with pytest.raises(UserError, match=name):
            topicaudit.audit_model(tmp_path / "phi.npy", tmp_path / "c.json", tmp_path / "r.json",
                                   output=tmp_path / "o", **{name: {1: 2}})
    with pytest.raises(UserError, match="'params' must be a table"):
        topicaudit.as_config({"target": {"params": {1: 2}}})
