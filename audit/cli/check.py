"""``topicaudit check``: test a privacy claim against an audit (exit 0 consistent, 1 violated)."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import os
import select
import sys
import time
from pathlib import Path

from topicaudit.cli import supervisor
from topicaudit.cli.main import say
from topicaudit.engine.check import (check_report_paths, check_run, one_check_at_a_time, record_check_files,
                                     refuse_replacing_listed, write_reports)
from topicaudit.engine.configuration.config import run_config
from topicaudit.engine.configuration.loading import load_config
from topicaudit.engine.execution.phases import phase
from topicaudit.engine.configuration.preflight import check_claim_inputs
from topicaudit.engine.run import execute_run
from topicaudit.engine.storage.run_cache import WAIT_FOR_WRITER_SECONDS, checked_root, use_cache
from topicaudit.engine.sizing import AUTO, DEFAULT_BUDGET, START, check_power, parse_budget, size_canaries
from topicaudit.engine.configuration.validation import check_output_file
from topicaudit.errors import UserError
from topicaudit.process_state import only_the_command
from topicaudit.inputs.integrity_key import key_file
from topicaudit.targets.registry import plugin_files


def register(commands) -> None:
    check = commands.add_parser(
        "check", help="test a privacy claim against an audit (exit 0 consistent, 1 violated, 2 error)",
        description="Compare the empirical ε lower bound of an audit with a claimed ε. TARGET is a finished run "
                    "directory, or a configuration file whose audit is run (or resumed) first.",
    )
    check.add_argument("target", help="run directory or TOML configuration")
    check.add_argument("--epsilon", type=float, help="claimed ε (default: the target's own guarantee)")
    check.add_argument("--delta", type=float, help="claimed δ (default: the target's own, else [attack] delta)")
    check.add_argument("--alpha", type=float, help="1 − confidence of the bounds (default: the run's [attack] alpha)")
    check.add_argument("--canaries", type=_count, metavar="M|auto",
                       help="audit M canaries ([attack.canaries] count) when TARGET is a configuration; auto: "
                            "the fewest whose simulated power against a mechanism 2× less private reaches --power "
                            "within --budget (docs/check.md)")
    check.add_argument("--power", type=float, metavar="P",
                       help="with --canaries auto: the power to reach against a mechanism 2× less private "
                            "(default 0.95)")
    check.add_argument("--budget", metavar="TIME",
                       help="with --canaries auto: the time the audit may take (seconds, or 5m, 1h; default 10m)")
    check.add_argument("--attack", action="append", metavar="NAME",
                       help="attack whose bounds to use on the natural documents, repeatable; α is split over every "
                            "test (default lira_online and lira_offline; names: docs/attacks.md)")
    check.add_argument("--output", help="run directory when TARGET is a configuration (default: the run cache)")
    check.add_argument("--cache", metavar="DIR",
                       help="run cache when TARGET is a configuration: the run is kept in DIR under a key of "
                            "everything that can change the verdict (configuration, input contents, learner code) "
                            "and reused while none changes; 'off': runs/… (default $TOPICAUDIT_CACHE_DIR/runs, "
                            "~/.cache/topicaudit/runs; docs/check.md)")
    check.add_argument("--json", help="where to write the verdict as JSON (default RUN_DIR/check.json; -: standard "
                                      "output, the verdict line then goes to standard error)")
    check.add_argument("--junit", help="where to write JUnit XML (default RUN_DIR/check.junit.xml; -: standard output, "
                                       "as --json -)")
    check.add_argument("--quiet", action="store_true", help="no progress while auditing")


def _count(text: str) -> int | str:
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a number of canaries or auto (got {text!r})") from None


FLAGS = {"epsilon": "--epsilon", "delta": "--delta", "alpha": "--alpha", "attacks": "--attack",
         "canaries": "--canaries"}


STDOUT = "-"  # --json - / --junit -: the document on standard output, as most tools read "-"


def _inputs(target: Path, config) -> list[tuple[str, object]]:
    """What this check reads, besides the run's own files (``check_report_paths``): the configuration, the
    integrity key file and, for a configuration (``config``), the corpus and the plug-in's code. A document written
    over one of them replaced it (`check my.toml --json my.toml`, `--json ~/.config/topicaudit/integrity.key`,
    `--json docs.json` the corpus); one written inside a folder of them became one of its documents."""
    found: list[tuple[str, object]] = [("the configuration file", target)] if target.is_file() else []
    try:
        found.append(("the integrity key file", key_file()))
    except RuntimeError:  # no home directory: no key file
        pass
    if config is not None:
        found += [(f"the corpus ([corpus] {key})", value) for key, value in (
            ("path", config.corpus.path), *config.corpus.options.items()) if isinstance(value, str)]
        # its code: imported, digested
        found += [("a file of the plug-in code", path)
                  for path in plugin_files(config.target.learner, config.target.vocabulary)]
    return found


@contextlib.contextmanager
def _document_alone_on_stdout(active: bool):
    """With ``--json -`` or ``--junit -``, the command's standard output (descriptor 1) is standard error's from the
    start: what a plug-in prints at import, in its constructor, in a fit or from a thread it leaves running goes
    there (XIX-zy Y5, XIX-zz Z1, Z2), and the document alone goes to the descriptor saved here, so it parses. Yields
    that descriptor; None (inactive, or standard output is no descriptor or is closed): sys.stdout as it is."""
    saved = None
    if active:
        try:
            if sys.stdout is not None and sys.stdout.fileno() == 1:
                sys.stdout.flush()
                saved = os.dup(1)
                os.dup2(2, 1)
        except (OSError, ValueError, AttributeError):
            if saved is not None:
                os.close(saved)
            saved = None
    try:
        yield saved
    finally:
        if saved is not None:
            try:
                sys.stdout.flush()
            except (OSError, ValueError, AttributeError):
                pass
            if not supervisor.supervised():  # a caller in this process prints on; else a thread still writing
                os.dup2(saved, 1)            # after the document goes to stderr until the process exits
            os.close(saved)


def _refuse_over_inputs(files: dict, inputs: list[tuple[str, object]]) -> None:
    """One rule for every document this check writes: never over a file it reads, never inside a folder it reads."""
    for flag, path in files.items():
        if path is None:
            continue
        for what, read in inputs:
            if os.path.isdir(read):
                root = os.path.realpath(read)
                if os.path.commonpath([os.path.realpath(path), root]) == root:
                    raise UserError(f"{flag} {path} is inside {what} ({read}), a folder this check reads, where the "
                                    "next check would read it too; give the document a path outside it")
            elif os.path.isfile(read) and os.path.exists(path) and os.path.samefile(path, read):
                raise UserError(f"{flag} {path} is {what} this check reads ({read}); give the document its own path")


def execute(args) -> int:
    with _document_alone_on_stdout(STDOUT in (args.json, args.junit)) as document_fd:
        return _checked(args, document_fd)


def _checked(args, document_fd: int | None) -> int:
    started, sizing = time.perf_counter(), None
    piped = [flag for flag, path in (("--json", args.json), ("--junit", args.junit)) if path == STDOUT]
    if len(piped) == 2:
        raise UserError("--json - and --junit - both ask for standard output, which can take one document; give "
                        "a file path to one of them")
    for flag, path in (("--json", args.json), ("--junit", args.junit)):
        if path is not None and path != STDOUT:
            check_output_file(path, flag)  # before an audit runs, not after
    files = {"--json": None if args.json == STDOUT else args.json,
             "--junit": None if args.junit == STDOUT else args.junit}
    if None not in files.values() and Path(args.json).resolve() == Path(args.junit).resolve():
        # both were written to it, one over the other: the JSON document asked for was replaced by the XML
        raise UserError(f"--json {args.json} and --junit {args.junit} name the same file, which can hold one "
                        "document; give each its own path")
    target = Path(args.target)
    if target.is_dir():
        if args.canaries is not None or args.power is not None or args.budget is not None:
            raise UserError(f"--canaries, --power and --budget apply when TARGET is a configuration; the finished "
                            f"run {target} keeps the canaries it was audited with")
        if args.cache is not None:
            raise UserError(f"--cache applies when TARGET is a configuration; {target} is a run directory already")
        run_dir = target
        _refuse_over_inputs(files, _inputs(target, None))
        check_report_paths(run_dir, files)
    else:
        config = run_config(load_config(target))
        _refuse_over_inputs(files, _inputs(target, config))
        if args.output and args.cache is not None:
            raise UserError("--output names the run directory and --cache the cache it would be kept in; give one")
        if args.output:
            config.output = args.output
        auto = args.canaries == AUTO
        if not auto and (args.power is not None or args.budget is not None):
            raise UserError("--power and --budget size the canary audit: give them with --canaries auto")
        if args.canaries is not None:
            config.attack.canaries.count = START if auto else args.canaries
        check_claim_inputs(config, args.epsilon, args.delta, args.alpha, args.attack, FLAGS)  # before any fit
        if auto:
            budget = parse_budget(args.budget if args.budget is not None else DEFAULT_BUDGET)
            with phase("sizing"):
                sizing = size_canaries(config, args.epsilon, args.delta, args.alpha, check_power(args.power),
                                       budget, cache_root=None if args.output else checked_root(args.cache))
            say(f"topicaudit: {sizing.message()}")
            config.attack.canaries.count = sizing.count
        cached = use_cache(config, args.cache)  # unless --output: the run's directory in the cache, by its key
        check_report_paths(config.run_dir, files)
        # a cached run another check is writing (parallel CI jobs) is waited for, then reused
        execute_run(config, quiet=args.quiet, wait_for_writer=WAIT_FOR_WRITER_SECONDS if cached else 0.0)
        if cached is not None and config.run_dir != cached:  # a plug-in's entry as it fits now (engine.replay)
            check_report_paths(config.run_dir, files)
        run_dir = config.run_dir
    with phase("verdict"):
        result = check_run(run_dir, args.epsilon, args.delta, args.alpha, attacks=args.attack)
    if sizing is not None:
        sizing.took = round(time.perf_counter() - started, 1)
        result = dataclasses.replace(result, sizing=sizing.to_json())
        say(f"topicaudit: canaries: the audit was estimated at {sizing.seconds:.0f} s and took {sizing.took:.0f} s")
    json_path = None if args.json == STDOUT else Path(args.json) if args.json else run_dir / "check.json"
    junit_path = None if args.junit == STDOUT else Path(args.junit) if args.junit else run_dir / "check.junit.xml"
    with one_check_at_a_time(run_dir):  # another check's manifest update is not lost
        refuse_replacing_listed(run_dir, (json_path, junit_path))  # a keyed run's check.json, without the key
        written = write_reports(result, json_path, junit_path)
        record_check_files(run_dir, written)  # report reads check.json's claim: only as the manifest lists it
    only_the_command()  # a child forked below Python in the learner's code prints no verdict
    document = (json.dumps(result.to_json(), indent=2) + "\n" if args.json == STDOUT
                else result.to_junit() if args.junit == STDOUT else None)
    try:
        if document is not None:  # stdout takes the document alone, so it parses; the line goes to stderr
            # characters its encoding lacks as references the format reads back (ASCII stdout: ε is &#949; in XML)
            try:
                _print_document(document, "backslashreplace" if args.json == STDOUT else "xmlcharrefreplace",
                                document_fd)
            finally:  # the line on stderr whether or not stdout took the document
                say(result.message())
        elif sys.stdout is None:  # set so by code the command ran (a learner): print() wrote nothing, unsaid
            raise ValueError("sys.stdout is None")
        else:  # through the descriptor too: an unbuffered print (PYTHONUNBUFFERED) lost the line in a full pipe
            _print_document(result.message() + "\n", "backslashreplace")
    except (OSError, ValueError) as error:  # stdout broken (EPIPE), full (/dev/full) or closed
        _unprinted(error, written)
    # The verdict was computed and recorded in check.json: its code stands whether or not it could be printed.
    return supervisor.refuted() if result.violated else 0


STALL_SECONDS = 30.0  # a non-blocking standard output that takes nothing for this long: the document is not printed


def _print_document(document: str, errors: str = "strict", fd: int | None = None) -> None:
    """Write ``document`` whole to standard output, or raise OSError. On a non-blocking descriptor Python's
    buffered writer wrote 4,096 of 4,498 bytes into a full pipe and raised nothing (the document cut, unsaid):
    the bytes go through the descriptor itself, waiting (``select``) while the reader catches up. errors: how
    characters stdout's encoding cannot take are written (``--junit -`` to an ASCII stdout was "could not be
    printed", and its verdict line went unsaid with it). fd: the descriptor standard output was when the command
    started (``_document_alone_on_stdout``); default: sys.stdout's."""
    stream = sys.stdout
    if fd is None:
        if stream is None:  # set so by code the command ran
            raise ValueError("sys.stdout is None")
        try:
            fd = stream.fileno()
        except (OSError, ValueError, AttributeError):  # not a descriptor (a caller's StringIO): its own writer
            stream.write(document)
            stream.flush()
            return
        stream.flush()
    encoded = document.encode(getattr(stream, "encoding", None) or "utf-8", errors)
    data = memoryview(encoded)
    while data:
        try:
            done = os.write(fd, data)
        except BlockingIOError:
            if not select.select([], [fd], [], STALL_SECONDS)[1]:
                raise OSError(errno.EAGAIN, f"it took nothing for {STALL_SECONDS:g} s; "
                              f"{len(data):,} of {len(encoded):,} bytes were not written") from None
            continue
        if done <= 0:
            raise OSError(errno.EIO, "a write took no bytes")
        data = data[done:]


def _unprinted(error: Exception, written: dict[Path, str]) -> None:
    """Stdout could not take the verdict line: say where it is recorded (on stderr, if that still works)."""
    sys.stdout = open(os.devnull, "w")  # nothing more is written to the broken stream, not even at exit
    reason = getattr(error, "strerror", None) or type(error).__name__
    say(f"topicaudit: note: the verdict could not be printed on standard output ({reason}); it is recorded "
        f"in {' and '.join(map(str, written))}")


