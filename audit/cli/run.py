"""``topicaudit run``: train a target and its shadow models and attack it (or resume that run).

The flags build the same :class:`topicaudit.engine.configuration.config.Config` a TOML file
does (flags override the file); :func:`topicaudit.engine.run.execute_run` runs it.
"""
from __future__ import annotations

import sys

from topicaudit.attacks.registry import ATTACKS
from topicaudit.engine.storage import manifest
from topicaudit.engine.check import own_claim_check
from topicaudit.engine.configuration.config import Config, corpus_stem, run_config
from topicaudit.engine.configuration.loading import load_config
from topicaudit.engine.execution.phases import phase
from topicaudit.engine.presentation.summary import summary_table
from topicaudit.engine.run import execute_run
from topicaudit.errors import UserError
from topicaudit.process_state import only_the_command
from topicaudit.targets import LEARNERS


def register(commands) -> None:
    run = commands.add_parser(
        "run", help="run (or resume) a LiRA membership audit",
        description="Run a LiRA membership audit. With no CONFIG and no --corpus, audits an embedded "
                    "synthetic LDA corpus (seconds: about 10 s on two cores).",
    )
    run.add_argument("config", nargs="?",
                     help="TOML configuration file: [corpus], [synthetic], [target], [attack], [ray] (every key: "
                          "docs/configuration.md); flags override it")
    run.add_argument("--corpus", help="corpus path (JSON {\"text\": [...]}, UCI docword file, 20news .tar.gz, "
                                      "or a folder of text files)")
    run.add_argument("--format", choices=["json", "uci", "20news", "folder", "mm"], help="corpus format (default: from path)")
    pre = run.add_mutually_exclusive_group()
    pre.add_argument("--preprocess", dest="preprocess", action="store_true", default=None,
                     help="pre-process raw text (default for text corpora)")
    pre.add_argument("--no-preprocess", dest="preprocess", action="store_false",
                     help="the text is already pre-processed: only tokenise")
    run.add_argument("--learner", help="target learner: " + ", ".join(LEARNERS) + ", a name an installed package "
                                        "registers, or your own class as package.module:Class "
                                        "(docs/adding-a-learner.md)")
    run.add_argument("--k", type=int, help="number of topics")
    run.add_argument("--shadows", type=int, help="number of shadow models (even)")
    run.add_argument("--seed", type=int, help="seed of every random choice")
    add_canary_flag(run)
    run.add_argument("--attacks", help="comma-separated attacks to report (default all): " + ", ".join(ATTACKS))
    run.add_argument("--name", help="run name (default: from the config or corpus)")
    run.add_argument("--output", help="run directory (default: runs/NAME-LEARNER-kK-sSEED-HASH, named after the "
                                      "audit; the same command resumes it)")
    run.add_argument("--ray-address", help="join an existing Ray cluster ('auto' or host:port)")
    run.add_argument("--num-cpus", type=int, help="size of the local Ray instance (default: all cores)")
    run.add_argument("--quiet", action="store_true", help="no progress or summary; just the run directory")


def add_canary_flag(parser) -> None:
    parser.add_argument("--canaries", type=int, metavar="M",
                        help="also audit M canaries, each in one extra training with probability ½ "
                             "([attack.canaries] count; --shadows 0 for a canary-only audit)")


def config_from_args(args):
    """The configuration a ``run``-style command line describes: file, then flags."""

    config = run_config(load_config(args.config)) if args.config else Config()
    if args.corpus is not None:
        config.corpus.path = args.corpus
        if args.name is None and not args.config:
            config.name = corpus_stem(args.corpus)
    for flag, section, key in (
        ("format", config.corpus, "format"), ("preprocess", config.corpus, "preprocess"),
        ("learner", config.target, "learner"), ("k", config.target, "k"),
        ("shadows", config.attack, "shadows"), ("seed", config, "seed"), ("name", config, "name"),
        ("output", config, "output"), ("ray_address", config.ray, "address"),
        ("num_cpus", config.ray, "num_cpus"), ("canaries", config.attack.canaries, "count"),
    ):
        value = getattr(args, flag)
        if value is not None:
            setattr(section, key, value)
    if getattr(args, "attacks", None):
        config.attack.attacks = [name.strip() for name in args.attacks.split(",") if name.strip()]
    return config


def execute(args) -> int:
    config = config_from_args(args)
    # Ray, if this run started it, is still shutting down while the summary is printed (main waits for it).
    results = execute_run(config, quiet=args.quiet, wait_for_ray=False)
    figure = config.run_dir / "roc.png" if results.attacks else None  # the run draws it
    only_the_command()
    with phase("summary"):
        if args.quiet:
            print(config.run_dir)
        else:
            verdict, untestable = results.own_verdict(config.run_dir), None
            if verdict is None:
                try:  # the run stores a verdict whenever its tests can bound anything; this says why not
                    verdict = own_claim_check(config.run_dir)
                except UserError as error:  # the audit is done; only its bound cannot be stated
                    untestable = str(error)
            print(summary_table(results, verdict))
            if untestable:
                print(f"\n  no ε bound: {untestable}")
            print(f"\n  results  {config.run_dir / 'results.json'}" + (f"\n  ROC      {figure}" if figure else ""))
            print(f"  manifest {config.run_dir / manifest.NAME}: {_protection(config.run_dir)}")
        sys.stdout.flush()
    return 0


def _protection(run_dir) -> str:
    """How the run's manifest protects it: HMAC-SHA256 with the integrity key, or its hashes alone."""
    try:
        found = manifest.read(run_dir)
    except UserError as error:  # not expected right after the run wrote it; said rather than hidden
        return str(error)
    if found is not None and found.authenticated:
        return f"SHA-256 of every file, authenticated (HMAC-SHA256, integrity key {found.key_id})"
    return ("SHA-256 of every file, not authenticated (no integrity key configured: it stops accidental damage, "
            "not a forger who rewrites the manifest; docs/run-directory.md#integrity)")
