"""``topicaudit sweep``: one audit per value of a parameter, with replicates, in one directory."""
from __future__ import annotations

from pathlib import Path

from topicaudit.process_state import only_the_command
from topicaudit.engine.configuration.config import run_config
from topicaudit.engine.configuration.loading import load_config
from topicaudit.engine.sweep import default_output, load_sweep, parse_values, run_sweep, sweep_table
from topicaudit.engine.configuration.validation import check_output_directory
from topicaudit.folder_anchors import absolute
from topicaudit.errors import UserError


def register(commands) -> None:
    sweep = commands.add_parser(
        "sweep", help="run one audit per value of a configuration parameter (with replicates)",
        description="Run (or resume) one audit per value of one configuration key, each replicated with seeds "
                    "SEED, SEED+1, …, into OUTPUT/<key>=<value>/rep-<r>/, indexed by OUTPUT/sweep.json. "
                    "`topicaudit report OUTPUT` draws the sweep.",
    )
    sweep.add_argument("config", help="TOML configuration of the audit being varied")
    sweep.add_argument("--param", required=True,
                       help="dotted configuration key to vary, e.g. target.k, target.params.epsilon, "
                            "target.vocabulary_params.epsilon, target.learner")
    sweep.add_argument("--values", required=True,
                       help="comma-separated values, read as TOML (5 is an integer, 0.5 a number, inf infinity)")
    sweep.add_argument("--replicates", type=int, default=1, help="audits per value, seeds SEED+0, SEED+1, … (default 1)")
    sweep.add_argument("--output", help="sweep directory (default runs/NAME-sweep-KEY-HASH, named after the sweep)")
    sweep.add_argument("--ray-address", help="join an existing Ray cluster ('auto' or host:port)")
    sweep.add_argument("--num-cpus", type=int, help="size of the local Ray instance (default: all cores)")
    sweep.add_argument("--quiet", action="store_true", help="no progress or summary; just the sweep directory")


def execute(args) -> int:
    config = run_config(load_config(args.config))
    if args.ray_address is not None:
        config.ray.address = args.ray_address
    if args.num_cpus is not None:
        config.ray.num_cpus = args.num_cpus
    if args.output is not None and not args.output.strip():
        raise UserError("--output is empty; give a sweep directory, or leave --output out for "
                        "runs/NAME-sweep-KEY-HASH")
    values = parse_values(args.values)
    output = Path(args.output) if args.output else default_output(config, args.param, values)
    output = Path(absolute(output)) if ".." in output.parts else output  # as run_sweep writes it, read back
    check_output_directory(output, "--output")
    run_sweep(config, args.param, values, args.replicates, output, quiet=args.quiet)
    only_the_command()
    if args.quiet:
        print(output)
    else:
        print(sweep_table(load_sweep(output)))
        print(f"\n  sweep  {output / 'sweep.json'}")
    return 0
