"""A user's model, end to end: `topicaudit audit` of an exported PHEME Φ, its exposure figure, its page, its API.

One small audit of real tweets is shared by the module: a Φ trained on a hidden
random half of 150 PHEME candidates plus 150 tweets the audit never sees,
audited with 300 reference tweets and 8 shadow models. One candidate carries
markup, to prove the page shows corpus text as text.
"""
from __future__ import annotations

import csv
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import topicaudit
from topicaudit.attacks import exposure as exposure_module
from topicaudit.attacks.exposure import shadow_exposure
from topicaudit.attacks.metrics import summarize
from topicaudit.cli.main import main
from topicaudit.engine.execution.plan import make_plan
from topicaudit.reports.build import build_report

SCRIPT_TEXT = "<script>window.__pwned = 1</script>"
IMG_TEXT = '<img src=x onerror="window.__pwned = 2">'


def _export(directory: Path, pheme_path: Path, n_candidates: int, n_reference: int, n_private: int, seed: int = 0,
            markup: bool = False) -> np.ndarray:
    """Write phi.npy, vocab.txt, candidates.json and reference.json of a Φ trained on a hidden random half of the
    candidates plus private tweets; returns the hidden membership of the candidates."""
    from topicaudit.inputs.corpus import corpus_from_texts
    from topicaudit.targets import build_target

    texts = json.loads(pheme_path.read_text())["text"]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    candidates = [texts[i] for i in order[:n_candidates]]
    reference = [texts[i] for i in order[n_candidates:n_candidates + n_reference]]
    private = [texts[i] for i in order[n_candidates + n_reference:n_candidates + n_reference + n_private]]
    if markup:
        candidates[0] = f"{SCRIPT_TEXT} {candidates[0]}"
        candidates[1] = f"{IMG_TEXT} {candidates[1]}"
    member = rng.random(n_candidates) < 0.5
    training = corpus_from_texts([t for t, m in zip(candidates, member) if m] + private, preprocess=False)
    release = build_target("lda", 5).fit(training.X, int(rng.integers(2**32)))
    directory.mkdir(parents=True, exist_ok=True)
    np.save(directory / "phi.npy", release.phi.astype(np.float64))
    (directory / "vocab.txt").write_text("\n".join(training.vocabulary[release.vocabulary]) + "\n")
    (directory / "candidates.json").write_text(json.dumps({"text": candidates}))
    (directory / "reference.json").write_text(json.dumps({"text": reference}))
    return member


def _args(d: Path, *extra) -> list[str]:
    return [str(d / "phi.npy"), "--vocabulary", str(d / "vocab.txt"), "--candidates", str(d / "candidates.json"),
            "--reference", str(d / "reference.json"), "--no-preprocess", *map(str, extra)]


@pytest.fixture(scope="module")
def audited(tmp_path_factory, pheme_path, ray_holder):
    """(directory of the inputs, the audit's output directory, the hidden membership, the summary printed)."""
    ray_holder.start()
    d = tmp_path_factory.mktemp("user-model")
    member = _export(d, pheme_path, 150, 300, 150, markup=True)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["audit", *_args(d, "--shadows", 8, "--output", d / "run")])
    assert code == 0
    return d, d / "run", member, out.getvalue()


# -- the exposure figure ------------------------------------------------------------------------------------------
def test_the_audit_measures_the_attack_on_models_trained_like_the_users(audited):
    d, run, member, printed = audited
    result = json.loads((run / "audit.json").read_text())
    found = result["exposure"]
    assert found["attack"] == result["ranking"]["rank_by"] == "lira_offline_shrunk"
    assert found["n_targets"] == found["n_shadows"] == 8 and found["shadows_per_target"] == 6
    assert found["n_documents"] == result["inputs"]["candidates"]["n_scored"] + result["inputs"]["reference"]["n_used"]
    for name in ("tpr_at_fpr_0.001", "tpr_at_fpr_0.01", "auc"):
        values = np.array(found[name]["per_target"])
        assert len(values) == 8 and found[name]["mean"] == pytest.approx(values.mean(), abs=1e-6)
        assert found[name]["sd"] == pytest.approx(values.std(ddof=1), abs=1e-6)
    # what is stored is what the scores give: each target's AUC from exposure.npz, recomputed independently
    from sklearn.metrics import roc_auc_score

    arrays = np.load(run / "exposure.npz")
    assert arrays["score"].shape == arrays["is_member"].shape == (8, found["n_documents"])
    for j in range(8):
        assert roc_auc_score(arrays["is_member"][j], arrays["score"][j]) == pytest.approx(
            found["auc"]["per_target"][j], abs=1e-5)
    assert 0.6 < found["auc"]["mean"] < 1.0  # PHEME tweets leak under LDA (the paper's result)
    # one plain sentence, its uncertainty and what it rests on, in audit.json and on the screen
    assert found["statement"].startswith("An attack on models trained like yours identifies ")
    assert "while wrongly flagging 0.1% of other documents" in found["statement"]
    assert "over 8 shadow models" in found["uncertainty"] and "±" in found["uncertainty"]
    assert f"exposure: {found['statement']}." in printed and found["uncertainty"] in printed
    assert "versus the reference:" in printed and "not a count of members" in printed


def test_each_shadow_is_attacked_without_its_complementary_twin(monkeypatch):
    """The twin's membership is the target's negated: kept, the number of IN shadows left would give every
    document's membership away. Every target is scored against N − 2 shadows, IN and OUT of each document alike."""
    plan = make_plan(40, 6, seed=0)
    seen = []
    real = exposure_module.compute_attacks

    def spy(inputs, names):
        seen.append(inputs.shadow_in.copy())
        return real(inputs, names)

    monkeypatch.setattr(exposure_module, "compute_attacks", spy)
    zeta = np.random.default_rng(0).normal(size=(6, 40))
    found = shadow_exposure(zeta, plan.shadow_in, "lira_offline", np.full(40, 10.0))
    assert found["n_targets"] == 6 and found["shadows_per_target"] == 4 and len(seen) == 6
    for j, used in enumerate(seen):
        assert used.shape == (4, 40) and (used.sum(axis=0) == 2).all()  # balanced: no membership given away
        kept = [i for i in range(6) if i not in (j, j ^ 1)]
        assert np.array_equal(used, plan.shadow_in[kept])
    assert shadow_exposure(zeta[:2], plan.shadow_in[:2], "lira_offline", np.full(40, 10.0)) is None  # too few


def test_pure_noise_exposes_nothing():
    plan = make_plan(2000, 8, seed=1)
    zeta = np.random.default_rng(2).normal(-50, 5, size=(1, 2000)) + np.random.default_rng(3).normal(size=(8, 2000))
    found = exposure_module.to_json(shadow_exposure(zeta, plan.shadow_in, "lira_offline", np.full(2000, 10.0)))
    assert abs(found["auc"]["mean"] - 0.5) < 0.03 and found["tpr_at_fpr_0.01"]["mean"] < 0.03


# -- the page -------------------------------------------------------------------------------------------------------
def test_report_of_an_audit_leads_with_the_answer(audited, tmp_path, capsys):
    d, run, member, _ = audited
    result = json.loads((run / "audit.json").read_text())
    code = main(["report", str(run), "-o", str(tmp_path / "page")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"report   {tmp_path / 'page' / 'report.html'}" in out
    html = (tmp_path / "page" / "report.html").read_text()
    text = re.sub(r"<[^>]+>", " ", html)
    text = re.sub(r"\s+", " ", text)
    # the answer first: the level and the figure's sentence, the candidates against the reference, the top table
    order = [text.index(s) for s in ("How exposed are the candidates?", "EXPOSURE", "identifies",
                                     "reference documents scored the same way", "strongest membership evidence",
                                     "Figures", "Details")]
    assert order == sorted(order)
    import html as html_module

    assert html_module.escape(result["exposure"]["statement"]) in html
    assert "not a count of members" in text and "over 8 shadow models" in text
    level = next(word for word in ("HIGH EXPOSURE", "SOME EXPOSURE", "LITTLE EXPOSURE") if word in text)
    tpr = result["exposure"]["tpr_at_fpr_0.001"]["mean"]
    assert level == ("HIGH EXPOSURE" if tpr >= 0.1 else "SOME EXPOSURE" if tpr >= 0.01 else "LITTLE EXPOSURE")
    # the most exposed candidates, in the order and with the log10 p-values of scores.csv
    rows = list(csv.DictReader(open(run / "scores.csv", newline="", encoding="utf-8")))
    table = html.split("strongest membership evidence", 1)[1].split("</table>", 1)[0]
    cells = re.findall(r"<tr><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td><td[^>]*>\d+</td><td[^>]*>([^<]+)</td>", table)
    assert [(int(r), int(c)) for r, c, _ in cells] == [(int(r["rank"]), int(r["candidate"])) for r in rows[:20]]
    assert [float(v) for _, _, v in cells] == [round(float(r["lira_offline_shrunk_log10_p"]), 2) for r in rows[:20]]
    assert "log10 lira_offline_shrunk_p" in html and "&lt; 1e-12" not in html
    # the figures: the attack on the shadows, candidates vs reference, ζ of the top candidates
    assert html.count("data:image/png;base64,") == 3
    assert sorted(p.name for p in (tmp_path / "page" / "figures").iterdir()) == [
        "01-exposure-roc.png", "01-exposure-roc.svg", "02-versus-reference.png", "02-versus-reference.svg",
        "03-candidate-zeta.png", "03-candidate-zeta.svg"]
    md = (tmp_path / "page" / "report.md").read_text()
    assert md.index("How exposed") < md.index("## Figures") and "identifies" in md
    # what protected the audit's files, as a run's card says it (an audit's page never said it)
    assert re.search(r"integrity\W+(hashes only \(manifest SHA-256 verified|authenticated \(manifest HMAC)", md), md
    # the Python API gives the same page
    again = topicaudit.report(run, tmp_path / "api-page")
    assert (again / "report.html").read_text() == html


def test_candidate_text_is_shown_only_when_asked_and_always_escaped(audited, tmp_path):
    d, run, _, _ = audited
    plain = build_report(run, tmp_path / "plain", top=200)
    assert "window.__pwned" not in (plain / "report.html").read_text()  # no corpus text unless asked
    page = build_report(run, tmp_path / "text", top=200, show_text=True)
    html = (page / "report.html").read_text()
    assert "<script>window" not in html and "<img src=x" not in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;window.__pwned = 2&quot;&gt;" in html
    assert "discloses membership" in html
    md = (page / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md


CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
def test_the_first_screen_answers_in_a_browser(audited, tmp_path):
    """Headless Chromium opens the page from disk: the answer and the top candidates are on the first screen,
    every figure decodes, no script runs, the markup of a candidate shows as text."""
    import base64

    from test_report_browser import PAGE_STATE, DevTools, _open

    d, run, _, _ = audited
    page = build_report(run, tmp_path / "page", top=200, show_text=True)
    browser = DevTools(CHROMIUM, tmp_path / "profile")
    try:
        session = _open(browser, page / "report.html", 1280, 900)
        state = json.loads(browser.send("Runtime.evaluate", {"expression": PAGE_STATE, "returnByValue": True},
                                        session=session)["result"]["value"])
        layout = json.loads(browser.send("Runtime.evaluate", {"expression": """JSON.stringify({
          headline: document.querySelector('.verdict').getBoundingClientRect(),
          headlineText: document.querySelector('.verdict').innerText,
          table: document.querySelector('table').getBoundingClientRect(),
          figures: document.getElementById('figures').getBoundingClientRect()})""", "returnByValue": True},
            session=session)["result"]["value"])
        shot = browser.send("Page.captureScreenshot", {"format": "png"}, session=session)
    finally:
        browser.close()
    assert layout["headline"]["bottom"] <= 900 and layout["table"]["top"] < 900  # the answer on the first screen
    assert layout["headline"]["top"] < layout["table"]["top"] < layout["figures"]["top"]
    assert "EXPOSURE" in layout["headlineText"] and "identifies" in layout["headlineText"]
    assert state["pwned"] is None and state["scripts"] == 0
    assert len(state["images"]) == 3 and all(i["complete"] and i["width"] > 0 for i in state["images"])
    assert SCRIPT_TEXT in state["text"] and IMG_TEXT in state["text"]
    assert base64.b64decode(shot["data"])[:8] == b"\x89PNG\r\n\x1a\n"


# -- the API ----------------------------------------------------------------------------------------------------
def test_audit_results_carry_every_score_and_the_files(audited):
    d, run, _, _ = audited
    results = topicaudit.AuditResults.load(run)
    scores = results.all_scores
    rows = list(csv.DictReader(open(run / "scores.csv", newline="", encoding="utf-8")))
    assert len(scores["rank"]) == len(rows) == results["inputs"]["candidates"]["n_scored"] > len(results.top)
    assert scores["rank"].tolist() == list(range(1, len(rows) + 1))
    assert scores["candidate"].tolist() == [int(r["candidate"]) for r in rows]
    np.testing.assert_allclose(scores["lira_offline_shrunk_log10_p"],
                               [float(r["lira_offline_shrunk_log10_p"]) for r in rows])
    assert np.isfinite(scores["lira_offline_shrunk_log10_p"]).all()  # even where the p-value itself is 0
    assert results.paths["scores"] == run / "scores.csv" and results.paths["exposure"].exists()
    assert all(results.paths[role].exists() for role in ("audit", "statistics", "plan", "config", "models"))
    assert results.exposure["n_targets"] == 8
    assert "all_scores" not in results.to_json() and results.to_json() == json.loads((run / "audit.json").read_text())


def test_the_python_api_returns_the_directory_and_every_score(audited, tmp_path):
    d, _, _, _ = audited
    results = topicaudit.audit_model(d / "phi.npy", d / "candidates.json", d / "reference.json",
                                     vocabulary=str(d / "vocab.txt"), preprocess=False, shadows=4,
                                     output=str(tmp_path / "api"))
    assert results.directory == tmp_path / "api"
    assert len(results.all_scores["candidate"]) == results.summary["n_candidates"]
    assert results.exposure["n_targets"] == 4 and results.exposure["shadows_per_target"] == 2


# -- the default directory ------------------------------------------------------------------------------------------
def test_a_second_audit_of_the_same_model_with_other_candidates_gets_its_own_directory(audited, tmp_path,
                                                                                      monkeypatch, capsys):
    d, _, _, _ = audited
    texts = json.loads((d / "candidates.json").read_text())["text"]
    (tmp_path / "other.json").write_text(json.dumps({"text": texts[50:]}))
    monkeypatch.chdir(tmp_path)
    assert main(["audit", *_args(d, "--shadows", 2, "--quiet")]) == 0
    first = Path(capsys.readouterr().out.strip())
    args = _args(d, "--shadows", 2, "--quiet")
    args[args.index("--candidates") + 1] = str(tmp_path / "other.json")
    assert main(["audit", *args]) == 0
    second = Path(capsys.readouterr().out.strip())
    assert first != second and first.parent == second.parent == Path("runs")
    assert first.name.startswith("audit-phi-") and second.name.startswith("audit-phi-")
    assert (tmp_path / first / "audit.json").exists() and (tmp_path / second / "audit.json").exists()
    assert main(["audit", *_args(d, "--shadows", 2, "--quiet")]) == 0  # the first command again: resumed
    assert Path(capsys.readouterr().out.strip()) == first
    # two shadows leave none to attack a shadow with: the figure says it was not measured, and why
    found = json.loads((tmp_path / first / "audit.json").read_text())["exposure"]
    assert found["n_targets"] == 0 and "at least 4 shadow models" in found["not_measured"]
    html = (build_report(tmp_path / first, tmp_path / "page") / "report.html").read_text()
    assert "NOT MEASURED" in html and "at least 4 shadow models" in html


# -- refusals: one line, exit 2 ---------------------------------------------------------------------------------------
def _one_line(capsys, *argv) -> str:
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_bad_audit_directories_are_refused_in_one_line(audited, tmp_path, capsys, finished_run):
    d, run, _, _ = audited
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    shutil.copy(run / "config.toml", unfinished / "config.toml")
    assert "unfinished `topicaudit audit`" in _one_line(capsys, "report", unfinished)
    edited = tmp_path / "edited"
    shutil.copytree(run, edited, ignore=shutil.ignore_patterns("report", "models"))
    data = json.loads((edited / "audit.json").read_text())
    data["exposure"]["statement"] = "An attack identifies 0% of members"
    (edited / "audit.json").write_text(json.dumps(data))
    assert "is not the file this run wrote" in _one_line(capsys, "report", edited)
    config, _ = finished_run
    line = _one_line(capsys, "report", run, config.run_dir)
    assert "report it on its own" in line


@pytest.mark.slow
def test_the_exposure_figure_describes_the_users_model(tmp_path, pheme_path, shared_ray):
    """Against the hidden truth: the figure measured on the shadows is close to what the same attack achieves on
    the user's model (trained like the shadows, on as many documents), slightly below it (N − 2 shadows)."""
    member = _export(tmp_path, pheme_path, 400, 800, 400)
    results = topicaudit.audit_model(tmp_path / "phi.npy", tmp_path / "candidates.json", tmp_path / "reference.json",
                                     vocabulary=str(tmp_path / "vocab.txt"), preprocess=False, shadows=64,
                                     output=str(tmp_path / "run"))
    scores = results.all_scores
    truth = summarize(-scores["lira_offline_shrunk_log10_p"], member[scores["candidate"]])
    found = results.exposure
    assert abs(found["auc"]["mean"] - truth["auc"]) < 0.05
    assert abs(found["tpr_at_fpr_0.01"]["mean"] - truth["tpr_at_fpr_0.01"]) < 0.10
    assert math.isfinite(found["tpr_at_fpr_0.001"]["sd"]) and found["n_targets"] == 64
