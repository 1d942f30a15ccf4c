"""Privacy claims as tests: hold a finished run directory, or a configuration, to a claimed ε.

``check_run`` verifies the run directory, reads its evidence and asks
``topicaudit.engine.verdict.run_verdict`` for the verdict, the one computation
every front end shares (docs/check.md). ``assert_privacy`` runs or resumes a
configuration first, for a project's own tests.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from topicaudit.engine.configuration import arguments

from topicaudit.engine.storage import manifest
from topicaudit.engine.configuration.config import Config, run_config, with_learner
from topicaudit.engine.configuration.loading import check_fields, config_from_dict, load_config
from topicaudit.engine.storage.integrity import VERDICT_FILES, Protection, verify_run_directory
from topicaudit.engine.storage.lock import NAME as LOCK_NAME, uninterrupted
from topicaudit.engine.configuration.preflight import check_claim_inputs
from topicaudit.engine.storage.check_result import CheckResult
from topicaudit.engine.run import execute_run
from topicaudit.engine.storage.run_cache import checked_root
from topicaudit.engine.cached_audit import cached_audit
from topicaudit.engine.sizing import AUTO, DEFAULT_BUDGET, START, check_power, parse_budget, size_canaries
from topicaudit.engine.storage.bounded_read import is_model_file, read_arrays, read_results, refuse_among_models
from topicaudit.engine.storage.durable_write import atomic_write_all, atomic_write_text
from topicaudit.engine.power import TARGET_POWER
from topicaudit.engine.verdict import CanaryFiles, own_claim_verdict, run_verdict
from topicaudit.errors import UserError
from topicaudit.folder_anchors import in_command_scope
from topicaudit.inputs.files import present, read_once
from topicaudit.inputs.integrity_key import ENVIRONMENT_VARIABLE as KEY_VARIABLE, key_file


def canary_evidence(run_dir: Path) -> tuple[dict[str, np.ndarray], np.ndarray, str] | None:
    """Canary scores joined to their coins by canary id, and the canaries' kind; None without canaries."""
    found = _canary_files(run_dir)
    return None if found is None else found[:3]


def _canary_files(run_dir: Path) -> CanaryFiles | None:
    """``canary_evidence``, and each threshold canary's fixed one-word documents (canaries.npz ``anchors``, None
    for other kinds), from one read of canaries.npz."""
    coins_path, scores_path = run_dir / "canaries.npz", run_dir / "canary_scores.npz"
    if not present(coins_path):
        return None
    if not present(scores_path):
        raise UserError(f"{run_dir} has canaries but no canary_scores.npz: the run did not finish; "
                        "rerun the same command to complete it")
    canaries, scores = read_arrays(coins_path), read_arrays(scores_path)
    ids, score_ids = canaries["ids"], scores.pop("ids")
    if ids.shape != score_ids.shape or not np.array_equal(np.sort(ids), np.sort(score_ids)) \
            or np.unique(ids).size != ids.size:
        raise UserError(f"{run_dir}: the canary scores do not match the canaries' coins (their ids differ); "
                        "the run directory was altered: delete canary_scores.npz and rerun the audit")
    order = np.argsort(score_ids)[np.argsort(np.argsort(ids))]  # the score row of each canary id, in coin order
    return ({name: values[order] for name, values in scores.items()}, canaries["coins"], str(canaries["kind"]),
            canaries.get("anchors"))


def check_run(run_dir: str | Path, epsilon: float | None = None, delta: float | None = None,
              alpha: float | None = None, attacks: list[str] | None = None) -> CheckResult:
    """Check a finished run directory against a claim (default: the target's own guarantee, the run's α).

    attacks: whose bounds on the natural documents to use (α split over every
    test); default lira_online and lira_offline (docs/attacks.md).
    A mechanism audit whose simulated power against a 2× weaker mechanism is below 95% names the canary
    count that would reach it (``CheckResult.canaries_for_power``).
    """
    run_dir = Path(run_dir)
    epsilon, delta = _unsigned_zero(epsilon), _unsigned_zero(delta)
    with read_once():  # each file read once: the bytes verified are the bytes the verdict reads
        results, natural, found, protection = _evidence(run_dir)
        result = run_verdict(results, natural, found, run_dir, epsilon, delta, alpha, attacks,
                             suggest=TARGET_POWER)
    if attacks:  # recorded in check.json: the report's card tests the claim with the same tests
        result = dataclasses.replace(result, attacks=list(attacks))
    return _protected(result, protection)


def _unsigned_zero(value: float | None) -> float | None:
    """-0 given as a claim (``--delta -0``, ``-0.0``) is 0: the verdict line said "δ = -0", check.json -0.0."""
    return value + 0.0 if value is not None and value == 0 else value


def _protected(result: CheckResult, protection: Protection) -> CheckResult:
    """The verdict, saying what protected the directory it was read from."""
    return dataclasses.replace(result, unverified=protection.unverified, integrity=protection.mode,
                               integrity_key_id=protection.key_id)


def _evidence(run_dir: Path):
    """A finished run's records and scores, verified (or a UserError): results, natural-document scores, canary
    files, and what protected the directory (``integrity.Protection``)."""
    # manifest hashes (and MAC), types and shapes, truth and canary order (or exit 2)
    protection = verify_run_directory(run_dir)
    results_path, scores_path = run_dir / "results.json", run_dir / "scores.npz"
    found = _canary_files(run_dir) if present(results_path) else None
    if not present(results_path) or not (present(scores_path) or found):
        raise UserError(f"{run_dir} is not a finished topicaudit run (no results.json with scores.npz or "
                        "canary scores); run `topicaudit run` first or pass a configuration file")
    natural = read_arrays(scores_path) if present(scores_path) else None
    if natural is not None and "is_member" not in natural:
        raise UserError(f"{scores_path} lacks is_member; it was not written by this version of "
                        "topicaudit — rerun the audit")
    return read_results(results_path), natural, found, protection


def own_claim_check(run_dir: str | Path, suggest: float | None = None) -> tuple[CheckResult, bool]:
    """The run's bounds and ceiling exactly as ``check`` computes them; and whether its own claim was tested.

    The one code path behind the run summary, the report's verdict and
    ``check``: against the target's own claim when these tests can hold it to
    it, else at no claim (ε = 0 stands in; the bounds do not depend on it). suggest: as
    ``engine.verdict.own_claim_verdict``'s (the report asks for the canary count that reaches 95% power).
    """
    run_dir = Path(run_dir)
    with read_once():  # each file read once: the bytes verified are the bytes the verdict reads
        results, natural, found, protection = _evidence(run_dir)  # read and verified once
        result, tested = own_claim_verdict(results, natural, found, run_dir, suggest)
    return _protected(result, protection), tested


# The run directory's own files, which check reads (or the run holds) and never replaces.
RUN_FILES = (*VERDICT_FILES, manifest.NAME, LOCK_NAME, "roc.png", "sweep.json")
_RUN_FILES_FOLDED = {name.casefold() for name in RUN_FILES}


def check_report_paths(run_dir: Path, paths: dict[str, str | None]) -> None:
    """Refuse a --json/--junit path that is one of the run directory's own files (results.json, canaries.npz,
    a model, the manifest…): writing the verdict there would destroy the evidence it rests on."""
    root = Path(run_dir).resolve()
    for flag, path in paths.items():
        if path is None:
            continue
        target = Path(path).resolve()
        name = target.relative_to(root).as_posix() if target.is_relative_to(root) else None
        # Compared case-folded: on a case-insensitive file system (macOS, Windows) RUN/Results.json is results.json.
        folded = name.casefold() if name is not None else None
        # The run's own check files, each under its own flag only: `--junit RUN/check.json` recorded the XML as
        # check.json, which report could not read, and its card dropped the claim without a word.
        own = {"--json": manifest.CHECK_FILES[0], "--junit": manifest.CHECK_FILES[1]}.get(flag)
        if folded in {name.casefold() for name in manifest.CHECK_FILES} and folded != (own or "").casefold():
            raise UserError(f"cannot write {flag} {path}: it is {name} of the run directory {run_dir}, where check "
                            f"writes its {'JUnit XML' if folded.endswith('xml') else 'JSON'} document; leave the "
                            "flag out (both are written there), or give a path outside the run")
        if folded is not None and (folded in _RUN_FILES_FOLDED or folded.startswith("models/")):
            raise UserError(f"cannot write {flag} {path}: it is {target.relative_to(root).as_posix()} of the run "
                            f"directory {run_dir}, which check reads and never replaces; give a path outside it "
                            "(or leave the flag out: check.json and check.junit.xml are written there)")
        linked = manifest.linked_read_name(Path(run_dir), target, own)  # RUN/models a link to M: M/x (XIX-zs)
        if linked is not None:
            raise UserError(f"cannot write {flag} {path}: it is {linked} of the run directory {run_dir} by another "
                            "name (a symbolic link or a mount), which check reads and never replaces; give a path "
                            "outside it")
        if is_model_file(target):  # another run's models/, kept elsewhere and linked back (XIX-zs W18)
            raise UserError(f"cannot write {flag} {path}: it is a model file of a topicaudit run (its models/ may be "
                            "kept there and linked back), which a resume reads and never replaces; give another path")
        # Another run's, sweep's or audit's own files: `--json OTHER/manifest.json` replaced that run's manifest
        # (every later command refused it), `check RUN --json OTHER/results.json` destroyed OTHER's evidence,
        # `--json SWEEP/sweep.json` replaced the sweep's index.
        others = [d for d in manifest.topicaudit_directories(target) if d.resolve() != root]
        manifest.refuse_over_read_names(Path(path), others, flag)
        refuse_among_models(target.parent, flag)


CHECK_FILES = manifest.CHECK_FILES


def record_check_files(run_dir: Path, written: dict[Path, str]) -> bool:
    """Add check.json and check.junit.xml, just written into ``run_dir``, to its manifest (re-MAC'd with the
    integrity key, as every manifest update is); whether they are covered now. written: each file's path → the
    SHA-256 of the bytes written (``write_reports``), which the manifest lists.

    Not recorded (``report`` then ignores check.json's claim, saying so): a run without a manifest (the
    pre-manifest layout, read UNVERIFIED anyway), and a manifest whose MAC could not be checked (no key is
    configured): rewriting it would drop its MAC."""
    run_dir = Path(run_dir)
    root = run_dir.resolve()
    mine = {path.name: digest for path, digest in written.items()
            if path.name in CHECK_FILES and path.resolve().parent == root}
    if not mine:
        return False
    found = manifest.read(run_dir)
    if found is None or (found.carries_mac and not found.authenticated):
        return False
    manifest.record(run_dir, *mine, write_text=atomic_write_text, written=mine)
    return True


def refuse_replacing_listed(run_dir: Path, paths) -> None:
    """Refuse, before anything is written, a check without the integrity key that would write check.json or
    check.junit.xml over the one a keyed run's manifest lists (an earlier check made with the key): it cannot list
    its own in place of it (that needs the key to re-MAC the manifest), so ``report`` with the key then refused the
    whole run as edited. Unlisted ones are written as before (report ignores them, with a note)."""
    root = Path(run_dir).resolve()
    names = [Path(p).name for p in paths if p is not None and Path(p).name in CHECK_FILES
             and Path(p).resolve().parent == root]
    found = manifest.read(run_dir) if names else None
    if found is None or not found.carries_mac or found.authenticated:
        return
    listed = [name for name in names if name in found.files]
    if listed:
        raise UserError(f"{Path(run_dir) / listed[0]} is listed in {manifest.NAME}, which is authenticated with an "
                        f"integrity key (HMAC), and none is configured: this check could not list the {listed[0]} "
                        "it would write in its place, so the run would be refused as edited; set "
                        f"{KEY_VARIABLE} (or the key file {key_file()}) to the key the run was written with, or "
                        "write the verdict elsewhere (--json PATH and --junit PATH outside the run directory, or -)")


CHECK_LOCK_SECONDS = 30.0  # another check holds it for milliseconds (two writes and a manifest update)


@contextmanager
def one_check_at_a_time(run_dir: Path):
    """Hold the run directory's manifest lock (``manifest.directory_lock``) while check writes check.json and
    check.junit.xml there and lists them in the manifest. Checks of one run in parallel (CI jobs testing several
    claims on one cached run) each read, updated and rewrote the manifest: one's update was lost in 7 of 200
    trials, and ``report`` then refused the run's check.json as edited. A run writing the same directory takes
    the same lock for each of its manifest updates (milliseconds each): a check never waits for a fit."""
    with manifest.directory_lock(run_dir, CHECK_LOCK_SECONDS), uninterrupted():
        yield  # a Ctrl-C or SIGTERM is taken once the files and the manifest agree


def write_reports(result: CheckResult, json_path: Path | None, junit_path: Path | None) -> dict[Path, str]:
    """Write check.json and the JUnit file, both or neither (``durable_write.atomic_write_all``): a check refused for
    one of them leaves the other (and the run directory) as it was. Each path written → the SHA-256 of its bytes."""
    contents = []
    for path, text in ((json_path, json.dumps(result.to_json(), indent=2) + "\n"),
                       (junit_path, result.to_junit())):
        if path is not None:
            path = Path(path)
            if not path.parent.is_dir():
                what = "is a file, not a directory" if os.path.lexists(path.parent) else "does not exist"
                raise UserError(f"cannot write {path}: {path.parent} {what}; give a path in an existing directory")
            if path.is_symlink():  # a rename over it would replace the link (docs/check.md)
                raise UserError(f"cannot write {path}: it is a symbolic link, and topicaudit never writes through "
                                "one; give the file's own path, or another path (--json, --junit)")
            contents.append((path, text.encode("utf-8")))
    try:
        written = atomic_write_all(contents)
    except OSError as error:
        where = f" {error.filename}" if getattr(error, "filename", None) else ""
        raise UserError(f"cannot write{where or ' ' + ' and '.join(str(p) for p, _ in contents)}: "
                        f"{error.strerror or error}; choose another place (--json, --junit)") from None
    return written


@in_command_scope  # the API's entry: what it declares ends with it (a pytest session is a long process)
def assert_privacy(config=None, epsilon: float | None = None, delta: float | None = None, alpha: float | None = None,
                   output: str | Path | None = None, canaries: int | str | None = None, learner=None,
                   cache: str | Path | bool | None = None, power: float | None = None,
                   budget: float | str | None = None) -> CheckResult:
    """Audit a configuration (run or resume it) and fail unless it is consistent with its claim.

    For a project's own tests: ``assert_privacy("audit.toml", epsilon=3)``.
    config: a ``Config``, a TOML path or a dict of the TOML's content (None: the demo's settings).
    canaries: the number of canaries ([attack.canaries] count) when given; "auto": the fewest whose simulated
    power against a mechanism 2× less private reaches ``power`` (default 0.95) within ``budget`` seconds
    (default 600; "5m" and "1h" read too), as ``check --canaries auto`` chooses it (``engine.sizing``); the
    choice is in the result's ``sizing``.
    learner: a learner object audited in place of the configuration's [target] learner, k and params
    (``topicaudit.run``'s ``learner``).
    output: the run directory; else the run is kept in the run cache (``topicaudit.engine.storage.run_cache``): cache
    names its directory (None: ``$TOPICAUDIT_CACHE_DIR/runs``; False: no cache, the run's default directory).
    A finished run of the same configuration, inputs and code is reused without refitting.
    Raises AssertionError with the refuting bound when the claim is violated.
    """

    epsilon, delta, alpha = (arguments.real(v, n) for v, n in ((epsilon, "epsilon"), (delta, "delta"),
                                                               (alpha, "alpha")))
    auto = isinstance(canaries, str) and canaries.strip().lower() == AUTO
    canaries = None if auto else arguments.integer(canaries, "canaries")
    if not auto and (power is not None or budget is not None):
        raise UserError('power and budget size the canary audit: give them with canaries="auto"')
    output = arguments.optional_path(output, "output")
    try:
        result = _audit_and_check(config, epsilon, delta, alpha, output, canaries, auto, learner, cache, power,
                                  budget)
    except AssertionError as error:
        # AssertionError is the verdict VIOLATED, and nothing else: a learner's own `assert` failing in its fit (or
        # one of ours, a bug) read as a refuted claim to code catching it, and in pytest as the privacy test failing.
        raise RuntimeError(f"the audit failed before any verdict (AssertionError: {error}); this is no verdict "
                           "on the claim") from error
    except SystemExit as error:
        # A learner's sys.exit(0) mid-fit ended a script's `assert_privacy(...)` with exit 0, read as a pass.
        raise RuntimeError(f"the audit was ended by sys.exit({error.code!r}) before any verdict (called by the "
                           "learner or a library it uses); this is no verdict on the claim") from error
    if result.violated:
        raise AssertionError(result.message())  # not a bare assert: ``python -O`` would strip it
    return result


def _audit_and_check(config, epsilon, delta, alpha, output, canaries, auto: bool, learner, cache, power,
                     budget) -> CheckResult:
    """``assert_privacy``'s audit: sized (``auto``), run or reused from the cache, and checked."""
    if config is None:
        config = Config()
    elif isinstance(config, dict):
        config = config_from_dict(config)
    elif not isinstance(config, Config):
        config = load_config(arguments.path(config, "config (a Config, dict or TOML path)"))
    else:
        config = check_fields(config)  # set in Python: read as a file's keys are, into a copy
    config = copy.deepcopy(with_learner(run_config(config), learner))  # the caller's Config stays as it was
    if output is not None:
        config.output = str(output)
    if canaries is not None or auto:
        config.attack.canaries.count = START if auto else canaries
    cache = arguments.cache_place(cache)
    check_claim_inputs(config, epsilon, delta, alpha)  # a claim it cannot test fails before any fit
    power = check_power(power) if auto else None
    budget = parse_budget(DEFAULT_BUDGET if budget is None else budget) if auto else None
    root = None if config.output else checked_root(cache)
    started = time.perf_counter()
    if root is not None:  # kept in the run cache: sized and fitted in a fresh process (``cached_audit``)
        sizing = cached_audit(config, cache, root, epsilon, delta, alpha, auto, power, budget)
    else:
        sizing = size_canaries(config, epsilon, delta, alpha, power, budget) if auto else None
        if sizing is not None:
            config.attack.canaries.count = sizing.count
        execute_run(config, quiet=True)
    result = check_run(config.run_dir, epsilon, delta, alpha)
    if sizing is not None:
        choosing = (sizing.sizing_seconds or 0.0) if sizing.kept is None else 0.0  # made in this call, not the audit
        sizing.took = round(time.perf_counter() - started - choosing, 1)
        result = dataclasses.replace(result, sizing=sizing.to_json())
    return result
