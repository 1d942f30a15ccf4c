"""The report leads with the answer: a verdict card computed as `check` computes it; canary-only runs report."""
import pytest

from topicaudit.cli.main import main
from topicaudit.engine.check import check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.presentation.roc_figure import emphasised_attacks
from topicaudit.engine.run import execute_run
from topicaudit.reports import figures
from topicaudit.reports.build import build_report
from topicaudit.reports.collect import read_run
from topicaudit.reports.verdict import run_verdict


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory):
    """A canary-only audit (no shadow model, no Ray): the README's headline audit, small."""
    out = tmp_path_factory.mktemp("canaries") / "run"
    execute_run(config_from_dict({"synthetic": {"n_docs": 300, "n_words": 800}, "target": {"k": 4},
                                "attack": {"shadows": 0, "canaries": {"count": 200}}, "output": str(out)}),
              quiet=True)
    return out


def test_a_canary_only_run_is_reportable_with_its_verdict_first(canary_run, tmp_path):
    page = build_report([canary_run], tmp_path / "report")
    html = (page / "report.html").read_text()
    assert html.index('class="verdict') < html.index('id="ledger"')
    assert "NO CLAIM" in html and "canaries on the released Φ" in html and "<script" not in html
    markdown = (page / "report.md").read_text()
    assert markdown.index("## Verdict") < markdown.index("## Privacy ledger")
    assert any(p.name.endswith("canaries-demo.png") for p in (page / "figures").iterdir())


def test_the_card_holds_checks_bound_and_the_claim_check_was_given(canary_run, capsys):
    assert main(["check", str(canary_run), "--epsilon", "1"]) == 1
    capsys.readouterr()
    card = run_verdict(read_run(canary_run))
    result = check_run(canary_run, 1.0)
    assert card.status == "VIOLATED" and "ε = 1," in card.claim
    assert {row[0] for row in card.bounds} == set(result.bounds)
    assert card.bounds[0][2] == f"{result.epsilon_lower_bound:.3f}"
    assert card.ceiling.startswith(f"ε = {result.ceiling:.2f}")
    assert card.strongest[0][0] == "canaries"
    (canary_run / "check.json").unlink()  # back to the target's own (absent) claim
    assert run_verdict(read_run(canary_run)).status == "NO CLAIM"


def test_the_card_reads_the_checks_own_verdict_and_observations():
    from pathlib import Path

    from topicaudit.bounds.epsilon import EpsilonBound
    from topicaudit.engine.check import CheckResult
    from topicaudit.reports.verdict import _observed, _power, _status

    bound = EpsilonBound(0.0, "one-run", 0.95, 0.0)
    result = CheckResult(Path("r"), 1.0, 0.0, 0.05, {"canaries/mechanism:one-run": bound}, 4.9, "document",
                         {"canaries/": "canaries on everything the mechanism releases"}, True, None)
    assert _status(result, True) == "NO SIGNAL" and _status(result, False) == "NO SIGNAL"
    assert _observed(result, "canaries/mechanism:one-run") == "canaries on everything the mechanism releases"
    consistent = CheckResult(Path("r"), 1.0, 0.0, 0.05, {"canaries/mechanism:one-run": bound}, 4.9, "document",
                             {}, False, {"2x": 0.95, "10x": 1.0, "replicates": 20})
    assert _status(consistent, True) == "CONSISTENT" and _status(consistent, False) == "NO CLAIM"
    assert _observed(consistent, "canaries/mechanism:one-run") == "canaries on the released Φ"
    assert "95% of 20 simulated audits" in _power(consistent.power)


def test_the_roc_emphasises_the_recommended_attack_and_the_papers_lira():
    assert emphasised_attacks(64, ["lira_online", "lira_offline", "lira_offline_shrunk"]) == \
        ["lira_offline_shrunk", "lira_online"]
    assert emphasised_attacks(1, ["lira_online", "rmia_online"]) == ["rmia_online", "lira_online"]


def test_histograms_name_their_overlap_and_their_y_axis():
    import numpy as np

    data = {"kind": "unique-word", "panels": {"zeta": {"in": np.array([1.0, 2.0]), "out": np.array([1.5, 0.0])}}}
    fig = figures.draw_canary_histograms(data, "canaries")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "canaries"
    assert "both (bars overlap)" in [t.get_text() for t in ax.get_legend().get_texts()]
