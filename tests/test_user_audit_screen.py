"""`topicaudit audit`'s screen: the scores shown are the ranking's own, no count of members is claimed,
and statistics that few shadows cannot support are named instead of printed as 1e14 or p = 0."""
from pathlib import Path

from topicaudit.attacks.ranking import unreliable_columns
from topicaudit.cli.audit import _score_text, ranked_table
from topicaudit.engine.storage.audit_results import USER_AUDIT_SCHEMA, AuditLearner, AuditRanking, AuditResults


def _result(n_shadows: int, by: str, rank_by: str, top: list[dict]) -> AuditResults:
    return AuditResults(
        schema=USER_AUDIT_SCHEMA,
        inputs={"phi": {"path": "phi.npy", "k": 3, "n_words": 50},
                "candidates": {"n_dropped_empty": 0}, "reference": {"n_used": 100}},
        learner=AuditLearner(name="lda", k=3, params={}, settings_from="the learner's defaults"),
        shadows={"n_shadows": n_shadows, "training_docs": 60},
        ranking=AuditRanking(by=by, rank_by=rank_by, recommended=False),
        summary={"n_candidates": len(top), "unreliable": unreliable_columns(n_shadows)},
        top=top,
        timings_s={"total": 1.0, "fit_wall": 0.5, "statistics": 0.1},
    )


def _row(rank, shrunk_p, raw_p, llr):
    return {"rank": rank, "candidate": rank, "id": str(rank), "n_tokens": 10, "zeta": -30.0,
            "lira_offline_shrunk_p": shrunk_p, "lira_offline_p": raw_p, "lira_online": llr}


def test_the_table_shows_the_score_it_ranks_by(capsys):
    # ranked by the shrunk p; the unshrunk p (out of order) must not be the column shown
    top = [_row(1, 1e-5, 2.9e-14, 2.8e14), _row(2, 3e-5, 1.9e-14, 3e14), _row(3, 2e-4, 0.0, 5.0)]
    table = ranked_table(_result(2, "lira_offline_shrunk_p", "lira_offline_shrunk", top), Path("runs/x"))
    header = next(line for line in table.splitlines() if line.split()[:2] == ["rank", "candidate"])
    assert header.split()[-2:] == ["log10", "lira_offline_shrunk_p"]  # p-values shown on a log scale
    assert "ranked by lira_offline_shrunk: offline LiRA p-value" in table  # the attack's name, as `run` prints it
    rows = table.splitlines()[table.splitlines().index(header) + 1:]
    shown = [line.split()[-1] for line in rows if line.split()[:1] in (["1"], ["2"], ["3"])]
    assert shown == ["-5.00", "-4.52", "-3.70"]
    assert "2.8e+14" not in table and "0.00e+00" not in table and "< 1e-12" not in table
    assert "Benjamini" not in table and "FDR" not in table and "claims no number of members" in table
    assert "unreliable with 2 shadows: lira_online" in table and "unreliable with 2 shadows: lira_offline_p" in table


def test_an_unreliable_ranking_is_named_and_extremes_are_shown_as_bounds():
    top = [_row(1, 1e-3, 0.0, 2.8e14), _row(2, 1e-3, 1e-20, 9.0)]
    table = ranked_table(_result(4, "lira_online", "lira_online", top), Path("runs/x"))
    assert "> 1e6" in table and "rests on an unreliable statistic" in table
    assert _score_text("lira_online", -3e9) == "< -1e6"


def test_p_values_print_as_log10_p_even_where_they_underflow():
    """Every top score once read "< 1e-12"; log10 p from z (the row's *_log10_p) tells them apart."""
    assert _score_text("lira_offline_shrunk_p", 0.0, -341.27) == "-341.27"  # p underflowed to 0; log10 p did not
    assert _score_text("lira_offline_shrunk_p", 3e-13) == "-12.52"         # older audit.json: no log10 column
    assert _score_text("lira_offline_p", 0.0) == "< -307" and _score_text("lira_offline_p", 0.0, -5e13) == "< -1e6"
    rows = [{**_row(1, 0.0, 0.0, 9.0), "lira_offline_shrunk_log10_p": -40.5, "beyond_reference": 1.0},
            {**_row(2, 2e-20, 0.0, 8.0), "lira_offline_shrunk_log10_p": -19.7, "beyond_reference": 0.995}]
    table = ranked_table(_result(64, "lira_offline_shrunk_p", "lira_offline_shrunk", rows), Path("runs/x"))
    lines = [line.split() for line in table.splitlines() if line.split()[:2] in (["1", "1"], ["2", "2"])]
    assert [line[-2:] for line in lines] == [["-40.50", "100%"], ["-19.70", "99.5%"]]
    assert "> reference" in table


def test_many_shadows_leave_only_the_calibration_caveat():
    assert "lira_online" not in unreliable_columns(64)
    assert "never count" in unreliable_columns(64)["lira_offline_p"]
    assert "1 shadow(s) a side" in unreliable_columns(2)["lira_online"]
