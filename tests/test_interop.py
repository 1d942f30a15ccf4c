"""gensim and tomotopy: learners, saved models, and corpora in the model's own tokens.

The shadows of a library's model must be trained by that library with the
model's settings. These tests train real (small) gensim and tomotopy models
the way a user would, save them as the library does, and check that
``topicaudit audit`` reads Φ, vocabulary and settings from them, that the
learners given those settings reproduce the user's Φ exactly (both libraries
are deterministic for a seed in one process), that gensim's pickles are never
unpickled without ``--trust-pickle``, and that a missing library names the
extra that installs it.
"""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.cli.main import main
from topicaudit.errors import UserError
from topicaudit.inputs.user_model import load_user_model

gensim = pytest.importorskip("gensim")
tp = pytest.importorskip("tomotopy")
from gensim.corpora import Dictionary, MmCorpus  # noqa: E402
from gensim.models import LdaModel  # noqa: E402

WORDS = [f"{a}{b}" for a in ("apple", "brick", "cloud", "delta", "ember", "frost") for b in ("ash", "bay", "cove")]


def token_docs(n: int, seed: int) -> list[list[str]]:
    """Documents from three planted topics, as token lists (what both libraries train on)."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(len(WORDS), 0.2), size=3)
    return [[str(w) for w in rng.choice(WORDS, size=rng.integers(5, 12), p=rng.dirichlet(np.full(3, 0.3)) @ topics)]
            for _ in range(n)]


def used_words(docs) -> list[str]:
    return sorted({t for d in docs for t in d})


def counts(docs: list[list[str]], words: list[str]) -> sp.csr_matrix:
    """Documents × words counts, column j = words[j]."""
    index = {w: j for j, w in enumerate(words)}
    rows, cols = [], []
    for i, doc in enumerate(docs):
        for token in doc:
            rows.append(i)
            cols.append(index[token])
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(docs), len(words)))


@pytest.fixture
def docs():
    return token_docs(120, 0)


# --------------------------------------------------------------------------- #
# The learners reproduce the libraries' own fits
# --------------------------------------------------------------------------- #


def test_gensim_learner_reproduces_a_users_gensim_model(docs):
    from topicaudit.targets.learners.gensim_lda import GensimLDA

    dictionary = Dictionary(docs)
    bow = [dictionary.doc2bow(d) for d in docs]
    user = LdaModel(bow, id2word=dictionary, num_topics=3, random_state=11, passes=3, chunksize=50,
                    alpha="asymmetric", eta=0.05, iterations=30, decay=0.7)
    X = counts(docs, [dictionary[j] for j in range(len(dictionary))])  # columns = the dictionary's ids
    ours = GensimLDA(3, passes=3, chunksize=50, alpha="asymmetric", eta=0.05, iterations=30, decay=0.7).fit(X, 11)
    np.testing.assert_allclose(ours, user.get_topics(), atol=1e-6)
    other = GensimLDA(3, passes=3, chunksize=50, alpha="asymmetric", eta=0.05, iterations=30, decay=0.9).fit(X, 11)
    assert np.abs(other - user.get_topics()).max() > 1e-3, "a different setting must change Φ"


def test_tomotopy_learner_reproduces_a_users_tomotopy_model(docs):
    from topicaudit.targets.learners.tomotopy_lda import TomotopyLDA, token_lists

    words = used_words(docs)
    X = counts(docs, words)
    user = tp.LDAModel(k=3, alpha=0.3, eta=0.02, min_df=2, seed=5)
    for doc in token_lists(X):  # the same tokens in the same order, under their real names
        user.add_doc([words[int(t)] for t in doc])
    user.train(40, workers=1)
    assert len(user.used_vocabs) == len(words)
    user_phi = np.zeros((3, len(words)))
    user_phi[:, [words.index(w) for w in user.used_vocabs]] = [user.get_topic_word_dist(t) for t in range(3)]
    ours = TomotopyLDA(3, alpha=0.3, eta=0.02, min_df=2, iterations=40).fit(X, 5)
    np.testing.assert_allclose(ours, user_phi, atol=1e-6)
    weighted = TomotopyLDA(3, alpha=0.3, eta=0.02, min_df=2, iterations=40, tw="idf").fit(X, 5)
    assert np.abs(weighted - user_phi).max() > 1e-3, "a different setting must change Φ"


def test_tomotopy_learner_gives_unseen_words_the_priors_share():
    from topicaudit.targets.learners.tomotopy_lda import TomotopyLDA

    X = sp.csr_matrix(np.array([[3, 1, 0, 0], [0, 2, 2, 0], [1, 0, 4, 0]], dtype=float))  # word 3 unused
    phi = TomotopyLDA(2, eta=0.5, iterations=20).fit(X, 1)
    # η / (n_k + 4η): never 0, and no more than any word the topic has tokens of.
    assert np.all(phi[:, 3] > 0) and np.all(phi[:, 3] <= phi[:, :3].min(axis=1) * (1 + 1e-6))
    np.testing.assert_allclose(phi.sum(axis=1), 1, atol=1e-6)


def test_both_learners_are_targets_of_run_and_deterministic_for_a_seed(docs):
    from topicaudit.targets import build_target

    X = counts(docs, used_words(docs))
    for name, params in (("gensim-lda", {"passes": 2}), ("tomotopy-lda", {"iterations": 30})):
        target = build_target(name, 3, "observed", params)
        a, b, c = target.fit(X, 1), target.fit(X, 1), target.fit(X, 2)
        assert a.phi.shape == (3, X.shape[1]) and a.phi.dtype == np.float32
        np.testing.assert_array_equal(a.phi, b.phi)
        assert not np.array_equal(a.phi, c.phi)


def test_a_missing_library_names_the_extra(monkeypatch, tmp_path, docs, capsys):
    from topicaudit.targets import build_target

    path = saved_tomotopy(tmp_path, docs)
    for module, learner in (("gensim", "gensim-lda"), ("tomotopy", "tomotopy-lda")):
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
        with pytest.raises(UserError, match=rf"pip install 'topicaudit\[{module}\]'"):
            build_target(learner, 3)
    (tmp_path / "c.json").write_text(json.dumps({"text": docs[:5]}))
    code = main(["audit", str(path), "--candidates", str(tmp_path / "c.json"), "--reference", str(tmp_path / "c.json"),
                 "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "reading the tomotopy model" in err and "pip install 'topicaudit[tomotopy]'" in err
    assert "Traceback" not in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("learner, params, message", [
    ("gensim-lda", {"alpha": "sometimes"}, "alpha must be one of symmetric"),
    ("gensim-lda", {"alpha": [0.1, 0.2]}, r"k = 3 of them"),
    ("gensim-lda", {"passes": 0}, "≥ 1"),
    ("tomotopy-lda", {"tw": "bm25"}, "tw must be one of one, idf, pmi"),
    ("tomotopy-lda", {"alpha": [0.1, 0.2]}, "k = 3 numbers"),
    ("tomotopy-lda", {"workers": 4}, "unknown parameter"),
])
def test_bad_library_settings_are_user_errors(learner, params, message):
    from topicaudit.targets import build_target

    with pytest.raises(UserError, match=message):
        build_target(learner, 3, "observed", params)


# --------------------------------------------------------------------------- #
# Saved models
# --------------------------------------------------------------------------- #


def saved_tomotopy(tmp_path: Path, docs, **settings) -> Path:
    model = tp.LDAModel(k=3, seed=3, **settings)
    for doc in docs:
        model.add_doc(doc)
    model.burn_in, model.optim_interval = 5, 7
    model.train(25, workers=1)
    path = tmp_path / "model.bin"
    model.save(str(path))
    return path


def test_a_tomotopy_file_gives_phi_vocabulary_and_settings(tmp_path, docs):
    path = saved_tomotopy(tmp_path, docs, alpha=0.25, eta=0.03, min_cf=3, rm_top=1, tw=tp.TermWeight.PMI)
    reference = tp.LDAModel.load(str(path))
    m = load_user_model(path)
    assert (m.phi_format, m.library, m.learner) == ("tomotopy", "tomotopy", "tomotopy-lda")
    assert list(m.vocabulary) == sorted(reference.used_vocabs)
    order = [list(reference.used_vocabs).index(w) for w in m.vocabulary]
    expected = np.array([reference.get_topic_word_dist(t) for t in range(3)])[:, order]
    np.testing.assert_allclose(m.phi, expected / expected.sum(axis=1, keepdims=True), atol=1e-6)
    assert m.settings == {"alpha": 0.25, "eta": pytest.approx(0.03), "tw": "pmi", "min_cf": 3, "min_df": 0,
                          "rm_top": 0, "iterations": 25, "burn_in": 5, "optim_interval": 7}
    assert any("most frequent" in note for note in m.notes)  # rm_top=1 is explained


def test_shadows_with_the_recovered_tomotopy_settings_reproduce_the_model(tmp_path, docs):
    from topicaudit.targets import build_target
    from topicaudit.targets.learners.tomotopy_lda import token_lists

    words = used_words(docs)
    X = counts(docs, words)
    user = tp.LDAModel(k=3, alpha=0.2, eta=0.05, seed=8)
    for doc in token_lists(X):
        user.add_doc([words[int(t)] for t in doc])
    user.optim_interval = 5
    user.train(30, workers=1)
    user.save(str(tmp_path / "m.bin"))
    m = load_user_model(tmp_path / "m.bin")
    assert list(m.vocabulary) == words
    learner = build_target("tomotopy-lda", m.k, "all", m.settings).learner
    np.testing.assert_allclose(learner.fit(X, 8), m.phi, atol=1e-6)


def test_a_tomotopy_file_never_unpickles_its_embedded_settings(tmp_path, docs):
    """tomotopy's own load() unpickles the constructor arguments stored in the file; we must not."""
    marker = tmp_path / "unpickled"

    class Trap:
        def __reduce__(self):
            return (Path.touch, (marker,))

    model = tp.LDAModel(k=3, alpha=0.4, seed=1)
    for doc in docs:
        model.add_doc(doc)
    model.train(10, workers=1)
    model.init_params["transform"] = Trap()  # what a malicious file would carry
    model.save(str(tmp_path / "trap.bin"))
    assert not marker.exists()
    m = load_user_model(tmp_path / "trap.bin")
    assert not marker.exists(), "the embedded pickle was executed"
    assert m.settings["alpha"] == 0.4  # the literal settings are still read
    tp.LDAModel.load(str(tmp_path / "trap.bin"))  # the library's own loader does run it: the trap is real
    assert marker.exists()


def test_literal_pickle_reads_literals_and_builds_nothing(tmp_path):
    from topicaudit.inputs.library_models import literal_pickle

    marker = tmp_path / "built"

    class Trap:
        def __reduce__(self):
            return (Path.touch, (marker,))

    value = {"a": 1, "b": [1, 2.5, "x", None, True], "c": (1, 2), "big": 2**70}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert literal_pickle(pickle.dumps(value, protocol=protocol)) == value
    mixed = literal_pickle(pickle.dumps({"alpha": 0.1, "trap": Trap()}))
    assert mixed["alpha"] == 0.1 and type(mixed["trap"]).__name__ == "_Opaque"
    assert literal_pickle(pickle.dumps(Trap())) is None
    assert literal_pickle(b"not a pickle") is None
    assert not marker.exists()


def saved_gensim(tmp_path: Path, docs) -> tuple[Path, LdaModel, Dictionary]:
    dictionary = Dictionary(docs)
    model = LdaModel([dictionary.doc2bow(d) for d in docs], id2word=dictionary, num_topics=3, random_state=4,
                     passes=2, chunksize=40, alpha="asymmetric", iterations=20, eval_every=None)
    path = tmp_path / "lda.model"
    model.save(str(path))
    return path, model, dictionary


def test_a_gensim_model_is_read_only_with_trust_pickle_and_its_settings_reproduce_it(tmp_path, docs):
    from topicaudit.targets import build_target

    path, user, dictionary = saved_gensim(tmp_path, docs)
    with pytest.raises(UserError, match="--trust-pickle") as refused:
        load_user_model(path)
    assert "save_as_text" in str(refused.value)  # the untrusted route is named
    m = load_user_model(path, trust_pickle=True)
    assert (m.phi_format, m.learner) == ("gensim", "gensim-lda")
    s = m.settings
    assert (s["passes"], s["chunksize"], s["iterations"], s["eval_every"]) == (2, 40, 20, None)
    np.testing.assert_allclose(s["alpha"], user.alpha)
    ids = [dictionary[j] for j in range(len(dictionary))]
    assert list(m.column_words) == ids and list(m.vocabulary) == sorted(ids)
    X = counts(docs, ids)  # the dictionary's id order, as gensim saw the documents
    learner = build_target("gensim-lda", m.k, "all", s).learner
    np.testing.assert_allclose(learner.fit(X, 4), user.get_topics(), atol=1e-6)


def test_a_booby_trapped_gensim_file_is_refused_and_never_unpickled(tmp_path, capsys):
    marker = tmp_path / "unpickled"

    class Trap:
        def __reduce__(self):
            return (Path.touch, (marker,))

    evil = tmp_path / "lda.model"
    evil.write_bytes(pickle.dumps({"class": "gensim.models.ldamodel.LdaModel", "payload": Trap()}, protocol=4))
    (tmp_path / "c.json").write_text(json.dumps({"text": [["applebay"]]}))
    code = main(["audit", str(evil), "--candidates", str(tmp_path / "c.json"), "--reference",
                 str(tmp_path / "c.json"), "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "--trust-pickle" in err and "Traceback" not in err
    assert not marker.exists() and not (tmp_path / "run").exists()
    with pytest.raises(UserError, match="--trust-pickle"):
        load_user_model(evil)
    assert not marker.exists()


def test_the_gensim_export_path_needs_no_trust(tmp_path, docs):
    _, user, dictionary = saved_gensim(tmp_path, docs)
    np.save(tmp_path / "phi.npy", user.get_topics())
    dictionary.save_as_text(str(tmp_path / "dictionary.txt"))
    m = load_user_model(tmp_path / "phi.npy", tmp_path / "dictionary.txt")
    ids = [dictionary[j] for j in range(len(dictionary))]
    assert list(m.column_words) == ids
    order = np.argsort(ids)
    np.testing.assert_allclose(m.phi, user.get_topics()[:, order], atol=1e-6)


def test_a_saved_model_carries_its_vocabulary(tmp_path, docs):
    path = saved_tomotopy(tmp_path, docs)
    (tmp_path / "v.txt").write_text("\n".join(WORDS))
    with pytest.raises(UserError, match="drop --vocabulary"):
        load_user_model(path, tmp_path / "v.txt")


# --------------------------------------------------------------------------- #
# Corpora in the model's own tokens
# --------------------------------------------------------------------------- #


def test_token_lists_and_mm_corpora_count_exactly_what_the_model_saw(tmp_path, docs):
    from topicaudit.inputs.corpus import load_corpus

    dictionary = Dictionary(docs)
    dictionary.save_as_text(str(tmp_path / "dictionary.txt"))
    MmCorpus.serialize(str(tmp_path / "c.mm"), [dictionary.doc2bow(d) for d in docs])
    (tmp_path / "c.json").write_text(json.dumps({"text": docs}))
    from_tokens = load_corpus(tmp_path / "c.json")
    from_mm = load_corpus(tmp_path / "c.mm", dictionary=str(tmp_path / "dictionary.txt"))
    assert list(from_tokens.vocabulary) == list(from_mm.vocabulary) == used_words(docs)
    assert (from_tokens.X != from_mm.X).nnz == 0
    assert from_tokens.X.sum() == sum(len(d) for d in docs)
    # Tokens are taken as given: no lower-casing, no length filter.
    (tmp_path / "odd.json").write_text(json.dumps({"text": [["A", "x", "A"], ["x"]]}))
    odd = load_corpus(tmp_path / "odd.json")
    assert list(odd.vocabulary) == ["A", "x"] and odd.X.toarray().tolist() == [[2, 1], [0, 1]]


@pytest.mark.parametrize("content, message", [
    ({"text": [["a"], "b c"]}, "entry 1 .* not a list of non-empty strings"),
    ({"text": [["a", ""]]}, "entry 0 .* not a list of non-empty strings"),
    ({"text": [[]]}, "empty"),
])
def test_bad_token_lists_are_user_errors(tmp_path, content, message):
    from topicaudit.inputs.corpus import load_corpus

    (tmp_path / "c.json").write_text(json.dumps(content))
    with pytest.raises(UserError, match=message):
        load_corpus(tmp_path / "c.json")


def test_an_mm_corpus_needs_its_dictionary(tmp_path, docs):
    from topicaudit.inputs.corpus import load_corpus

    dictionary = Dictionary(docs)
    MmCorpus.serialize(str(tmp_path / "c.mm"), [dictionary.doc2bow(d) for d in docs])
    with pytest.raises(UserError, match="dictionary=PATH"):
        load_corpus(tmp_path / "c.mm")
    (tmp_path / "short.txt").write_text("3\n0\tapplebay\t1\n")
    with pytest.raises(UserError, match="term ids go up to"):
        load_corpus(tmp_path / "c.mm", dictionary=str(tmp_path / "short.txt"))


# --------------------------------------------------------------------------- #
# topicaudit audit end to end, settings from the saved model
# --------------------------------------------------------------------------- #


def test_audit_a_tomotopy_file_with_shadows_trained_like_it(tmp_path, shared_ray, capsys):
    docs = token_docs(60, 1)
    path = saved_tomotopy(tmp_path, docs[:30], alpha=0.2)
    (tmp_path / "cand.json").write_text(json.dumps({"text": docs[:40]}))
    (tmp_path / "ref.json").write_text(json.dumps({"text": docs[40:]}))
    code = main(["audit", str(path), "--candidates", str(tmp_path / "cand.json"), "--reference",
                 str(tmp_path / "ref.json"), "--shadows", "4", "--output", str(tmp_path / "run"),
                 "--param", "iterations=10"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads((tmp_path / "run" / "audit.json").read_text())
    learner = result["learner"]
    assert learner["name"] == "tomotopy-lda" and result["inputs"]["phi"]["format"] == "tomotopy"
    assert learner["params"]["alpha"] == 0.2 and learner["params"]["optim_interval"] == 7
    assert learner["params"]["iterations"] == 10  # --param overrides the model's 25
    assert learner["settings_from"] == "the saved tomotopy model, with --param iterations overriding it"
    assert "shadow settings (the saved tomotopy model" in captured.out
    assert "optim_interval=7" in captured.out


def test_audit_a_trusted_gensim_model_from_an_mm_corpus(tmp_path, shared_ray, capsys):
    docs = token_docs(60, 2)
    path, _, dictionary = saved_gensim(tmp_path, docs[:30])
    MmCorpus.serialize(str(tmp_path / "cand.mm"), [dictionary.doc2bow(d) for d in docs[:40]])
    MmCorpus.serialize(str(tmp_path / "ref.mm"), [dictionary.doc2bow(d) for d in docs[40:]])
    args = ["audit", str(path), "--candidates", str(tmp_path / "cand.mm"), "--reference", str(tmp_path / "ref.mm"),
            "--shadows", "4", "--output", str(tmp_path / "run")]
    assert main(args) == 2 and "--trust-pickle" in capsys.readouterr().err
    code = main(args + ["--trust-pickle"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads((tmp_path / "run" / "audit.json").read_text())
    assert result["learner"]["name"] == "gensim-lda"
    assert result["learner"]["params"]["passes"] == 2 and result["learner"]["params"]["chunksize"] == 40
    assert result["learner"]["settings_from"] == "the saved gensim model"
    assert result["inputs"]["candidates"]["n_scored"] == 40 - result["inputs"]["candidates"]["n_dropped_empty"]


def test_another_learner_than_the_models_is_said_and_drops_its_settings(tmp_path, docs):
    from topicaudit.engine.audit_inputs import audit_config, load_audit_inputs

    path = saved_tomotopy(tmp_path, docs[:60])
    (tmp_path / "c.json").write_text(json.dumps({"text": docs[60:90]}))
    (tmp_path / "r.json").write_text(json.dumps({"text": docs[90:]}))
    config, inputs = load_audit_inputs(audit_config(path, candidates=tmp_path / "c.json",
                                                    reference=tmp_path / "r.json", learner="cgs", shadows=2))
    assert config.model.learner == "cgs" and config.model.params == {}
    assert any("trained with tomotopy" in note for note in inputs.notes)
