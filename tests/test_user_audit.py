"""``topicaudit audit``: a user's own Φ, candidates and reference → ranked membership scores.

The acceptance test exports a Φ trained on a hidden random half of PHEME
candidates and checks, from that hidden truth, that the command ranks members
above non-members. The rest: every Φ and vocabulary loader, every refusal
(exit 2, one message, no directory), pickles, CSV escaping, resume.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from topicaudit.cli.main import main
from topicaudit.inputs.corpus import load_corpus
from topicaudit.errors import UserError
from topicaudit.inputs.user_model import load_user_model
from topicaudit.inputs.vocabulary_file import read_vocabulary

WORDS = [f"{a}{b}" for a in ("apple", "brick", "cloud", "delta", "ember") for b in ("ash", "bay", "cove", "dune")]


def run_cli(capsys, *args):
    code = main(["audit", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def read_scores(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def auc(scores, labels) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(np.asarray(labels, dtype=bool), np.asarray(scores, dtype=float)))


# --------------------------------------------------------------------------- #
# A small synthetic setting with text (for fast end-to-end runs)
# --------------------------------------------------------------------------- #


def synthetic_texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(len(WORDS), 0.2), size=3)
    docs = []
    for _ in range(n):
        theta = rng.dirichlet(np.full(3, 0.3))
        words = rng.choice(WORDS, size=rng.integers(6, 14), p=theta @ topics)
        docs.append(" ".join(words))
    return docs


@pytest.fixture
def tiny(tmp_path):
    """Φ (k=3, rows on the simplex), its vocabulary, 30 candidates and 40 reference documents."""
    rng = np.random.default_rng(7)
    phi = rng.dirichlet(np.ones(len(WORDS)), size=3)
    np.save(tmp_path / "phi.npy", phi)
    (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    (tmp_path / "cand.json").write_text(json.dumps({"text": synthetic_texts(30, 1)}))
    (tmp_path / "ref.json").write_text(json.dumps({"text": synthetic_texts(40, 2)}))
    return tmp_path


def tiny_args(d: Path, *extra, phi="phi.npy", output="run"):
    return (d / phi, "--vocabulary", d / "vocab.txt", "--candidates", d / "cand.json", "--reference", d / "ref.json",
            "--no-preprocess", "--shadows", 4, "--output", d / output, *extra)


# --------------------------------------------------------------------------- #
# Acceptance: a Φ exported from a PHEME target, the truth hidden from the command
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def pheme_export(tmp_path_factory, pheme_path):
    """A released PHEME model and the files a user would hand to `topicaudit audit`.

    400 candidates, of which a hidden random half trained the target together
    with 400 further documents the auditor never sees; 800 reference documents
    from the same corpus. The target thus learns from ~600 documents, as many
    as each shadow (half of the 1,200-document pool), and its vocabulary is
    the words of its own training documents, as CountVectorizer would give.
    """
    from topicaudit.inputs.corpus import corpus_from_texts
    from topicaudit.targets import build_target

    texts = json.loads(pheme_path.read_text())["text"]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(texts))
    candidates = [texts[i] for i in order[:400]]
    reference = [texts[i] for i in order[400:1200]]
    private = [texts[i] for i in order[1200:1600]]
    member = rng.random(len(candidates)) < 0.5
    training = corpus_from_texts([t for t, m in zip(candidates, member) if m] + private, preprocess=False)
    release = build_target("lda", 5).fit(training.X, int(rng.integers(2**32)))

    d = tmp_path_factory.mktemp("pheme-audit")
    np.save(d / "phi.npy", release.phi.astype(np.float64))
    (d / "vocab.txt").write_text("\n".join(training.vocabulary[release.vocabulary]) + "\n")
    (d / "candidates.json").write_text(json.dumps({"text": candidates}))
    (d / "reference.json").write_text(json.dumps({"text": reference}))
    return d, member


def test_ranks_hidden_pheme_members_above_non_members(pheme_export, shared_ray, capsys):
    d, member = pheme_export
    code, out, err = run_cli(capsys, d / "phi.npy", "--vocabulary", d / "vocab.txt",
                             "--candidates", d / "candidates.json", "--reference", d / "reference.json",
                             "--no-preprocess", "--shadows", 16, "--output", d / "run")
    assert code == 0, err
    rows = read_scores(d / "run" / "scores.csv")
    result = json.loads((d / "run" / "audit.json").read_text())
    is_member = member[[int(r["candidate"]) for r in rows]]

    # The ranking the command outputs (recommended for 16 shadows: offline LiRA with shrunk variance;
    # plain offline LiRA measured AUC 0.84-0.88 over four splits (seeds 0-3) with 16 shadows); chance is 0.5.
    ranking_auc = auc([-int(r["rank"]) for r in rows], is_member)
    online_auc = auc([float(r["lira_online"]) for r in rows], is_member)  # measured 0.80-0.86
    print(f"AUC from the hidden truth: ranking (offline) {ranking_auc:.3f}, online {online_auc:.3f}; "
          f"wall {result['timings_s']['total']} s")
    assert ranking_auc > 0.75
    assert online_auc > 0.70
    assert auc([-float(r["lira_offline_shrunk_p"]) for r in rows], is_member) == pytest.approx(ranking_auc, abs=0.01)
    assert result["ranking"]["rank_by"] == "lira_offline_shrunk" and result["ranking"]["recommended"]
    assert "recommended for 16 shadow models" in out

    # The files say what was audited and how.
    assert result["schema"] == "topicaudit.user-audit/2"
    from topicaudit.inputs.files import file_sha256
    assert result["inputs"]["phi"]["sha256"] == file_sha256(d / "phi.npy")
    assert result["inputs"]["phi"]["k"] == 5
    assert (result["learner"]["name"], result["learner"]["k"], result["learner"]["params"]) == ("lda", 5, {})
    assert result["shadows"]["n_shadows"] == 16 and result["shadows"]["in_per_candidate"] == 8
    assert result["shadows"]["pool_docs"] == 400 - result["inputs"]["candidates"]["n_dropped_empty"] + \
        result["inputs"]["reference"]["n_used"]
    cands = result["inputs"]["candidates"]
    assert len(rows) == cands["n_scored"] == 400 - cands["n_dropped_empty"]
    assert sorted(int(r["candidate"]) for r in rows) == sorted(set(range(400)) - set(cands["dropped_empty"]))
    assert [int(r["rank"]) for r in rows] == list(range(1, len(rows) + 1))
    p = np.array([float(r["lira_offline_shrunk_p"]) for r in rows])
    assert np.all(np.diff(p) >= 0), "the default ranking (recommended) orders by the shrunk offline p-value"
    population = np.array([float(r["rmia_population"]) for r in rows])
    assert ((population >= 0) & (population <= 1)).all()
    assert result["top"][0]["candidate"] == int(rows[0]["candidate"]) and len(result["top"]) == 10
    assert result["statistics"]["max_zeta_gap"] <= 1e-8
    # The short table on stdout: the top ten, in order.
    table = out.splitlines()
    first = next(i for i, line in enumerate(table) if line.split()[:2] == ["rank", "candidate"])
    assert [int(line.split()[1]) for line in table[first + 1:first + 11]] == \
        [int(r["candidate"]) for r in rows[:10]]


# --------------------------------------------------------------------------- #
# Φ and vocabulary loaders
# --------------------------------------------------------------------------- #


def _phi(k=3, v=5, seed=0):
    return np.random.default_rng(seed).dirichlet(np.ones(v), size=k)


def _vocab(tmp_path, words, name="vocab.txt"):
    path = tmp_path / name
    path.write_text("\n".join(words) + "\n")
    return path


def test_npy_npz_and_csv_give_the_same_model_with_columns_sorted_by_word(tmp_path):
    phi = _phi()
    words = ["echo", "alpha", "delta", "bravo", "charlie"]
    vocab = _vocab(tmp_path, words)
    np.save(tmp_path / "a.npy", phi)
    np.savez(tmp_path / "single.npz", whatever=phi)
    np.savez(tmp_path / "named.npz", phi=phi, other=np.zeros(3))
    np.savez(tmp_path / "sk.npz", components_=phi, doc_topic=np.zeros((2, 3)))
    np.savetxt(tmp_path / "a.csv", phi, delimiter=",")
    models = [load_user_model(tmp_path / f, vocab) for f in ("a.npy", "single.npz", "named.npz", "sk.npz", "a.csv")]
    order = np.argsort(words)
    for m in models:
        assert list(m.vocabulary) == sorted(words)
        np.testing.assert_allclose(m.phi, phi[:, order], rtol=1e-12)
        np.testing.assert_allclose(m.phi.sum(axis=1), 1.0, rtol=1e-15)
    assert [m.phi_format for m in models] == ["npy", "npz", "npz", "npz", "csv"]


def test_csv_header_is_checked_against_the_vocabulary_or_serves_as_it(tmp_path):
    phi = _phi(k=2, v=3)
    body = "\n".join(",".join(str(float(x)) for x in row) for row in phi)
    (tmp_path / "h.csv").write_text("gamma,alpha,beta\n" + body + "\n")
    m = load_user_model(tmp_path / "h.csv")  # no vocabulary: the header names the words
    assert list(m.vocabulary) == ["alpha", "beta", "gamma"]
    np.testing.assert_allclose(m.phi, phi[:, [1, 2, 0]])
    # pandas' DataFrame.to_csv: an unnamed index column first
    (tmp_path / "pd.csv").write_text(",gamma,alpha,beta\n" + "\n".join(f"{i}," + ",".join(str(float(x)) for x in row)
                                                                       for i, row in enumerate(phi)) + "\n")
    np.testing.assert_allclose(load_user_model(tmp_path / "pd.csv").phi, m.phi)
    with pytest.raises(UserError, match=r"h\.csv, line 1: the CSV header names column 1 'gamma'"):
        load_user_model(tmp_path / "h.csv", _vocab(tmp_path, ["alpha", "beta", "gamma"]))


def test_vocabulary_files(tmp_path):
    assert read_vocabulary(_vocab(tmp_path, ["b", "a"])) == ["b", "a"]
    (tmp_path / "list.json").write_text(json.dumps(["b", "a"]))
    assert read_vocabulary(tmp_path / "list.json") == ["b", "a"]
    (tmp_path / "cv.json").write_text(json.dumps({"a": 1, "b": 0}))  # CountVectorizer.vocabulary_
    assert read_vocabulary(tmp_path / "cv.json") == ["b", "a"]
    (tmp_path / "bad.json").write_text(json.dumps({"a": 0, "b": 0}))
    with pytest.raises(UserError, match="distinct columns 0..1"):
        read_vocabulary(tmp_path / "bad.json")
    (tmp_path / "gap.txt").write_text("a\n\nb\n")
    with pytest.raises(UserError, match=r"gap\.txt, line 2: empty line"):
        read_vocabulary(tmp_path / "gap.txt")
    with pytest.raises(UserError, match=r"unknown vocabulary file type '\.csv'"):
        read_vocabulary(_vocab(tmp_path, ["a"], "v.csv"))


def test_a_joblib_saved_sklearn_lda_loads_only_when_trusted(tmp_path):
    import joblib
    from sklearn.decomposition import LatentDirichletAllocation
    from sklearn.feature_extraction.text import CountVectorizer

    cv = CountVectorizer()
    X = cv.fit_transform(synthetic_texts(50, 3))
    lda = LatentDirichletAllocation(n_components=3, random_state=0).fit(X)
    joblib.dump(lda, tmp_path / "lda.joblib")
    vocab = _vocab(tmp_path, cv.get_feature_names_out())
    with pytest.raises(UserError, match="refusing to unpickle"):
        load_user_model(tmp_path / "lda.joblib", vocab)
    m = load_user_model(tmp_path / "lda.joblib", vocab, trust_pickle=True)
    expected = lda.components_ / lda.components_.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(m.phi, expected[:, np.argsort(cv.get_feature_names_out())])
    assert m.normalized and m.phi_format == "pickle"
    joblib.dump({"not": "a model"}, tmp_path / "dict.pkl")
    with pytest.raises(UserError, match="not a scikit-learn LatentDirichletAllocation"):
        load_user_model(tmp_path / "dict.pkl", vocab, trust_pickle=True)


class _Payload:
    """Unpickling this writes a marker file: proof that a pickle was (or was not) executed."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "executed"))


def test_pickles_are_never_executed_without_trust(tmp_path, capsys):
    marker = tmp_path / "marker"
    for name in ("evil.pkl", "evil.joblib", "evil.pickle"):
        (tmp_path / name).write_bytes(pickle.dumps(_Payload(str(marker))))
    np.save(tmp_path / "evil.npy", np.array([_Payload(str(marker))], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "evil.npz", phi=np.array([_Payload(str(marker))], dtype=object))
    _vocab(tmp_path, WORDS)
    for name in ("evil.pkl", "evil.joblib", "evil.pickle", "evil.npy", "evil.npz"):
        code, _, err = run_cli(capsys, tmp_path / name, "--vocabulary", tmp_path / "vocab.txt",
                                 "--candidates", tmp_path / "c.json", "--reference", tmp_path / "r.json",
                                 "--output", tmp_path / "run")
        assert code == 2 and name in err and "Traceback" not in err, err
        if name.endswith((".npy", ".npz")):
            assert "pickled Python objects" in err, err  # never unpickled, whatever the flags
        else:
            assert "--trust-pickle" in err and "runs any code" in err, err
    assert not marker.exists() and not (tmp_path / "run").exists()
    pickle.loads((tmp_path / "evil.pkl").read_bytes())  # the payload is live: loading it would have run it
    assert marker.read_text() == "executed"


# --------------------------------------------------------------------------- #
# Refusals: exit 2, one message naming the file and the fix, nothing written
# --------------------------------------------------------------------------- #


def _write_phi(d: Path, phi, name="bad.npy"):
    np.save(d / name, np.asarray(phi))
    return name


GOOD = np.random.default_rng(7).dirichlet(np.ones(len(WORDS)), size=3)


def _nan():
    phi = GOOD.copy()
    phi[1, 4] = np.nan
    return phi


def _negative():
    phi = GOOD.copy()
    phi[2, 0] = -0.1
    return phi


@pytest.mark.parametrize("phi, message", [
    (GOOD[0], "must be a 2-D array"),
    (GOOD[None], "must be a 2-D array"),
    (GOOD.T, "words × topics"),
    (GOOD[:1], "k, the number of topics, must be an integer ≥ 2"),
    (GOOD[:, :-1] / GOOD[:, :-1].sum(axis=1, keepdims=True), "Φ has 19 columns but the vocabulary"),
    (_nan(), "NaN or infinite value(s), first at row 1, column 4"),
    (np.where(GOOD > 0.1, np.inf, GOOD), "NaN or infinite"),
    (_negative(), "negative value(s), first at row 2, column 0"),
    (GOOD * 7, "pass --normalize"),
    (np.array([["a", "b"], ["c", "d"]]), "not numbers"),
], ids=["1-D", "3-D", "transposed", "one-topic", "vocabulary-length", "nan", "inf", "negative", "unnormalised",
        "strings"])
def test_bad_phi_is_refused(tiny, capsys, phi, message):
    name = _write_phi(tiny, phi)
    code, out, err = run_cli(capsys, *tiny_args(tiny, phi=name))
    assert_refused(code, out, err, tiny / "run", message, name)


def assert_refused(code, out, err, output: Path, *needles):
    assert code == 2, (out, err)
    assert err.startswith("topicaudit: error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    assert "Traceback" not in out + err
    assert not output.exists(), "a refused audit must not leave an output directory"


def test_unnormalised_phi_is_accepted_with_normalize(tiny):
    np.save(tiny / "weights.npy", GOOD * 7)
    m = load_user_model(tiny / "weights.npy", tiny / "vocab.txt", normalize=True)
    np.testing.assert_allclose(m.phi.sum(axis=1), 1.0)
    assert m.normalized and m.max_row_sum_error == pytest.approx(6.0)


def _csv_ragged(d):
    (d / "bad.csv").write_text("0.5,0.5\n1.0\n")
    return "bad.csv"


def _csv_word(d):
    (d / "bad.csv").write_text("0.5,0.5\n0.5,oops\n")
    return "bad.csv"


def _dup_vocab(d):
    (d / "vocab.txt").write_text("\n".join(WORDS[:-1] + [WORDS[0]]) + "\n")
    return "phi.npy"


def _empty_vocab(d):
    (d / "vocab.txt").write_text("\n\n")
    return "phi.npy"


@pytest.mark.parametrize("make, needles", [
    (_csv_ragged, ("bad.csv, line 2: 1 values, but line 1 has 2",)),
    (_csv_word, ("bad.csv, line 2, column 2: 'oops' is not a number",)),
    (_dup_vocab, ("vocab.txt", "appears twice (lines 1 and 20)")),
    (_empty_vocab, ("vocab.txt", "the vocabulary is empty")),
    (lambda d: "missing.npy", ("missing.npy", "not found")),
    (lambda d: (d / "phi.txt").write_text("1") and "phi.txt", ("unknown Φ file type '.txt'",)),
], ids=["csv-ragged", "csv-not-a-number", "duplicate-word", "empty-vocabulary", "missing-phi", "unknown-type"])
def test_bad_files_are_refused(tiny, capsys, make, needles):
    name = make(tiny)
    code, out, err = run_cli(capsys, *tiny_args(tiny, phi=name))
    assert_refused(code, out, err, tiny / "run", *needles)


@pytest.mark.parametrize("extra, needles", [
    (("--learner", "nope"), ("unknown learner 'nope' ([model] learner, --learner)", "lda")),
    (("--param", "bogus=1"), ("unknown parameter(s) bogus for learner 'lda' in --param", "max_iter")),
    (("--param", "max_iter"), ("--param 'max_iter': expected NAME=VALUE",)),
    (("--shadows", "3"), ("[attack] shadows (--shadows) must be an even number",)),
    (("--k", "1"), ("--k",)),
    (("--candidates-option", "vocabulary=x"), ("--candidates-option vocabulary",)),
    (("--rank-by", "offline-shrunk"), ("--rank-by) 'offline-shrunk'", "named after their attacks",
                                       "use 'lira_offline_shrunk'")),
    (("--rank-by", "zeta"), ("unknown ranking 'zeta'", "lira_offline_shrunk")),
], ids=["unknown-learner", "unknown-param", "param-syntax", "odd-shadows", "k", "reserved-option", "old-ranking-name",
        "unknown-ranking"])
def test_bad_settings_are_refused(tiny, capsys, extra, needles):
    code, out, err = run_cli(capsys, *tiny_args(tiny, *extra))
    assert_refused(code, out, err, tiny / "run", *needles)


def test_pickle_without_trust_is_refused_with_the_risk_explained(tiny, capsys):
    import joblib

    joblib.dump(GOOD, tiny / "phi.joblib")
    code, out, err = run_cli(capsys, *tiny_args(tiny, phi="phi.joblib"))
    assert_refused(code, out, err, tiny / "run", "phi.joblib", "--trust-pickle", "runs any code", "numpy.save")


def test_corpora_that_do_not_fit_the_vocabulary_are_refused(tiny, capsys):
    (tiny / "other.json").write_text(json.dumps({"text": ["nothing here matches", "neither does this"]}))
    code, out, err = run_cli(capsys, tiny / "phi.npy", "--vocabulary", tiny / "vocab.txt", "--candidates",
                             tiny / "other.json", "--reference", tiny / "ref.json", "--output", tiny / "run")
    assert_refused(code, out, err, tiny / "run", "candidates:", "other.json", "none of the 2 documents",
                   "--preprocess")
    code, out, err = run_cli(capsys, *tiny_args(tiny)[:5], "--reference", tiny / "absent.json",
                             "--output", tiny / "run")
    assert_refused(code, out, err, tiny / "run", "reference:", "absent.json", "not found")


def test_show_text_needs_text(tiny, capsys):
    (tiny / "docword.c.txt").write_text("2\n3\n3\n1 1 2\n1 2 1\n2 3 1\n")
    (tiny / "vocab.c.txt").write_text("\n".join(WORDS[:3]) + "\n")
    code, out, err = run_cli(capsys, tiny / "phi.npy", "--vocabulary", tiny / "vocab.txt", "--candidates",
                             tiny / "docword.c.txt", "--reference", tiny / "ref.json", "--show-text",
                             "--output", tiny / "run")
    assert_refused(code, out, err, tiny / "run", "--show-text", "no text")


# --------------------------------------------------------------------------- #
# Counting a corpus over a fixed vocabulary (topicaudit.inputs.corpus, vocabulary=)
# --------------------------------------------------------------------------- #


def test_corpora_are_counted_over_the_given_vocabulary(tmp_path):
    vocabulary = ["zebra", "apple", "mango"]
    c = load_corpus(["apple pie apple", "kiwi only", "zebra mango mango", "the end"], preprocess=False,
                    vocabulary=vocabulary)
    assert list(c.vocabulary) == ["apple", "mango", "zebra"]
    assert c.X.toarray().tolist() == [[2, 0, 0], [0, 2, 1]]
    assert c.doc_index.tolist() == [0, 2] and c.n_dropped_empty == 2 and c.doc_ids == ["0", "2"]
    # UCI: columns mapped by word, not by wordID
    (tmp_path / "docword.x.txt").write_text("2\n3\n3\n1 1 2\n1 3 1\n2 2 4\n")
    (tmp_path / "vocab.x.txt").write_text("mango\nkiwi\napple\n")
    u = load_corpus(tmp_path / "docword.x.txt", vocabulary=vocabulary)
    assert u.X.toarray().tolist() == [[1, 2, 0]] and u.doc_ids == ["1"] and u.n_dropped_empty == 1
    # folder: ids are the files' relative paths
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "a.txt").write_text("apple zebra")
    (tmp_path / "docs" / "sub" / "b.txt").write_text("mango")
    f = load_corpus(tmp_path / "docs", preprocess=False, vocabulary=vocabulary)
    assert f.doc_ids == ["a.txt", "sub/b.txt"]
    with pytest.raises(UserError, match="appears twice"):
        load_corpus(["apple"], preprocess=False, vocabulary=["apple", "apple"])
    with pytest.raises(UserError, match="none of the 1 documents contains a word of the given vocabulary"):
        load_corpus(["kiwi"], preprocess=False, vocabulary=vocabulary)


# --------------------------------------------------------------------------- #
# Small end-to-end runs
# --------------------------------------------------------------------------- #


TRICKY = [
    '=HYPERLINK("http://x","click") appleash',
    "+brickbay, with a comma, and \"quotes\"",
    "-cloudcove\nsecond line\r\nthird line",
    "@deltadune \x1b[31mred\x1b[0m",
    "emberash, plain",
]


def test_show_text_writes_escaped_csv_and_a_terminal_safe_table(tiny, shared_ray, capsys):
    texts = json.loads((tiny / "cand.json").read_text())["text"][:25] + TRICKY
    (tiny / "cand.json").write_text(json.dumps({"text": texts}))
    code, out, err = run_cli(capsys, *tiny_args(tiny, "--show-text", "--top", 30))
    assert code == 0, err
    raw = (tiny / "run" / "scores.csv").read_bytes().decode("utf-8")  # keep \r\n inside cells as written
    rows = list(csv.DictReader(io.StringIO(raw, newline="")))
    assert len(rows) == 30 and list(rows[0]) == ["rank", "candidate", "id", "n_tokens", "zeta", "lira_online",
                                                 "lira_online_global", "lira_offline_p", "lira_offline_global_p",
                                                 "lira_online_shrunk", "lira_offline_shrunk_p", "rmia_online",
                                                 "rmia_offline", "rmia_population", "quantile_regression",
                                                 "lira_offline_log10_p", "lira_offline_global_log10_p",
                                                 "lira_offline_shrunk_log10_p", "beyond_reference", "text"]
    by_candidate = {int(r["candidate"]): r["text"] for r in rows}
    for i, text in enumerate(TRICKY, start=25):
        text = text.replace("\r\n", "\n")  # no bare carriage return reaches a spreadsheet
        expected = "'" + text if text[0] in "=+-@" else text
        assert by_candidate[i] == expected  # commas, quotes and line breaks survive the round trip
    assert "\x1b" not in out and "\\x1b[31mred" in out  # control characters escaped on the terminal
    result = json.loads((tiny / "run" / "audit.json").read_text())
    assert "text" in result["scores"]["columns"] and len(result["top"]) == 30


def test_a_trusted_joblib_lda_is_audited(tiny, shared_ray, capsys):
    import joblib
    from sklearn.decomposition import LatentDirichletAllocation
    from sklearn.feature_extraction.text import CountVectorizer

    cv = CountVectorizer()
    X = cv.fit_transform(json.loads((tiny / "ref.json").read_text())["text"])
    joblib.dump(LatentDirichletAllocation(n_components=3, random_state=0).fit(X), tiny / "lda.joblib")
    (tiny / "vocab.json").write_text(json.dumps({w: int(i) for w, i in cv.vocabulary_.items()}))
    code, out, err = run_cli(capsys, tiny / "lda.joblib", "--trust-pickle", "--vocabulary", tiny / "vocab.json",
                             "--candidates", tiny / "cand.json", "--reference", tiny / "ref.json",
                             "--no-preprocess", "--shadows", 2, "--learner", "sklearn-lda", "--quiet",
                             "--output", tiny / "run")
    assert code == 0, err
    assert out.strip() == str(tiny / "run")
    result = json.loads((tiny / "run" / "audit.json").read_text())
    assert result["inputs"]["phi"]["format"] == "pickle" and result["inputs"]["phi"]["normalized"]
    assert result["learner"]["name"] == "sklearn-lda" and result["learner"]["k"] == 3
    assert len(read_scores(tiny / "run" / "scores.csv")) == result["inputs"]["candidates"]["n_scored"] > 25


def test_an_interrupted_audit_resumes_with_identical_scores(tiny, shared_ray, capsys):
    code, _, err = run_cli(capsys, *tiny_args(tiny, "--quiet"))
    assert code == 0, err
    run = tiny / "run"
    first = (run / "scores.csv").read_bytes()
    models = sorted((run / "models").glob("shadow-*.npz"))
    assert len(models) == 4
    stamp = models[0].stat().st_mtime_ns
    # as if killed after three models: one model file and the outputs missing
    models[2].unlink()
    (run / "scores.csv").unlink()
    (run / "audit.json").unlink()
    code, _, err = run_cli(capsys, *tiny_args(tiny, "--quiet"))
    assert code == 0, err
    result = json.loads((run / "audit.json").read_text())
    assert result["resumed"] and result["shadows"]["reused"] == 3
    assert models[0].stat().st_mtime_ns == stamp, "finished models are reused, not refitted"
    assert (run / "scores.csv").read_bytes() == first
    # Presentation flags do not change the shadows: the directory is reused as it is.
    code, _, err = run_cli(capsys, *tiny_args(tiny, "--rank-by", "lira_online", "--top", 3))
    assert code == 0, err
    assert json.loads((run / "audit.json").read_text())["shadows"]["reused"] == 4
    online = [float(r["lira_online"]) for r in read_scores(run / "scores.csv")]
    assert online == sorted(online, reverse=True)
    # Different settings are refused, and the directory is left as it was.
    code, _, err = run_cli(capsys, *tiny_args(tiny, "--seed", 1))
    assert code == 2 and "different configuration" in err and str(run) in err, err
    assert len(list((run / "models").glob("shadow-*.npz"))) == 4


# --------------------------------------------------------------------------- #
# Scores and notes (no Ray)
# --------------------------------------------------------------------------- #


def test_ranking_keeps_the_order_of_p_values_that_round_to_zero():
    from topicaudit.attacks.ranking import candidate_scores, ranking, score_columns
    from topicaudit.attacks.registry import AttackInputs

    shadow = np.tile(np.array([[0.0], [1.0], [0.0], [1.0]]), (1, 4)) + np.arange(4) * 0.01
    shadow_in = np.array([[True], [False], [True], [False]]).repeat(4, axis=1)
    observed = np.array([200.0, 100.0, 0.5, 300.0])  # three far above every OUT shadow
    scores = candidate_scores(AttackInputs({"zeta": observed}, {"zeta": shadow}, shadow_in), "lira_offline")
    assert score_columns(scores)["lira_offline_p"][[0, 1, 3]].tolist() == [0.0, 0.0, 0.0]  # saturated
    assert ranking(scores, "lira_offline").tolist() == [3, 0, 1, 2]  # ...yet ranked by z


def test_notes_flag_unseen_vocabulary_empty_candidates_and_duplicates(tiny):
    from topicaudit.engine.audit_inputs import audit_config, load_audit_inputs

    extra = [f"zz{i:03d}" for i in range(60)]  # words the corpora never use (as after a preprocessing mismatch)
    (tiny / "vocab.txt").write_text("\n".join(WORDS + extra) + "\n")
    np.save(tiny / "phi.npy", np.random.default_rng(0).dirichlet(np.ones(80), size=3))
    reference = json.loads((tiny / "ref.json").read_text())["text"]
    (tiny / "cand.json").write_text(json.dumps({"text": [reference[0], "nothing known", *reference[5:10]]}))
    _, inputs = load_audit_inputs(audit_config(tiny / "phi.npy", candidates=tiny / "cand.json",
                                               reference=tiny / "ref.json", vocabulary=str(tiny / "vocab.txt"),
                                               preprocess=False, shadows=4,
                                               output=str(tiny / "run")))
    notes = " | ".join(inputs.notes)
    unseen = inputs.n_unseen_words
    assert unseen >= 60 and f"{unseen} of the 80 vocabulary words occur in no candidate or reference document" in notes
    assert "1 candidate document(s) have no word of the vocabulary and are not scored (input positions 1)" in notes
    assert "6 candidate document(s) have the same word counts as a reference document" in notes
    assert "repeat the word counts of another candidate" not in notes
    assert inputs.candidates.n_docs == 6
    assert not (tiny / "run").exists()
    # candidates repeating each other share one membership (hostile pass XIX, listed C-dup: no note)
    (tiny / "cand.json").write_text(json.dumps({"text": [reference[0]] * 3 + reference[5:7] * 2}))
    _, inputs = load_audit_inputs(audit_config(tiny / "phi.npy", candidates=tiny / "cand.json",
                                               reference=tiny / "ref.json", vocabulary=str(tiny / "vocab.txt"),
                                               preprocess=False, shadows=4, output=str(tiny / "run")))
    assert "4 candidate document(s) repeat the word counts of another candidate" in " | ".join(inputs.notes)


def test_a_configuration_file_gives_the_same_audit_as_the_flags(tiny, shared_ray, capsys):
    """`topicaudit audit CONFIG.toml` builds the same configuration as the flags: same identity, same scores.

    Paths in the file are relative to the file; a flag given beside the file overrides it.
    """
    code, _, err = run_cli(capsys, *tiny_args(tiny, output="by-flags"), "--quiet")
    assert code == 0, err
    (tiny / "audit.toml").write_text(
        'output = "by-file"\n'
        '[model]\nphi = "phi.npy"\nvocabulary = "vocab.txt"\n'
        '[corpus]\npath = "cand.json"\npreprocess = false\n'
        '[reference]\npath = "ref.json"\n'
        '[attack]\nshadows = 8\n')
    code, _, err = run_cli(capsys, tiny / "audit.toml", "--shadows", "4", "--output", tiny / "by-file", "--quiet")
    assert code == 0, err
    by_flags = json.loads((tiny / "by-flags" / "audit.json").read_text())
    by_file = json.loads((tiny / "by-file" / "audit.json").read_text())
    assert by_file["config_hash"] == by_flags["config_hash"]
    assert by_file["shadows"]["n_shadows"] == 4
    assert read_scores(tiny / "by-file" / "scores.csv") == read_scores(tiny / "by-flags" / "scores.csv")


def test_run_refuses_a_configuration_that_audits_a_released_model(tiny, capsys):
    (tiny / "audit.toml").write_text('[model]\nphi = "phi.npy"\n')
    code = main(["run", str(tiny / "audit.toml")])
    assert code == 2 and "topicaudit audit CONFIG.toml" in capsys.readouterr().err


def test_audit_refuses_a_run_configuration_naming_the_command_it_belongs_to(tiny, capsys):
    (tiny / "run.toml").write_text('[target]\nk = 3\n')
    code, _, err = run_cli(capsys, tiny / "run.toml")
    assert code == 2 and "[target] belongs to `topicaudit run`, not to `topicaudit audit`" in err, err
    (tiny / "half.toml").write_text('[model]\nvocabulary = "vocab.txt"\n')
    code, _, err = run_cli(capsys, tiny / "half.toml")
    assert code == 2 and "no model to audit" in err, err


def test_the_python_api_audits_a_model_like_the_command(tiny, shared_ray, capsys):
    import topicaudit

    code, _, err = run_cli(capsys, *tiny_args(tiny, output="by-cli"), "--quiet")
    assert code == 0, err
    result = topicaudit.audit_model(tiny / "phi.npy", tiny / "cand.json", tiny / "ref.json",
                                    vocabulary=str(tiny / "vocab.txt"), preprocess=False, shadows=4,
                                    output=str(tiny / "by-api"))
    assert result["config_hash"] == json.loads((tiny / "by-cli" / "audit.json").read_text())["config_hash"]
    assert isinstance(result, topicaudit.AuditResults)  # audit.json, typed
    assert result.to_json() == json.loads((tiny / "by-api" / "audit.json").read_text())
    # built as a record and written once from it: the record is the one the file reads back, field by field
    text = (tiny / "by-api" / "audit.json").read_text(encoding="utf-8")
    assert text == json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n"
    loaded = topicaudit.AuditResults.load(tiny / "by-api")
    assert all(getattr(result, f.name) == getattr(loaded, f.name) for f in dataclasses.fields(result))
    assert result.directory == loaded.directory == tiny / "by-api"
    assert read_scores(tiny / "by-api" / "scores.csv") == read_scores(tiny / "by-cli" / "scores.csv")


def test_quantile_regression_ranks_the_candidates(tiny, shared_ray, capsys):
    code, _, err = run_cli(capsys, *tiny_args(tiny, "--rank-by", "quantile_regression", "--quiet"))
    assert code == 0, err
    rows = read_scores(tiny / "run" / "scores.csv")
    values = [float(r["quantile_regression"]) for r in rows]
    assert all(np.isfinite(values)) and values == sorted(values, reverse=True)
    assert json.loads((tiny / "run" / "audit.json").read_text())["ranking"]["by"] == "quantile_regression"
