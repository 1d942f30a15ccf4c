"""BERTopic models: the saved directory read without BERTopic or pickle, damaged saves, the verbatim-text warning,
pickles refused, and the ``bertopic`` learner (BERTopic's c-TF-IDF, deterministic, no torch).

Two kinds of saved model are read:

* real ones, made in the test by BERTopic itself (``BERTopic.save(serialization="safetensors",
  save_ctfidf=True)``) where BERTopic is importable (``pip install --no-deps bertopic==0.17.4 pandas
  safetensors``; the ``bertopic`` extra does not install it, because BERTopic's own requirements pull in
  sentence-transformers and torch: docs/bertopic.md). Without it those tests are skipped, saying so;
* directories written by this file's own writer (:func:`write_layout`) to BERTopic's documented layout, so the
  damaged-file tests run everywhere. They are labelled as such wherever used.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.bertopic_model import read_safetensors
from topicaudit.inputs.user_model import load_user_model
from topicaudit.targets.learners.bertopic_light import LightBERTopic, class_tfidf
from topicaudit.targets.registry import build_learner

REPO = Path(__file__).resolve().parent.parent
WORDS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "melon", "olive", "peach", "pear", "plum", "berry",
         "engine", "wheel", "brake", "clutch", "piston", "gear", "tyre", "valve", "river", "lake", "ocean", "rain",
         "cloud", "storm", "snow", "wind", "coast", "delta"]


def texts(n: int, seed: int, n_themes: int = 3) -> list[str]:
    """Documents of clear themes (3: fruit, cars, weather; 6: each split in two), 6–14 words each."""
    rng = np.random.default_rng(seed)
    themes = [WORDS[:12], WORDS[12:20], WORDS[20:]] if n_themes == 3 else [WORDS[i:i + 5] for i in range(0, 30, 5)]
    docs = []
    for i in range(n):
        theme = themes[i % len(themes)]
        docs.append(" ".join(rng.choice(theme, size=rng.integers(6, 14))))
    return docs


def counts(docs: list[str]) -> tuple[sp.csr_matrix, list[str]]:
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer()
    X = vectorizer.fit_transform(docs)
    return sp.csr_matrix(X), list(vectorizer.get_feature_names_out())


# --------------------------------------------------------------------------- #
# this file's own writer of BERTopic's documented layout (not BERTopic's output)
# --------------------------------------------------------------------------- #
_DTYPES = {np.dtype("<f8"): "F64", np.dtype("<f4"): "F32", np.dtype("<i8"): "I64", np.dtype("<i4"): "I32"}


def safetensors_bytes(tensors: dict[str, np.ndarray], header_patch=None) -> bytes:
    """The safetensors encoding: u64 little-endian header length, JSON header (space-padded to 8 bytes), buffers."""
    header, buffers, offset = {}, [], 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        buffers.append(data)
        offset += len(data)
    if header_patch:
        header_patch(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(buffers)


def write_layout(path: Path, ctfidf: np.ndarray, words: list[str], sizes: dict[int, int], *, topics_extra=None,
                 config_extra=None) -> Path:
    """A directory in BERTopic's safetensors layout, written by this test (BERTopic not involved)."""
    path.mkdir(parents=True, exist_ok=True)
    matrix = sp.csr_matrix(ctfidf)
    (path / "ctfidf.safetensors").write_bytes(safetensors_bytes({
        "indptr": matrix.indptr.astype(np.int32), "indices": matrix.indices.astype(np.int32),
        "data": matrix.data.astype(np.float64), "shape": np.array(matrix.shape, dtype=np.int64),
        "diag": np.ones(len(words))}))
    (path / "topic_embeddings.safetensors").write_bytes(
        safetensors_bytes({"topic_embeddings": np.zeros((len(sizes), 4), dtype=np.float32)}))
    (path / "ctfidf_config.json").write_text(json.dumps({
        "ctfidf_model": {"bm25_weighting": False, "reduce_frequent_words": False},
        "vectorizer_model": {"params": {"min_df": 1, "max_df": 1.0, "max_features": None, "ngram_range": [1, 1]},
                             "vocab": {w: i for i, w in enumerate(words)}}}))
    outliers = int(-1 in sizes)
    (path / "topics.json").write_text(json.dumps({
        "topic_representations": {str(t): [[words[0], 0.1]] for t in sizes},
        "topics": [t for t, n in sizes.items() for _ in range(n)], "topic_sizes": {str(t): n for t, n in sizes.items()},
        "topic_mapper": [], "topic_labels": {str(t): str(t) for t in sizes}, "custom_labels": None,
        "_outliers": outliers, "topic_aspects": {}, **(topics_extra or {})}))
    (path / "config.json").write_text(json.dumps({"min_topic_size": 10, "nr_topics": None, "top_n_words": 10,
                                                   **(config_extra or {})}))
    return path


@pytest.fixture
def layout(tmp_path):
    """A 3-topic model (topic -1 and two others) over 6 words, in BERTopic's layout by this test's writer."""
    words = ["car", "gear", "lake", "rain", "apple", "pear"]
    ctfidf = np.array([[0.1, 0.0, 0.2, 0.0, 0.3, 0.0],
                       [0.5, 0.4, 0.0, 0.0, 0.0, 0.1],
                       [0.0, 0.0, 0.6, 0.7, 0.0, 0.0]])
    return write_layout(tmp_path / "model", ctfidf, words, {-1: 4, 0: 10, 1: 7}), ctfidf, words


# --------------------------------------------------------------------------- #
# safetensors
# --------------------------------------------------------------------------- #
def test_safetensors_reader_agrees_with_the_safetensors_package(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed "
                                            "(pip install safetensors) to compare against")
    rng = np.random.default_rng(0)
    tensors = {"a": rng.random((3, 4)), "b": rng.integers(0, 9, size=7).astype(np.int32),
               "c": rng.random(5).astype(np.float32), "empty": np.zeros((0, 3)), "n": np.array([2, 5], dtype=np.int64)}
    path = tmp_path / "t.safetensors"
    safetensors_numpy.save_file(tensors, str(path))
    ours = read_safetensors(path)
    theirs = safetensors_numpy.load_file(str(path))
    assert set(ours) == set(theirs) == set(tensors)
    for name in tensors:
        assert ours[name].dtype == theirs[name].dtype and np.array_equal(ours[name], theirs[name])
    # and the package reads what this file's writer writes
    (tmp_path / "w.safetensors").write_bytes(safetensors_bytes({k: v for k, v in tensors.items() if k != "empty"}))
    assert np.array_equal(safetensors_numpy.load_file(str(tmp_path / "w.safetensors"))["a"], tensors["a"])


def _damage(header: dict, how: str) -> None:
    if how == "dtype":
        header["data"]["dtype"] = "BF16"
    elif how == "shape":
        header["data"]["shape"] = [header["data"]["shape"][0] + 1]
    elif how == "overlap":
        header["indices"]["data_offsets"] = [0, header["indices"]["data_offsets"][1] - header["indices"]
                                             ["data_offsets"][0]]
    elif how == "outside":
        header["diag"]["data_offsets"][1] += 10**12
    elif how == "negative":
        header["data"]["shape"] = [-1]


@pytest.mark.parametrize("how, message", [
    ("dtype", "dtype 'BF16'"), ("shape", "data_offsets span"), ("overlap", "overlap or leave a gap"),
    ("outside", "outside the file"), ("negative", "not a list of whole numbers"),
])
def test_a_damaged_safetensors_header_is_one_error_naming_the_file(layout, how, message):
    path, ctfidf, words = layout
    matrix = sp.csr_matrix(ctfidf)
    (path / "ctfidf.safetensors").write_bytes(safetensors_bytes({
        "indptr": matrix.indptr.astype(np.int32), "indices": matrix.indices.astype(np.int32),
        "data": matrix.data, "shape": np.array(matrix.shape, dtype=np.int64), "diag": np.ones(len(words))},
        header_patch=lambda h: _damage(h, how)))
    with pytest.raises(UserError, match=message) as error:
        load_user_model(path)
    assert "ctfidf.safetensors" in str(error.value) and "\n" not in str(error.value)


def test_truncated_and_garbled_safetensors_files(layout):
    path, _, _ = layout
    good = (path / "ctfidf.safetensors").read_bytes()
    cases = [
        (good[:5], "too short"),
        (good[:-3], "outside the file.s 173 bytes of data"),
        ((10**9).to_bytes(8, "little") + good[8:], "declares 1000000000 bytes"),
        (good[:8] + b"{not json" + good[17:], "not UTF-8 JSON"),
        ((2).to_bytes(8, "little") + b"[]", "not an object"),
    ]
    for raw, message in cases:
        (path / "ctfidf.safetensors").write_bytes(raw)
        with pytest.raises(UserError, match=message) as error:
            load_user_model(path)
        assert "ctfidf.safetensors" in str(error.value)


# --------------------------------------------------------------------------- #
# the saved directory
# --------------------------------------------------------------------------- #
def test_layout_reads_as_the_row_normalised_ctfidf_with_the_outlier_topic_kept(layout):
    path, ctfidf, words = layout
    model = load_user_model(path)
    order = np.argsort(words)
    assert list(model.vocabulary) == sorted(words)
    assert np.allclose(model.phi, (ctfidf / ctfidf.sum(axis=1, keepdims=True))[:, order])
    assert model.k == 3 and model.library == "bertopic" and model.learner == "bertopic"
    assert model.settings == {"min_topic_size": 10, "clustering": "hdbscan", "bm25_weighting": False,
                              "reduce_frequent_words": False, "min_df": 1, "max_df": 1.0}
    assert any("topic -1" in note and "kept as a row" in note for note in model.notes)
    assert any("TF-IDF + truncated SVD" in note for note in model.notes)  # what the shadows embed with, said plainly
    assert not model.verbatim
    assert model.phi_sha256 == load_user_model(path).phi_sha256


def test_named_sentence_transformer_is_said_plainly(layout, tmp_path):
    _, ctfidf, words = layout
    path = write_layout(tmp_path / "st", ctfidf, words, {-1: 4, 0: 10, 1: 7},
                        config_extra={"embedding_model": "sentence-transformers/all-MiniLM-L6-v2"})
    note = next(n for n in load_user_model(path).notes if "embedded its documents" in n)
    assert "'sentence-transformers/all-MiniLM-L6-v2'" in note and "TF-IDF + truncated SVD" in note
    assert "weakens the attack" in note


@pytest.mark.parametrize("change, message", [
    (lambda p: (p / "topics.json").write_text("{"), "topics.json: invalid JSON"),
    (lambda p: (p / "topics.json").write_text(json.dumps({"topic_sizes": {"-1": 4, "0": 10}, "_outliers": 1})),
     "topic_sizes names 2 topics but ctfidf.safetensors has 3 rows"),
    (lambda p: (p / "topics.json").write_text(json.dumps({"topic_sizes": {"a": 1}})), "not a topic number"),
    (lambda p: (p / "ctfidf_config.json").write_text(json.dumps({"vectorizer_model": {"vocab": {"a": 0, "b": 0}}})),
     "distinct columns"),
    (lambda p: (p / "ctfidf_config.json").write_text(json.dumps(
        {"vectorizer_model": {"vocab": {"a": 0, "b": 1}}})), "has 6 columns but ctfidf_config.json's vocabulary has 2"),
    (lambda p: (p / "ctfidf.safetensors").unlink(), "saved without its c-TF-IDF matrix"),
    (lambda p: (p / "topics.json").unlink(), "not a saved BERTopic model"),
])
def test_damaged_saves_are_one_error_naming_the_file(layout, change, message):
    path, _, _ = layout
    change(path)
    with pytest.raises(UserError, match=message) as error:
        load_user_model(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_a_fifo_in_the_directory_is_refused_not_read(layout):
    import os

    path, _, _ = layout
    (path / "ctfidf.safetensors").unlink()
    os.mkfifo(path / "ctfidf.safetensors")  # a plain open() would wait for a writer forever
    with pytest.raises(UserError, match="not a regular file"):
        load_user_model(path)


def test_broken_csr_structure_and_values(layout):
    path, ctfidf, words = layout
    matrix = sp.csr_matrix(ctfidf)
    base = {"indptr": matrix.indptr.astype(np.int64), "indices": matrix.indices.astype(np.int64),
            "data": matrix.data, "shape": np.array(matrix.shape, dtype=np.int64), "diag": np.ones(len(words))}
    bad_indptr = base["indptr"].copy()
    bad_indptr[1], bad_indptr[2] = bad_indptr[2], bad_indptr[1]
    bad_index = base["indices"].copy()
    bad_index[0] = 99
    nan = base["data"].copy()
    nan[0] = np.nan
    for patch, message in [({"indptr": bad_indptr}, "CSR structure"), ({"indices": bad_index}, "column index"),
                           ({"data": nan}, "NaN"), ({"shape": np.array([3, 6, 1])}, "not 2"),
                           ({"data": base["data"].astype(np.int64)}, "not a 1-D float array")]:
        (path / "ctfidf.safetensors").write_bytes(safetensors_bytes({**base, **patch}))
        with pytest.raises(UserError, match=message):
            load_user_model(path)
    del base["indices"]
    (path / "ctfidf.safetensors").write_bytes(safetensors_bytes(base))
    with pytest.raises(UserError, match="no tensor 'indices'"):
        load_user_model(path)


def test_a_shape_larger_than_memory_is_refused_before_allocating(layout):
    path, _, words = layout
    (path / "ctfidf_config.json").write_text(json.dumps({"vectorizer_model": {"vocab": {f"w{i}": i for i in
                                                                                         range(10**6)}}}))
    indptr = np.zeros(10**6 + 1, dtype=np.int32)
    (path / "ctfidf.safetensors").write_bytes(safetensors_bytes({
        "indptr": indptr, "indices": np.zeros(0, np.int32), "data": np.zeros(0), "shape": np.array([10**6, 10**6]),
        "diag": np.ones(1)}))
    (path / "topics.json").write_text(json.dumps({"topic_sizes": {str(i): 1 for i in range(10**6)}, "_outliers": 0}))
    with pytest.raises(UserError, match="memory"):
        load_user_model(path)


def test_vocabulary_flag_is_refused_for_a_saved_model(layout, tmp_path):
    path, _, _ = layout
    (tmp_path / "v.txt").write_text("a\n")
    with pytest.raises(UserError, match="carries its own vocabulary"):
        load_user_model(path, tmp_path / "v.txt")


# --------------------------------------------------------------------------- #
# training text verbatim, and pickles
# --------------------------------------------------------------------------- #
def test_verbatim_training_text_is_said_first_naming_the_field(layout, tmp_path):
    from topicaudit.engine.audit_inputs import audit_config, load_audit_inputs

    _, ctfidf, words = layout
    path = write_layout(tmp_path / "verbatim", ctfidf, words, {-1: 4, 0: 10, 1: 7},
                        topics_extra={"representative_docs": {"0": ["car gear car", "gear car"]}})
    model = load_user_model(path)
    assert model.verbatim == ["topics.json: representative_docs"]
    docs = ["car gear lake", "rain lake apple", "pear apple car", "gear rain pear"]
    (tmp_path / "c.json").write_text(json.dumps({"text": docs}))
    (tmp_path / "r.json").write_text(json.dumps({"text": docs[::-1] * 3}))
    config = audit_config(path, candidates=tmp_path / "c.json", reference=tmp_path / "r.json", preprocess=False,
                          shadows=2, output=tmp_path / "out")
    resolved, inputs = load_audit_inputs(config)
    assert "holds training text verbatim (topics.json: representative_docs)" in inputs.notes[0]
    # the released Φ is scored as the shadows are: mixed with s/V (the learner's smoothing, 1e-6 by default)
    assert resolved.model.learner == "bertopic" and inputs.model.phi.min() > 0
    assert np.allclose(inputs.model.phi, (1 - 1e-6) * model.phi + 1e-6 / model.phi.shape[1])
    assert any("scored the same way" in note for note in inputs.notes)
    # HDBSCAN (the model has an outlier topic): the shadows' k caps their topics at twice Φ's 3 rows
    assert resolved.model.k == 6 and any("k is a cap" in note for note in inputs.notes)
    _, exact = load_audit_inputs(audit_config(path, candidates=tmp_path / "c.json", reference=tmp_path / "r.json",
                                              preprocess=False, shadows=2, output=tmp_path / "out2",
                                              params={"smoothing": 0}))
    assert np.array_equal(exact.model.phi, model.phi)


def _fake_pickle(path: Path, verbatim: bool) -> Path:
    """Bytes shaped like a joblib dump of a BERTopic object (a class reference, attribute names); never loaded."""
    body = b"\x80\x04\x95\x00\x01\x00\x00\x00\x00\x00\x00\x8c\x12bertopic._bertopic\x94\x8c\x08BERTopic\x94\x93"
    body += b"\x8c\x14representative_docs_" if verbatim else b"\x8c\x07topics_"
    path.write_bytes(body + b"os.system('touch PWNED')" + b"\x00" * 64)
    return path


def test_a_pickled_bertopic_model_is_refused_without_trust_and_its_verbatim_text_named(tmp_path):
    for verbatim in (True, False):
        path = _fake_pickle(tmp_path / f"model-{verbatim}", verbatim)  # no extension: recognised by its bytes
        with pytest.raises(UserError, match="--trust-pickle") as error:
            load_user_model(path)
        assert ("representative_docs_" in str(error.value)) == verbatim
        assert "serialization='safetensors'" in str(error.value)
    assert not (tmp_path / "PWNED").exists()


# --------------------------------------------------------------------------- #
# the learner
# --------------------------------------------------------------------------- #
def test_class_tfidf_is_bertopics_formula():
    X = sp.csr_matrix(np.array([[3, 0, 1, 0], [1, 2, 0, 0], [0, 1, 5, 0]], dtype=float))
    A = int(np.asarray(X.sum(axis=1)).mean())  # BERTopic truncates the mean words per topic to a whole number
    f = np.asarray(X.sum(axis=0)).ravel()
    tf = X.toarray() / np.asarray(X.sum(axis=1))
    expected = tf * np.where(f > 0, np.log(A / np.where(f > 0, f, 1) + 1), 0)
    assert np.allclose(class_tfidf(X).toarray(), expected)  # the unseen last word: weight 0, not NaN
    bm25 = np.where(f > 0, np.log(1 + (A - f + 0.5) / (f + 0.5)), 0)
    assert np.allclose(class_tfidf(X, bm25_weighting=True, reduce_frequent_words=True).toarray(), np.sqrt(tf) * bm25)


@pytest.mark.parametrize("params", [{}, {"clustering": "kmeans"}, {"min_topic_size": 5, "reduction": "none"}])
def test_learner_is_deterministic_from_its_seed_and_returns_k_rows(params):
    X, _ = counts(texts(240, 0))
    learner = build_learner("bertopic", 4, params)
    phi = learner.fit(X, 11)
    assert phi.shape == (4, X.shape[1]) and phi.dtype == np.float32
    assert np.allclose(phi.sum(axis=1), 1, atol=1e-5) and np.all(phi >= 0)
    assert np.array_equal(phi, learner.fit(X, 11))
    assert np.array_equal(phi, build_learner("bertopic", 4, params).fit(X, 11))
    assert phi.min() > 0  # smoothing (1e-6 by default): no word has probability 0
    exact = build_learner("bertopic", 4, {**params, "smoothing": 0}).fit(X, 11)
    assert np.allclose(phi, (1 - 1e-6) * exact + 1e-6 / X.shape[1], atol=1e-7) and exact.min() == 0


def test_learner_merges_to_k_and_pads_with_a_repeated_row():
    X, _ = counts(texts(300, 1, n_themes=6))
    many = LightBERTopic(k=40, min_topic_size=10)
    ctfidf, ids, labels = many.fit_topics(X, 0)
    found = len(ids)
    assert found >= 4  # six themes
    padded = many.fit(X, 0)
    distinct = np.unique(padded.round(6), axis=0)
    assert distinct.shape[0] == found  # k − found rows repeat a topic's row (ζ unchanged)
    merged = LightBERTopic(k=3, min_topic_size=10)
    _, ids3, labels3 = merged.fit_topics(X, 0)
    assert len(ids3) <= 3 and merged.fit(X, 0).shape[0] == 3


@pytest.mark.parametrize("clustering", ["hdbscan", "kmeans"])
def test_learner_on_fewer_documents_than_a_topic_needs(clustering):
    """A shadow with fewer documents than min_topic_size (HDBSCAN refuses to run) or no words at all still gives Φ."""
    X = sp.csr_matrix(np.array([[1, 2, 0, 0], [0, 1, 3, 0], [2, 0, 0, 1], [0, 0, 1, 1], [1, 1, 1, 1]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # nothing for a Ray worker to relay
        for n in (1, 2, 5):
            phi = LightBERTopic(3, clustering=clustering).fit(X[:n], 0)
            assert phi.shape == (3, 4) and np.allclose(phi.sum(axis=1), 1)
        assert np.allclose(LightBERTopic(3, clustering=clustering).fit(sp.csr_matrix((4, 4)), 0), 0.25)


def test_learner_refuses_bad_settings():
    for key, value in [("smoothing", 1.0), ("smoothing", -0.1), ("clustering", "dbscan"), ("reduction", "umap"),
                       ("min_topic_size", 1), ("min_df", -1), ("max_df", 1.5), ("bm25_weighting", "yes"), ("embedding", "all-MiniLM-L6-v2")]:
        with pytest.raises(UserError, match=key):
            build_learner("bertopic", 3, {key: value})


def test_neither_the_reader_nor_the_learner_needs_torch_or_bertopic(layout):
    """In a fresh interpreter: read a saved model and fit the learner, then check what was imported."""
    path, _, _ = layout
    code = (
        "import sys, importlib.abc, numpy as np, scipy.sparse as sp\n"
        "class Block(importlib.abc.MetaPathFinder):  # importing any of these now fails\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'sentence_transformers', 'bertopic', 'umap', 'safetensors',\n"
        "                                  'transformers', 'hdbscan', 'pandas'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from topicaudit.inputs.user_model import load_user_model\n"
        "from topicaudit.targets.registry import build_learner\n"
        f"model = load_user_model({str(path)!r})\n"
        "X = sp.random(60, 20, density=0.3, random_state=0, format='csr') * 10\n"
        "X.data = np.ceil(X.data)\n"
        "phi = build_learner('bertopic', 3, {'min_topic_size': 5}).fit(X, 0)\n"
        "print(model.k, phi.shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "(3,", "20)"]


def test_the_bertopic_extra_installs_nothing_that_needs_torch():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "bertopic" in extras
    names = " ".join(extras["bertopic"]).lower()
    for heavy in ("torch", "sentence-transformers", "sentence_transformers", "transformers", "bertopic"):
        assert heavy not in names, heavy


# --------------------------------------------------------------------------- #
# against BERTopic itself, where it is importable
# --------------------------------------------------------------------------- #
def _bertopic():
    return pytest.importorskip("bertopic", reason="BERTopic is not installed; the bertopic extra does not install it "
                               "(its requirements pull in torch): pip install --no-deps bertopic==0.17.4 pandas "
                               "safetensors to run these tests")


def _fit_bertopic(docs, seed, learner: LightBERTopic, **kwargs):
    """BERTopic fitted with the learner's own embeddings, PCA(5) and scikit-learn's HDBSCAN (or k-means)."""
    bertopic = _bertopic()
    from sklearn.cluster import HDBSCAN, KMeans
    from sklearn.decomposition import PCA

    X, _ = counts(docs)
    embeddings = learner.embed(X, seed)
    cluster = (KMeans(learner.k, random_state=seed, n_init="auto") if learner.clustering == "kmeans"
               else HDBSCAN(min_cluster_size=learner.min_topic_size, copy=True))
    model = bertopic.BERTopic(umap_model=PCA(5, random_state=seed), hdbscan_model=cluster, **kwargs)
    model.fit(docs, embeddings)
    return model


@pytest.mark.parametrize("clustering", ["hdbscan", "kmeans"])
def test_learner_gives_bertopics_phi_from_the_same_documents_and_seed(clustering):
    docs = texts(300, 2)
    learner = LightBERTopic(k=4, clustering=clustering, smoothing=0.0)  # BERTopic's Φ exactly
    model = _fit_bertopic(docs, 5, learner, nr_topics=4 if clustering == "hdbscan" else None)
    X, words = counts(docs)
    theirs = model.c_tf_idf_.toarray()
    columns = [words.index(w) for w in model.vectorizer_model.get_feature_names_out()]
    expected = np.zeros((theirs.shape[0], len(words)))
    expected[:, columns] = theirs
    expected /= expected.sum(axis=1, keepdims=True)
    ours = learner.fit(X, 5).astype(np.float64)
    assert np.allclose(ours[: expected.shape[0]], expected, atol=1e-6)


def test_a_model_saved_by_bertopic_reads_as_its_ctfidf_with_its_settings(tmp_path):
    docs = texts(300, 3)
    learner = LightBERTopic(k=4)
    model = _fit_bertopic(docs, 1, learner, min_topic_size=10)
    model.save(tmp_path / "saved", serialization="safetensors", save_ctfidf=True, save_embedding_model=False)
    loaded = load_user_model(tmp_path / "saved")
    words = list(model.vectorizer_model.get_feature_names_out())
    expected = model.c_tf_idf_.toarray()
    expected = expected / expected.sum(axis=1, keepdims=True)
    assert list(loaded.vocabulary) == sorted(words)
    assert np.allclose(loaded.phi, expected[:, np.argsort(words)])
    assert loaded.settings["min_topic_size"] == 10
    assert loaded.settings["clustering"] == ("hdbscan" if -1 in model.topic_sizes_ else "kmeans")
    assert loaded.settings_record["read_without_unpickling"]["topics"] == len(model.topic_sizes_)
    assert not loaded.verbatim  # BERTopic 0.17's safetensors save keeps no representative documents


def test_bertopics_own_pickle_loads_only_with_trust_and_its_representative_docs_are_named(tmp_path):
    docs = texts(300, 4)
    model = _fit_bertopic(docs, 2, LightBERTopic(k=4))
    model.save(tmp_path / "model.pickle", serialization="pickle", save_embedding_model=False)
    with pytest.raises(UserError, match="representative_docs_.*--trust-pickle"):
        load_user_model(tmp_path / "model.pickle")
    loaded = load_user_model(tmp_path / "model.pickle", trust_pickle=True)
    assert loaded.verbatim and loaded.verbatim[0].startswith("representative_docs_")
    expected = model.c_tf_idf_.toarray()
    assert np.allclose(np.sort(loaded.phi.sum(axis=0)), np.sort((expected / expected.sum(1, keepdims=True)).sum(0)))


# --------------------------------------------------------------------------- #
# the command, end to end (real Ray, few shadows)
# --------------------------------------------------------------------------- #
def test_audit_command_on_a_saved_directory_end_to_end(tmp_path, shared_ray, capsys):
    """``topicaudit audit DIR`` on a directory in BERTopic's layout (this test's writer; the BERTopic-made ones are
    read by the tests above): the verbatim note first, the saved settings used, the files written."""
    from topicaudit.cli.main import main

    docs = texts(90, 5, n_themes=6)
    X, words = counts(docs[:60])
    learner = LightBERTopic(k=4, min_topic_size=5, smoothing=0.0)
    ctfidf, ids, labels = learner.fit_topics(X, 0)
    path = write_layout(tmp_path / "model", ctfidf.toarray(), words,
                        {int(t): int(np.count_nonzero(labels == t)) for t in ids},
                        topics_extra={"representative_docs": {"0": docs[:2]}}, config_extra={"min_topic_size": 5})
    (tmp_path / "c.json").write_text(json.dumps({"text": docs[:15] + docs[60:75]}))
    (tmp_path / "r.json").write_text(json.dumps({"text": docs[15:60] + docs[75:]}))
    code = main(["audit", str(path), "--candidates", str(tmp_path / "c.json"), "--reference", str(tmp_path / "r.json"),
                 "--no-preprocess", "--shadows", "4", "--output", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 0, err
    notes = [line for line in err.splitlines() if "note:" in line]
    assert "holds training text verbatim (topics.json: representative_docs)" in notes[0]
    assert "shadow settings (the saved bertopic model, read without unpickling)" in out
    result = json.loads((tmp_path / "run" / "audit.json").read_text())
    assert result["inputs"]["phi"]["format"] == "bertopic"
    assert result["inputs"]["phi"]["verbatim_text"] == ["topics.json: representative_docs"]
    assert result["learner"]["name"] == "bertopic" and result["learner"]["params"]["min_topic_size"] == 5
    # with HDBSCAN k caps the shadows' topics: twice Φ's rows, so that they need not merge what the model did not
    # (a model without outlier topic is clustered by k-means into its own k)
    assert result["learner"]["k"] == (2 if -1 in ids else 1) * result["inputs"]["phi"]["k"]
    assert result["learner"]["params"]["clustering"] == ("hdbscan" if -1 in ids else "kmeans")
    assert result["learner"]["model_settings"]["read_without_unpickling"]["outlier_topic"] == (-1 in ids)
    assert (tmp_path / "run" / "scores.csv").exists()


def test_run_with_the_bertopic_learner_end_to_end(tmp_path, shared_ray, capsys):
    """``topicaudit run --learner bertopic``: a BERTopic-like target and its shadows, attacked like any learner's."""
    from topicaudit.cli.main import main

    (tmp_path / "corpus.json").write_text(json.dumps({"text": texts(160, 6, n_themes=6)}))
    code = main(["run", "--corpus", str(tmp_path / "corpus.json"), "--no-preprocess", "--learner", "bertopic",
                 "--k", "8", "--shadows", "4", "--output", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 0, err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["target"]["learner"] == "bertopic" and results["target"]["k"] == 8
    assert 0.0 <= results["attacks"]["lira_online"]["auc"] <= 1.0
    target = np.load(tmp_path / "run" / "models" / "target.npz")
    assert target["phi"].shape[0] == 8 and target["phi"].min() > 0  # k rows; smoothed
