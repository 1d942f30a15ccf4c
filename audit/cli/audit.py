"""``topicaudit audit``: rank candidate documents by membership evidence against a user's trained Φ."""
from __future__ import annotations

import tomllib

from topicaudit.engine.config import Config
from topicaudit.engine.user_audit import AUDIT_SETTINGS, UserAuditSpec, audit_config, ranked_table, run_user_audit
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
                            "LdaModel saved with save() (needs --trust-pickle), or a joblib-saved scikit-learn "
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
                                          "library, gensim-lda or tomotopy-lda, else lda)")
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
    audit.add_argument("--rank-by",
                       choices=["recommended", "offline", "offline-global", "online", "online-global",
                                "offline-shrunk", "online-shrunk", "rmia-online", "rmia-offline", "quantile"],
                       help="ranking score: offline p-value or online log-likelihood ratio with per-document, "
                            "pooled (-global) or shrunk variance, RMIA's likelihood ratio, or quantile regression; "
                            "default recommended: "
                            "the attack docs/attacks.md recommends for --shadows (said in the output)")
    audit.add_argument("--show-text", action="store_true", default=None, help="add each candidate's text to scores.csv and the table")
    audit.add_argument("--top", type=int, help="rows of the ranking to print and keep in audit.json (default 10)")
    audit.add_argument("--name", help="audit name (default: PHI's file name)")
    audit.add_argument("--output", help="output directory (default runs/audit-NAME)")
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
        try:
            parsed[key] = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            parsed[key] = text.strip()
    return parsed


def config_from_args(args) -> Config:
    """One configuration from the command line: a TOML file given as PHI, with the flags given overriding it."""
    settings = {name: getattr(args, name, None) for name in AUDIT_SETTINGS}
    for flag, name in (("candidates_option", "candidates_options"), ("reference_option", "reference_options"),
                       ("param", "params")):
        settings[name] = parse_assignments(getattr(args, flag), "--" + flag.replace("_", "-"))
    return audit_config(args.phi, format=args.format, **settings)


def execute(args) -> int:

    spec = UserAuditSpec.from_config(config_from_args(args))
    result = run_user_audit(spec, quiet=args.quiet)
    if args.quiet:
        print(spec.run_dir)
    else:
        print(ranked_table(result, spec.run_dir))
    return 0
