"""`topicaudit report`: the figures' data, the ledger, comparability refusals, escaping, the files written."""
import copy
import dataclasses
import json
import math
import os
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.cli.main import main
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.errors import UserError
from topicaudit.attacks.metrics import roc_curve
from topicaudit.engine.storage.results import Utility
from topicaudit.engine.run import execute_run
from topicaudit.engine.sweep import run_sweep
from topicaudit.reports import figures, ledger, risk
from topicaudit.reports.build import build_report
from topicaudit.reports.collect import Group, collect, read_run
from topicaudit.bounds.dp_region import claim_of, dp_tpr_bound
from topicaudit.reports.markdown import md_text

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")

TINY = {"synthetic": {"n_docs": 120, "n_words": 300, "mean_length": 30}, "target": {"k": 3},
        "attack": {"shadows": 4}, "ray": {"num_cpus": 1}}
SCRIPT = "<script>alert(1)</script>"
WORDS = ("apple", "banana", "cherry", "delta", "engine", "forest", "garden", "harbor", "island", "jungle",
         "kettle", "lemon", "meadow", "needle", "orange", "pepper", "quartz", "river", "saddle", "timber")


def _config(**changes):
    data = copy.deepcopy(TINY)
    for dotted, value in changes.items():
        *tables, key = dotted.split(".")
        where = data
        for t in tables:
            where = where.setdefault(t, {})
        where[key] = value
    return config_from_dict(data)


def text_corpus(path, n=60, seed=0):
    """A small JSON corpus whose first documents carry markup that must never be rendered."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(8, 30)))) for _ in range(n)]
    texts[0] = f"{SCRIPT} {texts[0]}"
    texts[1] = f"<img src=x onerror=\"window.__pwned=2\"> & {texts[1]}"
    path.write_text(json.dumps({"text": texts}))
    return texts


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ray_holder):
    tmp = tmp_path_factory.mktemp("report")
    corpus = tmp / "texts.json"
    text_corpus(corpus)
    ray_holder.start()
    run_sweep(_config(name="tiny"), "target.k", [2, 3], 2, tmp / "sweep", quiet=True)
    execute_run(_config(output=str(tmp / "other-corpus"), **{"synthetic.n_docs": 150}), quiet=True)
    execute_run(_config(output=str(tmp / "all-vocab"), **{"target.vocabulary": "all"}), quiet=True)
    execute_run(_config(output=str(tmp / "text"), **{"corpus.path": str(corpus), "corpus.preprocess": False}),
                quiet=True)
    return tmp


# -- the DP region ---------------------------------------------------------------------------------
def test_dp_boundary_at_known_points():
    fpr = np.array([0.0, 0.01, 0.1, 0.5, 0.9, 1.0])
    e = math.e
    want = [min(e * f, 1 - (1 - f) / e) for f in fpr]
    np.testing.assert_allclose(dp_tpr_bound(fpr, 1.0, 0.0), want, rtol=1e-12)
    np.testing.assert_allclose(dp_tpr_bound([0.1], 1.0, 0.0), [0.1 * e])             # first branch
    np.testing.assert_allclose(dp_tpr_bound([0.5], 1.0, 0.0), [1 - 0.5 / e])         # second branch
    np.testing.assert_allclose(dp_tpr_bound([0.0], 2.0, 1e-2), [1e-2])               # δ at FPR 0
    np.testing.assert_allclose(dp_tpr_bound([0.2], 0.0, 0.0), [0.2])                 # ε = 0: chance
    np.testing.assert_allclose(dp_tpr_bound([1e-3], math.log(10), 1e-5), [1e-2 + 1e-5])
    np.testing.assert_array_equal(dp_tpr_bound(fpr, math.inf, 0.0), np.ones_like(fpr))
    grid = np.linspace(0, 1, 101)
    bound = dp_tpr_bound(grid, 0.7, 1e-3)
    assert np.all(np.diff(bound) >= 0) and np.all(bound >= grid) and bound[-1] == 1.0
    with pytest.raises(ValueError):
        dp_tpr_bound(grid, -1.0, 0.0)


def test_claim_of_reads_the_guarantee():
    assert claim_of({"target": {"guarantee": {"epsilon": None, "delta": 0.0}}}) is None
    doc = claim_of({"target": {"guarantee": {"epsilon": 2.0, "delta": 1e-5, "adjacency": "document",
                                             "basis": "theorem"}}})
    assert (doc.epsilon, doc.delta, doc.document_level) == (2.0, 1e-5, True)
    word = claim_of({"target": {"guarantee": {"epsilon": 2.0, "delta": 0.0, "adjacency": "word", "basis": "theorem"}}})
    assert not word.document_level


# -- figures' data ----------------------------------------------------------------------------------------
def test_roc_points_are_the_stored_scores_roc(runs):
    run = read_run(runs / "sweep" / "k=2" / "rep-0")
    data = figures.roc_data(run)
    with np.load(run.path / "scores.npz") as z:
        assert set(data["curves"]) == set(run.results["attacks"])
        for name, (fpr, tpr) in data["curves"].items():
            want_fpr, want_tpr, _ = roc_curve(z[name], z["is_member"])
            np.testing.assert_array_equal(fpr, want_fpr)
            np.testing.assert_array_equal(tpr, want_tpr)
            # the plotted step function gives results.json's TPR at 0.1% and 1% FPR
            for f in (0.001, 0.01):
                assert figures.tpr_at(fpr, tpr, np.array([f]))[0] == run.results["attacks"][name][f"tpr_at_fpr_{f:g}"]
        assert data["floor"] == 1 / (~z["is_member"]).sum()
    assert data["claim"] is None and data["boundary"] is None


def test_roc_data_draws_the_claimed_boundary(runs):
    run = _claiming(read_run(runs / "sweep" / "k=2" / "rep-0"), epsilon=1.5, delta=1e-4, adjacency="document",
                    basis="theorem")
    data = figures.roc_data(run)
    grid, bound = data["boundary"]
    assert grid[0] == pytest.approx(data["floor"]) and grid[-1] == 1.0
    np.testing.assert_array_equal(bound, dp_tpr_bound(grid, 1.5, 1e-4))
    overlay = figures.overlay_data([Group([run], run.path, label="claimed")], "lira_online")
    np.testing.assert_array_equal(overlay["series"][0]["boundary"], dp_tpr_bound(overlay["grid"], 1.5, 1e-4))
    figures.draw_roc(data)
    figures.draw_overlay(overlay, "runs")
    run = _claiming(run, adjacency="word")
    assert figures.roc_data(run)["boundary"] is None  # a word-level ε does not bound a document


def _claiming(run, **claim):
    """The run as if its target claimed ``claim`` (results are frozen records: a changed copy)."""
    target = run.results.target
    target = dataclasses.replace(target, guarantee=dataclasses.replace(target.guarantee, **claim))
    return dataclasses.replace(run, results=dataclasses.replace(run.results, target=target))


def test_overlay_uses_exact_curves_or_replicate_means(runs):
    collection = collect([runs / "sweep"])
    data = figures.overlay_data(collection.groups, "lira_online", points=50)
    assert [s["label"] for s in data["series"]] == ["k=2", "k=3"]
    for group, series in zip(collection.groups, data["series"]):
        assert series["n"] == 2
        per_run = [figures.tpr_at(*roc_curve(r.scores["lira_online"], r.scores["is_member"])[:2], series["fpr"])
                   for r in group.runs]
        np.testing.assert_allclose(series["tpr"], np.mean(per_run, axis=0))
        np.testing.assert_allclose(series["sd"], np.std(per_run, axis=0, ddof=1))
    single = collect([runs / "sweep" / "k=3" / "rep-1"])
    s = figures.overlay_data(single.groups, "lira_online")["series"][0]
    run = single.runs[0]
    want_fpr, want_tpr, _ = roc_curve(run.scores["lira_online"], run.scores["is_member"])
    assert s["sd"] is None and s["boundary"] is None
    np.testing.assert_array_equal(s["fpr"], want_fpr)
    np.testing.assert_array_equal(s["tpr"], want_tpr)


def test_tpr_against_the_parameter_is_the_replicate_mean_of_results(runs):
    collection = collect([runs / "sweep"])
    data = figures.by_parameter_data(collection.groups)
    assert data["x"] == [2, 3] and data["numeric"]
    for i, group in enumerate(collection.groups):
        for attack in ("lira_online", "lira_offline"):
            xs = [r.results["attacks"][attack]["tpr_at_fpr_0.001"] for r in group.runs]
            assert data["series"][attack]["mean"][i] == pytest.approx(np.mean(xs))
            assert data["series"][attack]["sd"][i] == pytest.approx(np.std(xs, ddof=1))


def test_utility_data_is_the_replicate_mean_of_results_or_absent(runs):
    collection = collect([runs / "sweep"])
    data = figures.utility_data(collection.groups)
    for i, group in enumerate(collection.groups):
        xs = [r.results["utility"]["umass_coherence"] for r in group.runs]
        assert data["series"]["umass_coherence"]["mean"][i] == pytest.approx(np.mean(xs))
    for run in collection.runs:
        run.results = dataclasses.replace(run.results, utility=None)  # runs made before utility was measured
    assert figures.utility_data(collection.groups) is None
    for i, run in enumerate(collection.runs):
        run.results = dataclasses.replace(run.results, utility=Utility(umass_coherence=-1.0 - i,
                                                                       heldout_perplexity=100.0 + i))
    data = figures.utility_data(collection.groups)
    np.testing.assert_allclose(data["series"]["umass_coherence"]["mean"], [-1.5, -3.5])
    np.testing.assert_allclose(data["series"]["heldout_perplexity"]["sd"], [np.std([100, 101], ddof=1)] * 2)
    figures.draw_utility(data, "target.k")


def test_privacy_utility_pairs_each_values_utility_with_its_leakage(runs):
    """The sweep's privacy–utility points: each value's mean utility (x) against its attack's mean TPR at 0.1%
    FPR (y), from results.json; no figure without utility."""
    collection = collect([runs / "sweep"])
    data = figures.privacy_utility_data(collection.groups, "lira_offline")
    assert data["labels"] == [g.label for g in collection.groups] and data["attack"] == "lira_offline"
    for i, group in enumerate(collection.groups):
        leak = [r.results.attacks["lira_offline"].tpr_at_fpr_0_001 for r in group.runs]
        assert data["privacy"]["mean"][i] == pytest.approx(np.mean(leak))
        for metric in ("umass_coherence", "heldout_perplexity"):
            xs = [getattr(r.results.utility, metric) for r in group.runs]
            assert data["utility"][metric]["mean"][i] == pytest.approx(np.mean(xs))
    fig = figures.draw_privacy_utility(data, "target.k")
    assert [ax.get_xlabel() for ax in fig.axes] == [figures.UTILITY_METRICS[m] for m in data["utility"]]
    assert {t.get_text() for t in fig.axes[0].texts} == set(data["labels"])  # every point named by its value
    for run in collection.runs:
        run.results = dataclasses.replace(run.results, utility=None)
    assert figures.privacy_utility_data(collection.groups) is None


def test_canary_histogram_axes_read_without_an_offset():
    """Scores in the millions are labelled 1.5M, not 1.5 under a "1e6" at the axis's end."""
    rng = np.random.default_rng(0)
    data = {"kind": "paired", "panels": {"mechanism": {"in": rng.normal(2.0e6, 3e5, 50),
                                                       "out": rng.normal(1.2e6, 3e5, 50)}}}
    fig = figures.draw_canary_histograms(data, "t")
    fig.draw_without_rendering()
    axis = fig.axes[0].xaxis
    labels = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
    assert axis.get_offset_text().get_text() == ""
    assert labels and all(label == "0" or label.endswith("M") for label in labels)
    assert not any("e" in label for label in labels)
    assert figures.readable_ticks([-2e6, -1.5e6, 0, 5e5]) == ["\u22122.0M", "\u22121.5M", "0", "0.5M"]
    assert figures.readable_ticks([-50020, -50000]) == ["\u221250.02k", "\u221250.00k"]
    assert figures.readable_ticks([1000, 1500, 2000]) == ["1,000", "1,500", "2,000"]
    assert figures.readable_ticks([0, 0.25, 0.5]) == ["0", "0.25", "0.50"]


def test_document_kinds_follow_the_papers_definitions():
    # rows 0-5 typical length 10; row 6 long (40), row 7 short (1); row 0 uses only common words, row 1 a rare one
    X = np.zeros((8, 6))
    X[:6, 0] = 5
    X[:6, 1] = 5
    X[1] = [0, 0, 0, 0, 0, 10]
    X[6, 0] = 40
    X[7, 2] = 1
    kinds = figures.document_kinds(sp.csr_matrix(X))
    assert kinds["long"] == 6 and kinds["short"] == 7
    assert kinds["outlier"] == 1  # the typical-length document with the rarest words
    assert kinds["inlier"] == 0   # most common words (ties: the first)


def test_zeta_examples_split_the_shadows_by_membership(runs):
    run = read_run(runs / "text")
    from topicaudit.reports.corpora import CorpusCache

    corpus, why = CorpusCache().get(run)
    assert why is None
    examples = figures.zeta_examples(run, corpus.X)
    assert set(examples) <= set(figures.KINDS) and examples
    with np.load(run.path / "statistics.npz") as s, np.load(run.path / "plan.npz") as p:
        for d in examples.values():
            column, inside = s["shadow_zeta"][:, d["row"]], p["shadow_in"][:, d["row"]]
            np.testing.assert_array_equal(d["in"], column[inside])
            np.testing.assert_array_equal(d["out"], column[~inside])
            assert d["target"] == s["target_zeta"][d["row"]]


def test_svg_is_deterministic(runs):
    data = figures.roc_data(read_run(runs / "sweep" / "k=2" / "rep-0"), ["lira_online"])
    first, second = figures.render(figures.draw_roc(data), "svg"), figures.render(figures.draw_roc(data), "svg")
    assert first == second and b"<dc:date>" not in first


# -- ledger and risk ---------------------------------------------------------------------------------------------
def test_ledger_rows_match_results_json(runs):
    collection = collect([runs / "sweep"])
    rows = ledger.ledger_rows(collection)
    assert len(rows) == 4
    for row, run in zip(rows, collection.runs):
        r = json.loads((run.path / "results.json").read_text())
        m = r["attacks"]["lira_online"]
        assert row["run"] == str(run.path)
        assert (row["tpr_0.001"], row["tpr_0.01"], row["auc"]) == (m["tpr_at_fpr_0.001"], m["tpr_at_fpr_0.01"], m["auc"])
        assert row["eps_lb"] == r["epsilon_lower_bounds"]["epsilon"]
        assert row["shadows"] == r["shadows"]["n_shadows"] == 4
        assert row["wall_s"] == r["timings_s"]["total"]
        assert row["epsilon"] is None and row["monitor_eps"] is None
        assert (row["coherence"], row["perplexity"]) == (r["utility"]["umass_coherence"],
                                                         r["utility"]["heldout_perplexity"])
        assert row["pipeline"].startswith(f"lda k={r['target']['k']}, vocabulary observed")
    assert [row["replicate"].split()[0] for row in rows] == ["1/2", "2/2", "1/2", "2/2"]
    headers, body = ledger.formatted(rows)
    assert headers[0] == "run" and len(body) == 4 and body[0][headers.index("claimed ε")] == "—"


def test_most_exposed_documents_are_the_highest_scores(runs):
    run = read_run(runs / "sweep" / "k=3" / "rep-0")
    rows = risk.most_exposed(run, "lira_online", top=7)
    scores = run.scores["lira_online"]
    assert [r["score"] for r in rows] == sorted(scores, reverse=True)[:7]
    for r in rows:
        assert r["doc_index"] == run.scores["doc_index"][r["row"]]
        assert r["member"] == run.scores["is_member"][r["row"]]
        assert "text" not in r


# -- comparability ------------------------------------------------------------------------------------------
def test_sweep_groups_are_labelled_by_the_swept_parameter(runs):
    collection = collect([runs / "sweep"])
    assert collection.varies == ["target.k"] and collection.parameter == "target.k"
    assert [g.label for g in collection.groups] == ["k=2", "k=3"]
    assert [[r.replicate for r in g.runs] for g in collection.groups] == [[0, 1], [0, 1]]


def test_refuses_to_overlay_different_corpora(runs):
    with pytest.raises(UserError, match="different corpora") as error:
        collect([runs / "sweep" / "k=2" / "rep-0", runs / "other-corpus"])
    message = str(error.value)
    assert str(runs / "other-corpus") in message and "n_docs: 120 vs 150" in message
    with pytest.raises(UserError, match="different corpora"):  # the text corpus against the synthetic one
        collect([runs / "sweep", runs / "text"])


def test_refuses_different_vocabulary_steps_unless_asked(runs):
    with pytest.raises(UserError, match="vocabulary step: \"observed\" vs \"all\".*--compare-vocabularies"):
        collect([runs / "sweep" / "k=2" / "rep-0", runs / "all-vocab"])
    collection = collect([runs / "sweep" / "k=2" / "rep-0", runs / "all-vocab"], compare_vocabularies=True)
    assert "target.vocabulary" in collection.varies


def test_cli_refusal_is_one_message_and_exit_2(runs, tmp_path, capsys):
    out = tmp_path / "refused"
    assert main(["report", str(runs / "sweep"), str(runs / "other-corpus"), "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("topicaudit: error: cannot compare") and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.iterdir())  # nothing written, not even a temp dir


def test_bad_inputs_are_user_errors(runs, tmp_path):
    with pytest.raises(UserError, match="not a directory"):
        collect([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a topicaudit run or sweep"):
        collect([tmp_path / "empty"])
    unfinished = tmp_path / "unfinished"
    shutil.copytree(runs / "text", unfinished)
    (unfinished / "results.json").unlink()
    with pytest.raises(UserError, match="unfinished run"):
        collect([unfinished])
    with pytest.raises(UserError, match="--attack 'nope': unknown attack; known: lira_online"):
        build_report([runs / "text"], tmp_path / "r", attack="nope")  # names come from the attack registry
    damaged = tmp_path / "damaged-sweep"
    damaged.mkdir()
    (damaged / "sweep.json").write_text(json.dumps({"schema": "topicaudit.sweep/1", "parameter": "target.k"}))
    with pytest.raises(UserError, match="lacks values, replicates, runs"):
        collect([damaged])
    user_audit = tmp_path / "user-audit"
    user_audit.mkdir()
    (user_audit / "results.json").write_text(json.dumps({"schema": "topicaudit.user-audit/1"}))
    with pytest.raises(UserError, match="`topicaudit audit` of a user's model"):
        collect([user_audit])


def test_partial_sweep_reports_finished_runs_and_lists_pending(runs, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(runs / "sweep", partial)
    (partial / "k=3" / "rep-0" / "results.json").unlink()
    collection = collect([partial])  # replicates are compared by index: k=3's rep-1 with k=2's rep-1
    assert [[r.replicate for r in g.runs] for g in collection.groups] == [[0, 1], [1]]
    assert len(collection.pending) == 1 and "k=3/rep-0" in collection.pending[0]


# -- the written report ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep_report(runs):
    out = runs / "sweep-report"
    assert main(["report", str(runs / "sweep"), "-o", str(out), "--quiet"]) == 0
    return out


def test_report_files(sweep_report):
    assert {p.name for p in sweep_report.iterdir()} == {"report.html", "report.md", "figures", ".topicaudit-report"}
    pngs = sorted(p.stem for p in (sweep_report / "figures").glob("*.png"))
    assert pngs == sorted(p.stem for p in (sweep_report / "figures").glob("*.svg"))
    assert pngs == ["01-overlay-lira_online", "02-tpr-by-parameter", "03-utility-by-parameter",
                    "04-privacy-utility", "05-roc-k_2", "06-zeta-k_2", "07-roc-k_3", "08-zeta-k_3"]
    page = (sweep_report / "report.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == len(pngs)
    assert "<script" not in page and "http://" not in page and "https://" not in page  # self-contained, inert
    assert "Content-Security-Policy" in page
    umask = os.umask(0)
    os.umask(umask)
    assert sweep_report.stat().st_mode & 0o777 == 0o777 & ~umask  # readable like any new directory


def test_markdown_summary(sweep_report, runs):
    md = (sweep_report / "report.md").read_text()
    assert md.startswith("# topicaudit report: varies: target.k\n")
    lines = md.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| run | group |"))
    table = lines[header + 2:header + 6]
    assert len(table) == 4 and all(str(runs / "sweep") in line for line in table)
    for link in [line for line in lines if line.startswith("![")]:
        assert (sweep_report / link.split("](")[1].rstrip(")")).exists()
    assert "| k=2 | 2 |" in md  # the by-value summary table


def test_report_replaces_an_older_report_but_nothing_else(runs, tmp_path):
    out = tmp_path / "r"
    build_report([runs / "text"], out)
    build_report([runs / "text"], out)  # its own report: replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]
    (out / "figures" / "added.png").write_bytes(b"mine")  # a file the report did not write: never deleted
    with pytest.raises(UserError, match="figures/added.png, which `topicaudit report` did not write"):
        build_report([runs / "text"], out)
    assert (out / "figures" / "added.png").read_bytes() == b"mine"
    with pytest.raises(UserError, match="was not made by `topicaudit report`"):
        build_report([runs / "text"], runs / "sweep")


def test_text_is_shown_only_when_asked_and_always_escaped(runs):
    hidden = build_report([runs / "text"], runs / "text-report", top=100)
    page = (hidden / "report.html").read_text()
    assert "alert(1)" not in page and "onerror" not in page and "quartz" not in page and "jungle" not in page
    assert "alert(1)" not in (hidden / "report.md").read_text()

    shown = build_report([runs / "text"], runs / "text-report-shown", top=100, show_text=True)
    page = (shown / "report.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script" not in page and "<img src=x" not in page
    assert "&lt;img src=x onerror=&quot;window.__pwned=2&quot;&gt; &amp;" in page
    assert "discloses membership" in page
    md = (shown / "report.md").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "<script" not in md


def test_markdown_text_is_inert():
    assert md_text("a|b <i>x</i>\n# y") == "a\\|b &lt;i&gt;x&lt;/i&gt; \\# y"
    assert md_text("- item") == "\\- item" and md_text("1. one") == "1\\. one"


def test_group_value_is_the_varied_key(runs):
    collection = collect([runs / "sweep" / "k=2" / "rep-0", runs / "sweep" / "k=3" / "rep-0"])
    assert [g.value for g in collection.groups] == [2, 3]
    assert isinstance(collection.groups[0], Group) and collection.legend_title() == "varies: target.k"


def test_drawn_roc_keeps_every_point_on_its_lines_with_far_fewer_points():
    rng = np.random.default_rng(0)
    labels = rng.random(4000) < 0.5
    scores = np.round(rng.normal(labels * 0.3, 1.0), 3)  # rounding makes some ties: diagonal runs
    fpr, tpr, _ = roc_curve(scores, labels)
    x, y = figures.corners(fpr, tpr)
    assert x.size < 0.8 * fpr.size and (x[0], y[0]) == (fpr[0], tpr[0]) and (x[-1], y[-1]) == (fpr[-1], tpr[-1])
    for px, py in zip(fpr, tpr):  # each original point lies on a kept axis-parallel segment or is kept
        j = np.searchsorted(x, px, side="right") - 1
        on_kept = np.any((x == px) & (y == py))
        vertical = np.any((x[:-1] == px) & (x[1:] == px) & (np.minimum(y[:-1], y[1:]) <= py)
                          & (py <= np.maximum(y[:-1], y[1:])))
        horizontal = j < x.size - 1 and y[j] == py == y[j + 1] and x[j] <= px <= x[j + 1]
        assert on_kept or vertical or horizontal, (px, py)


def test_figure_names_spell_out_infinity():
    from topicaudit.reports.build import _stem

    assert _stem("roc", "epsilon=∞") == "roc-epsilon_inf"  # the non-private end of a sweep over ε
    assert _stem("roc", "epsilon=-∞") == "roc-epsilon_minus-inf"
    assert _stem("zeta", "k=5") == "zeta-k_5"


def test_png_figures_are_palette_images_that_look_the_same():
    import io

    from PIL import Image

    fig = figures.draw_roc({"floor": 1e-3, "claim": None, "boundary": None, "title": "t", "metrics": {},
                            "curves": {"lira_online": (np.linspace(0, 1, 50), np.linspace(0, 1, 50) ** 0.5)}})
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    full = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"), dtype=int)
    png = figures.render(fig, "png")
    with Image.open(io.BytesIO(png)) as image:
        assert image.mode == "P"  # ≤ 256 colours
        shown = np.asarray(image.convert("RGB"), dtype=int)
    assert shown.shape == full.shape and np.abs(shown - full).mean() < 1.0
    assert len(png) < len(buffer.getvalue())  # smaller than matplotlib's own PNG
