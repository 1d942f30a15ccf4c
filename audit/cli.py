"""The ``topicaudit`` command line.

Exit codes: 0 success, 2 bad input or configuration (one message, no
traceback), 130 interrupted (rerun the same command to resume).
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from audit.errors import UserError


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="topicaudit",
        description="Measure how much a released topic model reveals about its training documents.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run", help="run (or resume) a LiRA membership audit",
        description="Run a LiRA membership audit. With no CONFIG and no --corpus, audits an embedded "
                    "synthetic LDA corpus (about a minute).",
    )
    run.add_argument("config", nargs="?", help="TOML configuration file (see README)")
    run.add_argument("--corpus", help="corpus path (JSON {\"text\": [...]}, UCI docword file, 20news .tar.gz, "
                                      "or a folder of text files)")
    run.add_argument("--format", choices=["json", "uci", "20news", "folder"], help="corpus format (default: from path)")
    pre = run.add_mutually_exclusive_group()
    pre.add_argument("--preprocess", dest="preprocess", action="store_true", default=None,
                     help="pre-process raw text (default for text corpora)")
    pre.add_argument("--no-preprocess", dest="preprocess", action="store_false",
                     help="the text is already pre-processed: only tokenise")
    run.add_argument("--learner", help="target learner (lda, sklearn-lda, cgs)")
    run.add_argument("--k", type=int, help="number of topics")
    run.add_argument("--shadows", type=int, help="number of shadow models (even)")
    run.add_argument("--seed", type=int, help="seed of every random choice")
    run.add_argument("--name", help="run name (default: from the config or corpus)")
    run.add_argument("--output", help="run directory (default: runs/NAME)")
    run.add_argument("--ray-address", help="join an existing Ray cluster ('auto' or host:port)")
    run.add_argument("--num-cpus", type=int, help="size of the local Ray instance (default: all cores)")
    run.add_argument("--quiet", action="store_true", help="no progress or summary; just the run directory")

    check = commands.add_parser(
        "check", help="test a privacy claim against an audit (exit 0 consistent, 1 violated, 2 error)",
        description="Compare the empirical ε lower bound of an audit with a claimed ε. TARGET is a finished run "
                    "directory, or a configuration file whose audit is run (or resumed) first.",
    )
    check.add_argument("target", help="run directory or TOML configuration")
    check.add_argument("--epsilon", type=float, help="claimed ε (default: the target's own guarantee)")
    check.add_argument("--delta", type=float, help="claimed δ (default: the target's own, else [attack] delta)")
    check.add_argument("--alpha", type=float, default=0.05, help="1 − confidence of the bound (default 0.05)")
    check.add_argument("--output", help="run directory when TARGET is a configuration")
    check.add_argument("--json", help="where to write the verdict as JSON (default RUN_DIR/check.json)")
    check.add_argument("--junit", help="where to write JUnit XML (default RUN_DIR/check.junit.xml)")
    check.add_argument("--quiet", action="store_true", help="no progress while auditing")
    return parser


def _config_from_args(args):
    from audit.config import Config, load_config

    config = load_config(args.config) if args.config else Config()
    if args.corpus is not None:
        config.corpus.path = args.corpus
        if args.name is None and not args.config:
            config.name = Path(args.corpus).name.split(".")[0] or "audit"
    for flag, section, key in (
        ("format", config.corpus, "format"), ("preprocess", config.corpus, "preprocess"),
        ("learner", config.target, "learner"), ("k", config.target, "k"),
        ("shadows", config.attack, "shadows"), ("seed", config, "seed"), ("name", config, "name"),
        ("output", config, "output"), ("ray_address", config.ray, "address"),
        ("num_cpus", config.ray, "num_cpus"),
    ):
        value = getattr(args, flag)
        if value is not None:
            setattr(section, key, value)
    return config


def _run(args) -> int:
    from audit.run import run_audit, summary_table
    from reports.roc import write_roc_figure

    config = _config_from_args(args)
    results = run_audit(config, quiet=args.quiet)
    figure = write_roc_figure(config.run_dir)
    if args.quiet:
        print(config.run_dir)
    else:
        print(summary_table(results))
        print(f"\n  results  {config.run_dir / 'results.json'}\n  ROC      {figure}")
    return 0


def _show_note(message, category, filename, lineno, file=None, line=None):
    print(f"topicaudit: note: {message}", file=sys.stderr)


def _check(args) -> int:
    from audit.check import check_run, write_reports

    target = Path(args.target)
    if target.is_dir():
        run_dir = target
    else:
        from audit.config import load_config
        from audit.run import run_audit

        config = load_config(target)
        if args.output:
            config.output = args.output
        run_audit(config, quiet=args.quiet)
        run_dir = config.run_dir
    result = check_run(run_dir, args.epsilon, args.delta, args.alpha)
    json_path = Path(args.json) if args.json else run_dir / "check.json"
    junit_path = Path(args.junit) if args.junit else run_dir / "check.junit.xml"
    write_reports(result, json_path, junit_path)
    print(result.message())
    return 1 if result.violated else 0


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    warnings.showwarning = _show_note  # loaders warn about tolerated oddities in input files
    try:
        return {"run": _run, "check": _check}[args.command](args)
    except UserError as error:
        print(f"topicaudit: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ntopicaudit: interrupted; finished models are kept — rerun the same command to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
