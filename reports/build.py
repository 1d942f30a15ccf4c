"""``topicaudit report``: finished run and sweep directories → report.html, report.md, figures/.

What the report says is composed here; where it is written (staged beside the output, swapped in whole, undone on
failure) is ``reports.output_folder``'s.
"""
from __future__ import annotations

import re
from pathlib import Path

from topicaudit.attacks.registry import ATTACKS
from topicaudit.engine.execution.progress import Progress
from topicaudit.engine.storage.results import CorpusInfo
from topicaudit.engine.configuration.validation import check_output_directory
from topicaudit.errors import UserError
from topicaudit.reports import figures, ledger, risk, user_audit
from topicaudit.reports.collect import Collection, Group, collect
from topicaudit.reports.corpora import CorpusCache
from topicaudit.reports.document import Definitions, FigureRef, Headline, Paragraph, Report, Section, Table
from topicaudit.reports.output_folder import write_report
from topicaudit.reports.verdict import run_verdict
from topicaudit.inputs.files import read_once
from topicaudit.version import __version__

def _stem(*parts: str) -> str:
    """A file name from figure and group names: ASCII only, with ∞ spelled out (a sweep over ε ends there)."""
    text = "-".join(parts).replace("-∞", "minus-inf").replace("∞", "inf")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.-") or "figure"


class _Figures:
    """Draws, saves (PNG + SVG) and references figures with unique, safe file names."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.count = 0

    def add(self, fig, name: str, title: str, caption: str) -> FigureRef:
        self.count += 1
        stem = _stem(f"{self.count:02d}", name)
        encoded = figures.save_figure(fig, self.directory, stem)
        return FigureRef(stem, title, caption, encoded["png"])


def _check_attack(collection: Collection, attack: str) -> None:
    if attack not in ATTACKS:
        raise UserError(f"--attack {attack!r}: unknown attack; known: {', '.join(ATTACKS)}")
    for run in collection.runs:
        if not run.results.attacks:
            continue  # a canary-only audit (--shadows 0): its verdict and canary scores are reported
        if attack not in run.score_attacks():
            raise UserError(f"run {run.path} has no scores for attack {attack!r}; "
                            f"it has: {', '.join(run.score_attacks())}")


def _natural(run) -> bool:
    """True when the run attacked natural documents (it has shadow models), not canaries only."""
    return bool(run.results.attacks)


def _comparison(collection: Collection, figs: _Figures, attack: str, notes: list[str]) -> Section:
    parameter = collection.parameter or "run"
    section = Section("Comparison", anchor="comparison")
    headers, rows = ledger.group_summary(collection)
    section.add(Table(headers, rows, "Mean ± standard deviation over replicates, from each run's results.json"))
    sequential = collection.parameter is not None and figures.x_axis(collection.groups)[1]
    overlay = figures.overlay_data(collection.groups, attack)
    section.add(figs.add(
        figures.draw_overlay(overlay, collection.legend_title(), sequential), f"overlay-{attack}",
        f"ROC of {attack} for every {parameter} value" if collection.parameter else f"ROC of {attack}, one curve per run",
        "Log-log ROC from each run's scores.npz. A group of replicates is drawn as the mean over replicates of "
        "the TPR at FPR ≤ f on a log grid, with ± one standard deviation shaded; a single run as its exact "
        "curve. Dashed: chance. Dash-dotted, when a run claims a document-level (ε, δ): the highest TPR that "
        "claim allows at each FPR."))
    data = figures.by_parameter_data(collection.groups)
    if data["series"]:
        section.add(figs.add(
            figures.draw_by_parameter(data, parameter), "tpr-by-parameter",
            f"TPR at 0.1% FPR against {parameter}",
            "tpr_at_fpr_0.001 of the online and offline LiRA from each run's results.json; points are means "
            "over replicates, error bars one standard deviation (none for a single run)."))
    utility = figures.utility_data(collection.groups)
    if utility is not None:
        section.add(figs.add(
            figures.draw_utility(utility, parameter), "utility-by-parameter", f"Utility against {parameter}",
            "results.json utility (UMass coherence, held-out perplexity): mean ± sd over replicates."))
        trade_off = figures.privacy_utility_data(collection.groups, attack)
        if trade_off is not None:
            section.add(figs.add(
                figures.draw_privacy_utility(trade_off, parameter), "privacy-utility",
                f"Privacy–utility trade-off across {parameter}",
                f"One point per {parameter} value: its utility (x; results.json utility) against how much "
                f"{attack} finds (y; TPR at 0.1% FPR), mean ± sd over replicates, joined in the sweep's order. "
                "Up is leakier; right is better coherence, left better (lower) perplexity."))
    else:
        notes.append("No run carries utility measurements (results.json \"utility\"), so no utility figure.")
    return section


def _roc_caption(roc) -> str:
    claim = roc["claim"]
    caption = ("Every attack's ROC from scores.npz on log-log axes (lower left: the low-FPR regime that matters); "
               "legend metrics from results.json. Dashed grey: chance.")
    if roc["boundary"] is not None:
        return caption + (f" Shaded red: ROC points no ({claim.epsilon:g}, {claim.delta:g})-DP release allows, "
                          "TPR > min(e^ε·FPR + δ, 1 − e^−ε·(1 − δ − FPR)); a curve entering it contradicts the "
                          "claim.")
    if claim is not None:
        return caption + (f" The claim (ε = {claim.epsilon:g}) is {claim.adjacency}-level: it does not bound a "
                          "whole document's membership, so no document-level region is drawn.")
    return caption + " The target claims no ε, so no DP region is drawn."


def _attack_table(run, recommended: str | None) -> Table:
    """Every attack the run scored on natural documents, the recommended one marked."""
    n = run.results.n_shadows
    rows = [[name, f"{m.auc:.3f}", f"{100 * m.tpr_at_fpr_0_001:.2f}%", f"{100 * m.tpr_at_fpr_0_01:.2f}%",
             f"yes, for {n} shadow model{'s' * (n != 1)}" if name == recommended else ""]
            for name, m in run.results.attacks.items()]
    return Table(["attack", "AUC", "TPR@0.1%FPR", "TPR@1%FPR", "recommended"], rows,
                 "Every attack on the natural documents, from results.json; recommended: the attack docs/attacks.md "
                 "recommends for the run's number of shadow models")


def _verdict_section(collection: Collection) -> Section:
    """The answer first: one verdict card per group (its first finished replicate)."""
    section = Section("Verdict" if len(collection.groups) == 1 else "Verdicts", anchor="verdict")
    for group in collection.groups:
        run = group.representative
        if len(collection.groups) > 1:
            section.add(Paragraph(f"{group.label} ({run.path}):"))
        try:
            card = run_verdict(run)
        except UserError as error:  # e.g. only word canaries and no word-level claim: no test applies
            section.add(Paragraph(f"No verdict: {error}"))
            continue
        section.add(Headline(card.status, card.headline))
        items = [("claim", card.claim), ("ceiling", card.ceiling)]
        if card.power is not None:
            items.append(("power", card.power))
        if card.integrity is not None:
            items.append(("integrity", card.integrity.removeprefix("integrity: ")))
        section.add(Definitions(items))
        section.add(Table(["test", "what it observed", "ε ≥", "method"], card.bounds,
                          "Every ε lower bound, as `topicaudit check` computes them (α split over all of them)"))
        if card.next_steps:
            section.add(Definitions([("next step", step) for step in card.next_steps]))
        if card.strongest:
            section.add(Table(["experiment", "strongest attack", "TPR@0.1%FPR", "TPR@1%FPR", "AUC"],
                              card.strongest, "The attack with the highest TPR at 0.1% FPR in each experiment"))
        if card.meanings:
            section.add(Paragraph("What the headline figures mean:"))
            section.add(Definitions(card.meanings))
    return section


def _group_section(group: Group, multiple: bool, figs: _Figures, corpora: CorpusCache, attack: str,
                   top: int, show_text: bool, notes: list[str]) -> Section:
    run = group.representative
    corpus, why = corpora.get(run)
    if show_text and corpus is None:
        raise UserError(f"--show-text needs the corpus of {run.path}: {why}")
    section = Section(f"{group.label}: {run.path}" if multiple else f"Run {run.path}",
                      anchor=_stem("run", group.label))
    if len(group.runs) > 1:
        section.add(Paragraph(f"Replicate {run.replicate + 1} (seed {run.seed}) of the {len(group.runs)} finished "
                              "ones is shown; the ledger lists them all."))
    canaries = figures.canary_data(run)
    if canaries is not None:
        section.add(figs.add(
            figures.draw_canary_histograms(canaries, f"{canaries['kind']} canaries, {group.label}"),
            _stem("canaries", group.label), f"Canary scores in and out of the canary release, {group.label}",
            "Each canary entered the canary release's training with probability ½ (its coin, canaries.npz); "
            "histograms of every score of canary_scores.npz for the canaries in (blue) and out (orange). "
            "Separated histograms are what the canary bounds of the verdict measure."))
    if not _natural(run):
        notes.append(f"{group.label}: a canary-only audit (no shadow models): no ROC of natural documents, "
                     "ζ histograms or most exposed documents.")
        return section
    roc = figures.roc_data(run)
    emphasised = ", ".join(name + (" (recommended)" if name == roc["recommended"] else "")
                           for name in roc["emphasised"]) or "none"
    section.add(figs.add(figures.draw_roc(roc), _stem("roc", group.label), f"ROC, {group.label}",
                         _roc_caption(roc) + f" Bold: {emphasised}; the other attacks faded grey (the same attacks "
                         "as the run's roc.png)."))
    section.add(_attack_table(run, roc["recommended"]))
    examples = figures.zeta_examples(run, corpus.X, attack) if corpus is not None else {}
    if examples:
        kinds = "; ".join(f"{k}: {figures.KIND_DESCRIPTIONS[k]}" for k in examples)
        section.add(figs.add(
            figures.draw_zeta_examples(examples, f"ζ under IN and OUT shadow models, {group.label}"),
            _stem("zeta", group.label), f"ζ(Φ, d) of example documents, {group.label}",
            "As the paper's Figure 1: for one document of each kind, the histogram of ζ over the shadow models "
            "trained with it (IN, blue) and without it (OUT, orange; where both overlap the bars blend), from "
            "statistics.npz and plan.npz; y: number of shadow models; dotted: "
            f"the target's ζ. Kinds — {kinds}."))
    elif corpus is None:
        notes.append(f"{group.label}: ζ histograms by document kind left out — {why}")
    exposed = risk.most_exposed(run, attack, top, corpus, show_text)
    headers, rows = risk.formatted(exposed, attack)
    section.add(Table(headers, rows, f"The {len(rows)} documents {attack} is most sure were members "
                                     "(document = position in the input corpus; member = the truth)",
                      wide_columns=(len(headers) - 1,) if show_text else ()))
    return section


def build_report(paths, output: str | Path | None = None, *, attack: str = "lira_online", top: int = 20,
                 show_text: bool = False, compare_vocabularies: bool = False, quiet: bool = True) -> Path:
    """Write the report of finished run and/or sweep directories, or of one ``topicaudit audit`` output directory
    (:mod:`topicaudit.reports.user_audit`); returns the output directory. Every run file is read from disk once (``inputs.files.read_once``): what its manifest verified is what the
    report shows, whatever is swapped into the directory meanwhile."""
    with read_once():
        return _build_report(paths, output, attack=attack, top=top, show_text=show_text,
                             compare_vocabularies=compare_vocabularies, quiet=quiet)


def _build_report(paths, output: str | Path | None, *, attack: str, top: int, show_text: bool,
                  compare_vocabularies: bool, quiet: bool) -> Path:
    if top < 0:
        raise UserError(f"--top must be ≥ 0 (got {top})")
    if output is not None:
        check_output_directory(output, "-o/--output")  # a place that cannot be written fails at once
    given = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    audits = [p for p in given if user_audit.is_user_audit(p)]
    if audits:
        if len(given) > 1:
            raise UserError(f"{audits[0]} is a `topicaudit audit` of your own model: report it on its own "
                            "(`topicaudit report DIR`), not together with other directories")
        user_audit.AuditDirectory(audits[0])  # finished and intact, or one message saying why not
        collection = None
        output = Path(output) if output is not None else audits[0] / "report"
        read_from = audits
    else:
        collection = collect(list(given), compare_vocabularies=compare_vocabularies)  # (a list of str | Path)
        _check_attack(collection, attack)
        output = Path(output) if output is not None else collection.inputs[0] / "report"
        read_from = [*collection.inputs, *(run.path for run in collection.runs)]
    if collection is None:
        return write_report(output, read_from, lambda figure_dir: user_audit.compose(
            audits[0], _Figures(figure_dir), top, show_text))
    return write_report(output, read_from, lambda figure_dir: _compose(collection, figure_dir, attack, top,
                                                                       show_text, quiet))


def _compose(collection: Collection, figure_dir: Path, attack: str, top: int, show_text: bool,
             quiet: bool) -> Report:
    figs = _Figures(figure_dir)
    corpora = CorpusCache()
    notes: list[str] = []
    n_runs = len(collection.runs)
    inputs = ", ".join(map(str, collection.inputs))
    summary = [(f"{n_runs} finished run{'s' * (n_runs != 1)} from {inputs}; made by topicaudit {__version__} "
                "from what the audits wrote (nothing is recomputed).")]
    if collection.varies:
        summary.append(f"What varies between the runs: {', '.join(collection.varies)}.")
    first = collection.runs[0].results.corpus or CorpusInfo()
    summary.append(f"Corpus: {first.source or '?'} — {first.n_docs if first.n_docs is not None else '?'} documents.")
    warnings = []
    if show_text:
        warnings.append("This report shows the text of the documents the attack is most sure were training "
                        "members: it discloses membership itself. Share it only as you would the corpus.")
    if collection.pending:
        notes.append(f"{len(collection.pending)} run(s) of the sweep are not finished and are left out: "
                     f"{'; '.join(collection.pending)}")

    rows = ledger.ledger_rows(collection, attack)
    headers, body = ledger.formatted(rows)
    ledger_section = Section("Privacy ledger", anchor="ledger")
    ledger_section.add(Paragraph(f"One row per run; metrics of {attack} on natural documents, all from the run's "
                                 "results.json (a canary-only run has none; its bound is the canaries')."))
    ledger_section.add(Table(headers, body))
    ledger_section.add(Definitions([(heading, meaning) for _, heading, meaning in ledger.COLUMNS]))
    multiple = len(collection.groups) > 1
    if not multiple and len(collection.runs) > 1:  # one value, several replicates: their mean ± sd here
        headers, summary_rows = ledger.group_summary(collection)
        ledger_section.add(Table(headers, summary_rows, "Mean ± standard deviation over the replicates"))
    sections = [_verdict_section(collection)]
    progress = Progress("report sections", len(collection.groups) + multiple, quiet=quiet)
    if multiple and all(_natural(run) for run in collection.runs):
        sections.append(_comparison(collection, figs, attack, notes))
        progress.advance()
    for group in collection.groups:
        sections.append(_group_section(group, multiple, figs, corpora, attack, top, show_text, notes))
        progress.advance()
    progress.close()
    sections.append(ledger_section)  # the details last: the answer is the verdict above
    title = "topicaudit report" + (f": {collection.legend_title()}" if collection.varies else f": {collection.runs[0].name}")
    return Report(title, summary, warnings, sections, notes)
