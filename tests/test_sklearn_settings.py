"""A scikit-learn LDA saved with joblib or pickle: its settings train the shadows, and are read without unpickling.

The reader walks the file's pickle opcodes and never imports or calls what the
file names; these tests check what it reads (every joblib compression the
standard library undoes, every pickle protocol), that a file whose unpickling
would run code is read without running it, and that an audit of such a model
trains its shadows with its settings and says which it could not read.
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from topicaudit.inputs.user_model import load_user_model
from topicaudit.inputs.sklearn_model import read_settings, shadow_settings

WORDS = [f"w{i:02d}" for i in range(12)]


def _fitted(**params):
    from sklearn.decomposition import LatentDirichletAllocation

    X = np.random.default_rng(0).poisson(1.0, (30, len(WORDS)))
    return LatentDirichletAllocation(n_components=3, random_state=0, **params).fit(X)


@pytest.mark.parametrize("compress", [0, 3, ("gzip", 3), ("bz2", 3), ("xz", 3), ("lzma", 3)])
def test_joblib_files_give_their_settings_without_unpickling(tmp_path, compress):
    import joblib

    path = tmp_path / "lda.joblib"
    joblib.dump(_fitted(doc_topic_prior=0.25, max_iter=7, learning_method="online", batch_size=16), path,
                compress=compress)
    found, why = read_settings(path.read_bytes())
    assert why is None and found.is_lda
    assert found.read["doc_topic_prior"] == 0.25 and found.read["max_iter"] == 7
    assert found.read["learning_method"] == "online" and found.read["batch_size"] == 16
    assert found.read["random_state"] == 0 and found.read["n_components"] == 3
    learner, params, notes, record = shadow_settings(found, 3)
    assert learner == "sklearn-lda" and not notes
    assert params == {"max_iter": 7, "mean_change_tol": 1e-3, "max_doc_update_iter": 100, "doc_topic_prior": 0.25,
                      "learning_method": "online", "learning_decay": 0.7, "learning_offset": 10.0, "batch_size": 16,
                      "total_samples": 1e6}
    assert "random_state" in record["not_used"] and record["used"] == sorted(params)
    assert any("after the first array" in name for name in record["not_readable"])  # joblib: arrays stop the walk


@pytest.mark.parametrize("protocol", range(6))
def test_pickles_of_every_protocol_give_their_settings(protocol):
    found, _ = read_settings(pickle.dumps(_fitted(topic_word_prior=0.05, evaluate_every=2), protocol=protocol))
    assert found.is_lda and found.complete and found.read["topic_word_prior"] == 0.05
    assert found.fitted["n_iter_"] >= 1  # a whole pickle is walked to its end: fitted numbers are read too
    learner, params, notes, record = shadow_settings(found, 3)
    assert learner == "lda" and params["topic_word_prior"] == 0.05
    assert any("stops early on perplexity" in note for note in notes) and "evaluate_every" in record["not_used"]


class _Payload:
    """Unpickling this writes a marker file: proof that a pickle was (or was not) executed."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "executed"))


def test_the_walk_runs_nothing_the_file_names(tmp_path):
    marker = tmp_path / "marker"
    lda = _fitted()
    lda.random_state = _Payload(str(marker))  # a constructor parameter whose unpickling would run code
    found, _ = read_settings(pickle.dumps(lda))
    assert not marker.exists()
    assert found.is_lda and "random_state" in found.unreadable and found.read["max_iter"] == 10
    found, why = read_settings(pickle.dumps(_Payload(str(marker))))
    assert not marker.exists() and not found.is_lda
    assert read_settings(b"\x04\x22\x4d\x18 lz4 frame")[0] is None  # lz4: said, not read
    assert read_settings(b"not a pickle at all")[0] is None


def test_a_trusted_joblib_model_names_the_shadows_learner_and_settings(tmp_path):
    import joblib

    (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    joblib.dump(_fitted(max_iter=5, doc_topic_prior=0.2), tmp_path / "batch.joblib")
    model = load_user_model(tmp_path / "batch.joblib", tmp_path / "vocab.txt", trust_pickle=True)
    assert model.library == "scikit-learn" and model.learner == "lda" and model.learners == ("lda", "sklearn-lda")
    assert model.settings == {"max_iter": 5, "mean_change_tol": 1e-3, "max_doc_update_iter": 100,
                              "doc_topic_prior": 0.2}
    joblib.dump(_fitted(learning_method="online"), tmp_path / "online.joblib")
    model = load_user_model(tmp_path / "online.joblib", tmp_path / "vocab.txt", trust_pickle=True)
    assert model.learner == "sklearn-lda" and model.settings["learning_method"] == "online"
    np.save(tmp_path / "phi.npy", model.phi)  # an array carries no settings
    assert load_user_model(tmp_path / "phi.npy", tmp_path / "vocab.txt").learner is None


def test_an_online_lda_is_audited_with_its_own_settings(tmp_path, shared_ray, capsys):
    import joblib
    from sklearn.decomposition import LatentDirichletAllocation
    from sklearn.feature_extraction.text import CountVectorizer

    from topicaudit.cli.main import main

    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(6, 14)))) for _ in range(70)]
    cv = CountVectorizer(token_pattern=r"\S+")
    X = cv.fit_transform(texts[30:])
    lda = LatentDirichletAllocation(n_components=3, learning_method="online", batch_size=8, max_iter=4,
                                    doc_topic_prior=0.4, random_state=0).fit(X)
    joblib.dump(lda, tmp_path / "lda.joblib")
    (tmp_path / "vocab.json").write_text(json.dumps({w: int(i) for w, i in cv.vocabulary_.items()}))
    (tmp_path / "cand.json").write_text(json.dumps({"text": texts[:30]}))
    (tmp_path / "ref.json").write_text(json.dumps({"text": texts[30:]}))
    code = main(["audit", str(tmp_path / "lda.joblib"), "--trust-pickle", "--vocabulary", str(tmp_path / "vocab.json"),
                 "--candidates", str(tmp_path / "cand.json"), "--reference", str(tmp_path / "ref.json"),
                 "--no-preprocess", "--shadows", "4", "--output", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads((tmp_path / "run" / "audit.json").read_text())
    learner = result["learner"]
    assert learner["name"] == "sklearn-lda"
    assert learner["params"] == {"max_iter": 4, "mean_change_tol": 1e-3, "max_doc_update_iter": 100,
                                 "doc_topic_prior": 0.4, "learning_method": "online", "learning_decay": 0.7,
                                 "learning_offset": 10.0, "batch_size": 8, "total_samples": 1e6}
    assert learner["settings_from"] == "the saved scikit-learn model, read without unpickling"
    assert learner["model_settings"]["read_without_unpickling"]["learning_method"] == "online"
    assert "random_state" in learner["model_settings"]["not_used"]
    assert "learning_method=online" in out and "read without unpickling" in out
