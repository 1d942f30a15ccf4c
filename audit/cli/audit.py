"""``topicaudit audit``: rank candidate documents by membership evidence against a user's trained Φ.

The flags build the same :class:`topicaudit.engine.configuration.config.AuditConfig` a TOML
file does; :func:`topicaudit.engine.audit.execute_audit` runs it; the table
printed at the end is made here.
"""
from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from topicaudit.attacks.ranking import PER_DOCUMENT_COLUMNS, RANKINGS
from topicaudit.engine.configuration import toml_reader
from topicaudit.engine.audit import execute_audit
from topicaudit.engine.audit_inputs import AUDIT_SETTINGS, audit_config, settings_line
from topicaudit.engine.configuration.config import AuditConfig
from topicaudit.engine.storage.audit_results import AuditLearner, AuditRanking, AuditResults
from topicaudit.process_state import only_the_command
from topicaudit.errors import UserError


def register(commands) -> None:
    audit = commands.add_parser(
        "audit", help="audit your own trained Φ: rank candidate documents by membership evidence",
        description="Audit a released topic-word matrix PHI with its vocabulary: train shadow models on a "
                    "reference corpus plus the candidate documents, and rank the candidates by LiRA membership "
                    "evidence (online log-likelihood ratio, offline p-value). No ground truth is needed. Writes "
                    "scores.csv and audit.json in the output directory; an interrupted audit resumes.",
    )
    audit.add_argument("phi", metavar="PHI",
                       help="a configuration file (.toml, docs/configuration.md: [model], [corpus] = the candidates, "
                            "[reference], [ranking]; flags override it) or Φ, k topics × V words: .npy, .npz (array "
                            "'phi' or 'components_'), .csv (k lines of V numbers), a tomotopy LDAModel file (vocabulary and settings from the model), a gensim "
                            "LdaModel saved with save() (needs --trust-pickle), a BERTopic model directory saved with "
                            "save(path, serialization='safetensors', save_ctfidf=True) (Φ = its c-TF-IDF rows "
                            "normalised; docs/bertopic.md), or a joblib-saved scikit-learn "
                            "LatentDirichletAllocation (.joblib/.pkl, needs --trust-pickle)")
    audit.add_argument("--vocabulary", metavar="FILE",
                       help="Φ's words in column order: .txt (one per line, or gensim's Dictionary.save_as_text) or "
                            ".json (a list, or word → column index like CountVectorizer.vocabulary_); not needed for "
                            "a CSV whose header names them or a saved tomotopy/gensim model")
    audit.add_argument("--candidates", metavar="PATH",
                       help="documents to test for membership (JSON {\"text\": [...]} of strings or of token "
                            "lists, UCI docword, 20news .tar.gz, a folder of text files, or a gensim MmCorpus .mm "
                            "whose term ids are the model's dictionary ids)")
    audit.add_argument("--reference", metavar="PATH",
                       help="documents from the same distribution, for the shadow models (same formats)")
    audit.add_argument("--format", choices=["json", "uci", "20news", "folder", "mm"],
                       help="format of both corpora (default: from each path)")
    audit.add_argument("--text-field", help="JSON corpora: field holding the documents (default text)")
    audit.add_argument("--candidates-option", action="append", default=[], metavar="KEY=VALUE",
                       help="loader option for the candidates, e.g. subset=test (20news), encoding=latin-1 (folder)")
    audit.add_argument("--reference-option", action="append", default=[], metavar="KEY=VALUE",
                       help="loader option for the reference corpus")
    pre = audit.add_mutually_exclusive_group()
    pre.add_argument("--preprocess", dest="preprocess", action="store_true", default=None,
                     help="pre-process raw text (default for text corpora)")
    pre.add_argument("--no-preprocess", dest="preprocess", action="store_false",
                     help="the text is already pre-processed: only tokenise")
    audit.add_argument("--learner", help="the learner that trained Φ, for the shadows (default: the saved model's "
                                          "library, gensim-lda, tomotopy-lda or bertopic, else lda); a built-in name, an installed plug-in's "
                                          "name or package.module:Class")
    audit.add_argument("--k", type=int, help="topics of the shadow models (default: Φ's number of rows)")
    audit.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="learner parameter, value read as TOML (e.g. max_iter=20, doc_topic_prior=0.1)")
    audit.add_argument("--shadows", type=int, help="number of shadow models, even (default 64)")
    audit.add_argument("--seed", type=int, help="seed of every random choice (default 0)")
    audit.add_argument("--normalize", action="store_true", default=None,
                       help="divide each row of Φ by its sum (for unnormalised weights like components_)")
    audit.add_argument("--tolerance", type=float,
                       help="how far a row of Φ may sum from 1 without --normalize (default 1e-3)")
    audit.add_argument("--trust-pickle", action="store_true", default=None,
                       help="allow loading a .joblib/.pkl Φ file; unpickling runs any code in the file, so only "
                            "for files you made or trust")
    audit.add_argument("--rank-by", metavar="ATTACK",
                       help="the attack to rank by: " + ", ".join(RANKINGS) + " (offline LiRA shown as its "
                            "p-value, online as its log-likelihood ratio; _global: pooled variance, _shrunk: "
                            "variance shrunk towards a prior); default recommended: the attack docs/attacks.md "
                            "recommends for --shadows (said in the output)")
    audit.add_argument("--show-text", action="store_true", default=None, help="add each candidate's text to scores.csv and the table")
    audit.add_argument("--top", type=int, help="rows of the ranking to print and keep in audit.json (default 10)")
    audit.add_argument("--name", help="audit name (default: PHI's file name)")
    audit.add_argument("--output", help="output directory (default runs/audit-NAME-HASH, HASH: 6 hex digits of the "
                                           "settings and the inputs' places, so other inputs get another directory)")
    audit.add_argument("--ray-address", help="join an existing Ray cluster ('auto' or host:port)")
    audit.add_argument("--num-cpus", type=int, help="size of the local Ray instance (default: all cores)")
    audit.add_argument("--quiet", action="store_true", help="no progress or table; just the output directory")


def parse_assignments(items: list[str], flag: str) -> dict:
    """``KEY=VALUE`` flags as a dict, values read as TOML (5 → int, 0.5 → float, true), else strings."""
    parsed = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"{flag} {item!r}: expected NAME=VALUE, e.g. {flag} max_iter=20")
        if key in parsed:
            raise UserError(f"{flag} gives {key!r} twice; give each name once")
        toml_reader.check_bounds(f"v = {text.strip()}", f"{flag} {key}")  # [[[…]]] would recurse without end
        try:
            parsed[key] = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            parsed[key] = text.strip()
    return parsed


def config_from_args(args) -> AuditConfig:
    """One configuration from the command line: a TOML file given as PHI, with the flags given overriding it."""
    settings = {name: getattr(args, name, None) for name in AUDIT_SETTINGS}
    for flag, name in (("candidates_option", "candidates_options"), ("reference_option", "reference_options"),
                       ("param", "params")):
        settings[name] = parse_assignments(getattr(args, flag), "--" + flag.replace("_", "-"))
    return audit_config(args.phi, format=args.format, **settings)


def execute(args) -> int:
    config = config_from_args(args)
    result = execute_audit(config, quiet=args.quiet)
    only_the_command()
    if args.quiet:
        print(config.run_dir)
    else:
        print(ranked_table(result, config.run_dir))
    return 0


# -- the table printed at the end ---------------------------------------------------------------
def _score_text(column: str, value: float, log10_p: float | None = None) -> str:
    """A score for the screen, on a log scale: an offline p-value as log10 p (-12.3 is p = 5e-13; from the row's
    exact ``*_log10_p`` when given), a log-likelihood ratio as it is; beyond what any shadows support, a bound."""
    if column.endswith("_p"):
        if log10_p is None:
            log10_p = math.log10(value) if value > 0 else -math.inf
        if log10_p == -math.inf:
            return "< -307"  # p underflowed to 0 and no log10 p was stored (an audit.json of an older version)
        return "< -1e6" if log10_p < -1e6 else f"{log10_p:.2f}"
    if abs(value) >= 1e6:
        return "> 1e6" if value > 0 else "< -1e6"
    return f"{value:.3f}"


def _beyond_text(value: Any) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "–"
    return "100%" if value >= 1 else f"{100 * value:.1f}%"


def exposure_lines(result: AuditResults, indent: str = "  ") -> list[str]:
    """The overall exposure figure and the comparison with the reference, as the summary and the page say them."""
    found = result.exposure
    lines = []
    if isinstance(found, dict) and found.get("n_targets"):
        lines += [f"{indent}exposure: {found['statement']}.", f"{indent}  {found['uncertainty']}."]
    elif isinstance(found, dict) and found.get("not_measured"):
        lines.append(f"{indent}exposure of models trained like yours: not measured ({found['not_measured']})")
    versus = (result.summary or {}).get("versus_reference") or {}
    for level in versus.get("levels", [])[:1]:
        share = "every one" if level["beyond"] >= 1 else f"{100 * level['beyond']:g}%"
        lines.append(f"{indent}versus the reference: {level['n_candidates']} of {versus['n_candidates']} candidates "
                     f"score beyond {share} of the {versus['n_reference']} reference documents under your model "
                     f"(about {level['expected_if_no_member']:.3g} would if no candidate were a member and the "
                     "reference documents are not in your model; an observation, not a count of members)")
    return lines


def _printable(text: str, width: int) -> str:
    """One line of corpus text safe for a terminal: control characters escaped, whitespace folded."""
    flat = " ".join(text.split())
    safe = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in flat)
    return safe if len(safe) <= width else safe[: width - 1] + "…"


def ranked_table(result: AuditResults, run_dir: Path) -> str:
    """The short summary printed at the end: the top of the ranking and where the files are."""
    inputs, s = result.inputs or {}, result.summary or {}
    learner, shadows, ranking = result.learner or AuditLearner(), result.shadows or {}, result.ranking or AuditRanking()
    cands = inputs["candidates"]
    dropped = f" ({cands['n_dropped_empty']} without a vocabulary word, not scored)" if cands["n_dropped_empty"] else ""
    lines = [
        f"{inputs['phi']['path']}: k={inputs['phi']['k']}, {inputs['phi']['n_words']} words",
        (f"  {s['n_candidates']} candidates scored{dropped}; {inputs['reference']['n_used']} reference documents; "
         f"{learner.name} k={learner.k}, {shadows['n_shadows']} shadow models "
         f"on {shadows['training_docs']} documents each"),
        "  " + settings_line(learner.settings_from or "", learner.params or {}),
        (f"  ranked by {ranking.rank_by}: {RANKINGS[ranking.rank_by]}, strongest "
         "membership evidence first"),
        *([f"  (recommended for {shadows['n_shadows']} shadow models: {ranking.rule}; "
           "choose another with --rank-by)"] if ranking.recommended else []),
        "",
        *[line for found in [exposure_lines(result)] if found for line in (*found, "")],
    ]
    top = result.top
    show_text = any("text" in row for row in top)
    show_id = any(str(r["id"]) != str(r["candidate"]) for r in top)
    id_width = min(max([len(str(r["id"])) for r in top] + [2]), 30)
    id_head = f"{'id':<{id_width}}  " if show_id else ""
    column = ranking.by or ""
    log_column = column[: -len("_p")] + "_log10_p" if column.endswith("_p") else None
    shown = f"log10 {column}" if log_column else column
    width = max(17, len(shown))
    with_beyond = any(isinstance(r.get("beyond_reference"), (int, float)) and not math.isnan(r["beyond_reference"])
                      for r in top)
    lines.append(f"  {'rank':>5}  {'candidate':>9}  {id_head}{'tokens':>6}  {'zeta':>10}  {shown:>{width}}"
                 + ("  > reference" if with_beyond else "") + ("  text" if show_text else ""))
    for r in top:
        id_cell = f"{_printable(str(r['id']), id_width):<{id_width}}  " if show_id else ""
        line = (f"  {r['rank']:>5}  {r['candidate']:>9}  {id_cell}{r['n_tokens']:>6}  {r['zeta']:>10.3f}  "
                f"{_score_text(column, r[column], r.get(log_column) if log_column else None):>{width}}")
        if with_beyond:
            line += f"  {_beyond_text(r.get('beyond_reference')):>11}"
        lines.append(line + (f"  {_printable(r['text'], 60)}" if show_text else ""))
    unreliable = s.get("unreliable", {})
    timings = result.timings_s or {}
    lines += [
        "",
        (f"  the shown scores ({shown}) are the ranking's own"
         + ("; > reference: the share of the reference documents whose score this candidate's exceeds"
            if with_beyond else "") + "; the ranking is evidence, not a test: it claims no number of members"),
        *[f"  unreliable with {shadows['n_shadows']} shadows: {name} ({why})"
          for name, why in unreliable.items() if name in PER_DOCUMENT_COLUMNS and "shadow(s) a side" in why],
        *(["  this ranking rests on an unreliable statistic: --rank-by recommended ranks by one that holds up"]
          if column in PER_DOCUMENT_COLUMNS and "shadow(s) a side" in unreliable.get(column, "") else []),
        (f"  wall time {timings['total']:.1f} s (fits {timings['fit_wall']:.1f} s, "
         f"statistics {timings['statistics']:.1f} s)"),
        "",
        f"  scores  {run_dir / 'scores.csv'}",
        f"  audit   {run_dir / 'audit.json'}",
        f"  page    topicaudit report {run_dir}",
    ]
    return "\n".join(lines)

