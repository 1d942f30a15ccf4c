"""``topicaudit report``: HTML page, Markdown summary and figures from finished run or sweep directories."""
from __future__ import annotations

from topicaudit.process_state import only_the_command
from topicaudit.reports.build import build_report


def register(commands) -> None:
    report = commands.add_parser(
        "report", help="write report.html, report.md and figures from finished run, sweep or audit directories",
        description="Make a self-contained report.html (figures embedded; opens from disk with no network), "
                    "report.md and figures/*.png|svg from finished run directories and/or sweep directories, or "
                    "from one output directory of `topicaudit audit` (the exposure of your model first). "
                    "Reads what the audits wrote; recomputes nothing. Runs drawn together must audit the "
                    "same corpus with the same vocabulary step.",
    )
    report.add_argument("inputs", nargs="+", metavar="RUN_DIR",
                        help="run directory (topicaudit run) or sweep directory (topicaudit sweep); or one "
                             "output directory of topicaudit audit (your own model), reported on its own")
    report.add_argument("-o", "--output", help="report directory (default: FIRST_INPUT/report)")
    report.add_argument("--attack", default="lira_online",
                        help="attack of the ledger, the overlay and the per-document risk (default lira_online)")
    report.add_argument("--top", type=int, default=20,
                        help="most exposed documents listed per run, or candidates of an audit (default 20)")
    report.add_argument("--show-text", action="store_true",
                        help="include the text of the most exposed documents (the report then reveals likely "
                             "members); needs the corpus (or the candidates), found from the directory the audit ran in")
    report.add_argument("--compare-vocabularies", action="store_true",
                        help="allow drawing runs whose vocabulary steps differ on one figure")
    report.add_argument("--quiet", action="store_true", help="no progress; print only the report directory")


def execute(args) -> int:

    output = build_report(args.inputs, args.output, attack=args.attack, top=args.top, show_text=args.show_text,
                          compare_vocabularies=args.compare_vocabularies, quiet=args.quiet)
    only_the_command()
    if args.quiet:
        print(output)
    else:
        print(f"  report   {output / 'report.html'}\n  summary  {output / 'report.md'}\n"
              f"  figures  {output / 'figures'}")
    return 0
