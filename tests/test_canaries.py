"""Canary audits: generation and coins, shadow-free scores, the gate on correct and under-noised learners."""
import json

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.bounds.verdict import bound_ceiling, guess_family, two_means_split
from topicaudit.attacks.canaries import UNRELEASED_PENALTY, canary_coins, canary_scores, make_canaries
from topicaudit.engine.check import check_run
from topicaudit.cli.main import main
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.bounds.one_run import eps_lb_one_run
from topicaudit.engine.run import execute_run
from topicaudit.targets import build_target
from topicaudit.targets.base import Release

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")

SMALL_CORPUS = {"synthetic": {"n_docs": 300, "n_words": 400, "mean_length": 30}}


def _counts(seed=0, n_docs=40, n_words=30):
    rng = np.random.default_rng(seed)
    X = sp.random(n_docs, n_words, density=0.2, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 3)
    X = X.tolil()
    X[np.arange(n_docs), rng.integers(0, n_words, n_docs)] = 1.0  # no empty document
    return X.tocsr()


# -- generation and coins ----------------------------------------------------------------------
def test_canary_coins_are_the_coins_make_canaries_draws():
    """An audit is designed from its coins before the canaries are built (topicaudit.learner_checks)."""
    X = _counts()
    for count, kind, seed in [(1, "unique-word", 0), (20, "paired", 3), (17, "word", 5)]:
        assert np.array_equal(canary_coins(count, seed), make_canaries(X, count, kind, 4, seed=seed).coins)


@pytest.mark.parametrize("kind", ["unique-word", "rare-words", "natural", "word"])
def test_canaries_are_reproducible_and_enter_training_exactly_when_their_coin_says(kind):
    X = _counts()
    a, b = make_canaries(X, 20, kind, 5, seed=3), make_canaries(X, 20, kind, 5, seed=3)
    assert np.array_equal(a.coins, b.coins) and (a.documents != b.documents).nnz == 0
    assert not np.array_equal(a.coins, make_canaries(X, 20, kind, 5, seed=4).coins)
    train = a.training_matrix(X)
    assert train.shape[1] == a.n_columns
    if kind == "word":
        # one token of each heads canary's fresh word, in its host document; nothing else changes
        fresh = train[:, X.shape[1]:]
        assert np.array_equal(np.asarray(fresh.sum(axis=0)).ravel(), a.coins.astype(float))
        assert np.array_equal(fresh.tocoo().row, a.hosts[a.coins][np.argsort(a.words[a.coins])]) or \
            set(zip(fresh.tocoo().row, fresh.tocoo().col)) == {(h, w - X.shape[1]) for h, w in
                                                             zip(a.hosts[a.coins], a.words[a.coins])}
        assert (train[:, :X.shape[1]] != X).nnz == 0
    else:
        n_fixed = a.fixed_rows.size
        assert train.shape[0] == n_fixed + a.coins.sum()
        assert (train[n_fixed:] != a.documents[a.coins]).nnz == 0
        assert (train[:n_fixed, :X.shape[1]] != X[a.fixed_rows]).nnz == 0
    if kind == "natural":
        held = np.setdiff1d(np.arange(X.shape[0]), a.fixed_rows)
        assert held.size == 20 and (a.documents != X[held]).nnz == 0
    if kind == "unique-word":
        assert a.n_columns == X.shape[1] + 20
        assert np.array_equal(a.documents.toarray()[np.arange(20), a.words], np.full(20, 5.0))
        assert a.documents.nnz == 20  # one fresh word per canary, five tokens of it


def test_rare_word_canaries_use_the_rarest_words_first():
    X = _counts()
    c = make_canaries(X, 2, "rare-words", 3, seed=0)
    df = np.bincount(X.indices, minlength=X.shape[1])
    used = np.unique(c.documents.indices)
    assert c.n_columns == X.shape[1] and used.size == 6  # disjoint while the vocabulary lasts
    assert df[used].max() <= np.sort(df[df > 0])[5]


def test_natural_canaries_cannot_take_more_than_half_the_corpus():
    with pytest.raises(ValueError, match="fewer than half"):
        make_canaries(_counts(n_docs=10), 6, "natural", 0, seed=0)


# -- scores ------------------------------------------------------------------------------------
def test_scores_are_zeta_and_the_word_column_with_unreleased_words_at_the_bottom():
    X = _counts(n_words=4)
    c = make_canaries(X, 3, "unique-word", 2, seed=0)
    phi = np.array([[0.4, 0.2, 0.2, 0.1, 0.05, 0.05, 0.0],
                    [0.1, 0.1, 0.1, 0.1, 0.3, 0.2, 0.1]], dtype=np.float32)
    release = Release(phi=phi[:, :6], vocabulary=np.arange(6))  # the third canary's word is not released
    s = canary_scores(release, c)
    assert s["zeta"][:2] == pytest.approx([2 * np.log(0.3), 2 * np.log(0.2)], abs=1e-6)
    assert s["column"][:2] == pytest.approx([np.log(0.35), np.log(0.25)], abs=1e-6)
    assert s["zeta"][2] == -2 * UNRELEASED_PENALTY and s["column"][2] == -UNRELEASED_PENALTY


def test_two_means_split_finds_the_gap_and_guesses_every_candidate():
    scores = np.array([5.0, 4.8, 5.1, -3.0, -2.9, -np.inf, 4.9])
    assert two_means_split(scores) == 4
    k_plus, k_minus = guess_family(scores)
    assert (k_plus[-1], k_minus[-1]) == (4, 3)


def test_perfectly_separated_coins_reach_the_ceiling_in_closed_form():
    coins = np.random.default_rng(0).random(1000) < 0.5
    family = guess_family(coins.astype(float))
    alpha_each = 0.05 / len(family[0])
    # all m guesses correct: P[Bin(m, q) ≥ m] = q^m < α_each ⇔ ε > logit(α_each^(1/m))
    q = alpha_each ** (1 / 1000)
    assert bound_ceiling(coins, 0.0, 0.05) == pytest.approx(
        eps_lb_one_run(coins.astype(float), coins, 0.0, 0.05, k_plus=family[0], k_minus=family[1]).epsilon)
    assert bound_ceiling(coins, 0.0, 0.05) == pytest.approx(np.log(q / (1 - q)), rel=1e-6)


# -- the gate -------------------------------------------------------------------------------------
def _config(tmp_path, name, learner, params, count=300, under_noise=1.0, kind="auto"):
    return config_from_dict({
        **SMALL_CORPUS, "name": name, "output": str(tmp_path / name),
        "target": {"learner": learner, "k": 4, "vocabulary": "all", "params": params,
                   "test_under_noise": under_noise},
        "attack": {"shadows": 0, "delta": 0.0, "canaries": {"count": count, "kind": kind}},
    })


def test_the_gate_passes_a_correct_mechanism_and_catches_it_under_noised(tmp_path, capsys):
    for name, factor, code in (("correct", 1.0, 0), ("broken", 10.0, 1)):
        results = execute_run(_config(tmp_path, name, "dp-cgs", {"epsilon": 1.0, "n_iter": 30}, under_noise=factor),
                            quiet=True)
        assert results["ray"]["address"].startswith("none")  # a canary-only audit starts no cluster
        # dp-cgs claims replace-one privacy: paired canaries, 4× its cap of 32 tokens, scored on its noisy counts
        assert results["canaries"]["kind"] == "paired" and results["canaries"]["length"] == 128
        assert results["canaries"]["observe"] == "mechanism"
        assert main(["check", str(tmp_path / name)]) == code
        out = capsys.readouterr().out
        assert out.startswith("VIOLATED" if code else "CONSISTENT")
        assert "observed: canaries on everything the mechanism releases" in out
        if not code:
            assert "power: a mechanism 2× less private than claimed is refuted in " in out
    target = json.loads((tmp_path / "broken" / "results.json").read_text())["target"]
    assert target["guarantee"]["epsilon"] == 1.0 and target["test_under_noise"] == 10.0
    assert '"test_under_noise": 10.0' in json.dumps(target["guarantee"])  # the learner's part says so too


def test_word_level_claims_are_tested_by_word_canaries(tmp_path, capsys):
    config = _config(tmp_path, "lp", "lp-lda", {"epsilon": 1.0, "n_iter": 20}, under_noise=10.0)
    execute_run(config, quiet=True)
    assert json.loads((tmp_path / "lp" / "results.json").read_text())["canaries"]["kind"] == "word"
    result = check_run(tmp_path / "lp")
    assert result.adjacency == "word" and result.violated
    # without word canaries a word-level claim cannot be held to a document membership audit
    config = _config(tmp_path, "lp-doc", "lp-lda", {"epsilon": 1.0, "n_iter": 20}, kind="unique-word")
    execute_run(config, quiet=True)
    assert main(["check", str(tmp_path / "lp-doc")]) == 2
    assert "word canaries" in capsys.readouterr().err


def test_scores_that_do_not_match_the_coins_are_refused(tmp_path, capsys):
    execute_run(_config(tmp_path, "c", "dp-cgs", {"epsilon": 1.0, "n_iter": 10}, count=50), quiet=True)
    path = tmp_path / "c" / "canary_scores.npz"
    with np.load(path) as z:
        arrays = dict(z)
    arrays["ids"] = arrays["ids"] + 1
    np.savez(path, **arrays)
    assert main(["check", str(tmp_path / "c")]) == 2
    assert "canary_scores.npz" in capsys.readouterr().err  # the manifest, or the ids check, names it


def test_a_canary_run_resumes_without_refitting(tmp_path):
    config = _config(tmp_path, "r", "lda", {"max_iter": 5}, count=40)
    first = execute_run(config, quiet=True)
    model = tmp_path / "r" / "models" / "canary-target.npz"
    stamp = model.stat().st_mtime_ns
    again = execute_run(config, quiet=True)
    assert model.stat().st_mtime_ns == stamp and again["resumed"]
    assert again["canaries"]["epsilon_lower_bounds"] == first["canaries"]["epsilon_lower_bounds"]


def test_a_learner_without_noise_fails_check_at_epsilon_4_on_pheme(tmp_path, capsys, pheme_path):
    """The motivating case: natural documents could not refute ε = 3 for plain LDA; canaries can."""
    assert main(["run", "--corpus", str(pheme_path), "--no-preprocess", "--k", "5", "--shadows", "0",
                 "--canaries", "1000", "--output", str(tmp_path / "p"), "--quiet"]) == 0
    assert main(["check", str(tmp_path / "p"), "--epsilon", "4", "--delta", "0"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("VIOLATED")
    assert check_run(tmp_path / "p", epsilon=4, delta=0).epsilon_lower_bound >= 4.5


# -- under-noised learners -------------------------------------------------------------------
@pytest.mark.parametrize("learner, params, knob", [
    ("dp-cgs", {"epsilon": 2.0}, lambda m: m.noise_scale),
    ("hdp-lda", {"epsilon_l": 2.0}, lambda m: 2.0 / m.epsilon_l),
    ("dp-svi", {"epsilon": 2.0}, lambda m: m.noise_std),
    ("lp-lda", {"epsilon": 2.0}, lambda m: 1.0 / m.epsilon_per_word),
    ("lppf", {"epsilon": 2.0}, lambda m: 1.0 / -np.log(m.mechanism_alpha)),
])
def test_under_noised_learners_divide_their_noise_and_keep_their_claim(learner, params, knob):
    honest = build_target(learner, 3, "all", params)
    broken = build_target(learner, 3, "all", params, under_noise=10.0)
    assert knob(broken.learner.buggy) == pytest.approx(knob(honest.learner) / 10)
    h, b = honest.guarantee(), broken.guarantee()
    assert (b.epsilon, b.delta, b.adjacency, b.basis) == (h.epsilon, h.delta, h.adjacency, h.basis)


def test_a_learner_without_noise_cannot_be_under_noised():
    from topicaudit.errors import UserError

    with pytest.raises(UserError, match="no privacy noise"):
        build_target("lda", 3, under_noise=10.0)


def test_shadow_canary_releases_add_lira_scores_on_the_canaries(tmp_path):
    config = _config(tmp_path, "s", "lda", {"max_iter": 5}, count=60, kind="natural")
    config.attack.canaries.shadows = 4
    config.ray.num_cpus = 2
    results = execute_run(config, quiet=True)
    assert results["canaries"]["shadows"] == 4 and set(results["canaries"]["scores"]) == {
        "zeta", "lira_online", "lira_offline"}
    with np.load(tmp_path / "s" / "canaries.npz") as z:
        shadow_in = z["shadow_in"]
    assert shadow_in.shape == (4, 60) and (shadow_in.sum(axis=0) == 2).all()  # every canary in half of them
    assert len(list((tmp_path / "s" / "models").glob("canary-shadow-*.npz"))) == 4


def test_the_pytest_fixture_audits_with_canaries(assert_privacy, tmp_path):
    config = {**SMALL_CORPUS, "target": {"learner": "dp-cgs", "k": 4, "vocabulary": "all",
                                         "params": {"epsilon": 1.0, "n_iter": 10}, "test_under_noise": 10.0},
              "attack": {"shadows": 0, "delta": 0.0}}
    with pytest.raises(AssertionError, match="VIOLATED: canaries/"):
        assert_privacy(config, canaries=300, output=tmp_path / "f")


def test_a_sweep_of_canary_audits_tabulates_their_bounds(tmp_path, capsys):
    config = tmp_path / "sweep.toml"
    config.write_text('[synthetic]\nn_docs = 200\nn_words = 300\n[target]\nlearner = "dp-cgs"\nk = 4\n'
                      'vocabulary = "all"\n[target.params]\nn_iter = 10\n[attack]\nshadows = 0\n'
                      '[attack.canaries]\ncount = 200\n')
    assert main(["sweep", str(config), "--param", "target.params.epsilon", "--values", "1,100",
                 "--output", str(tmp_path / "s"), "--num-cpus", "1", "--quiet"]) == 0
    index = json.loads((tmp_path / "s" / "sweep.json").read_text())
    bounds = [json.loads((tmp_path / "s" / r["path"] / "results.json").read_text())["canaries"]
              ["epsilon_lower_bounds"]["epsilon"] for r in index["runs"]]
    assert bounds[0] < 1 < bounds[1]  # ε = 100 leaks far more than ε = 1 ever could


def test_check_uses_the_runs_alpha_unless_told_otherwise(tmp_path):
    config = _config(tmp_path, "a", "dp-cgs", {"epsilon": 1.0, "n_iter": 10}, count=100)
    config.attack.alpha = 0.2
    execute_run(config, quiet=True)
    assert check_run(tmp_path / "a").alpha == 0.2
    assert check_run(tmp_path / "a", alpha=0.01).alpha == 0.01
