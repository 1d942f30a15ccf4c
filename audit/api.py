"""The Python API: every job of the command line as a function returning objects.

``topicaudit`` re-exports these; each returns what the matching command writes,
typed (``topicaudit.engine.storage``: results, audit_results, check_result): a ``RunResults`` (results.json), an
``AuditResults`` (audit.json), a ``CheckResult`` (check --json), the report's
directory. So a script or notebook need not read files back; ``to_json()``
gives the file's content, and the results also read as that mapping
(``results["canaries"]["count"]``).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from topicaudit.engine.configuration import arguments
from topicaudit.engine.audit import execute_audit
from topicaudit.engine.audit_inputs import audit_config
from topicaudit.engine.check import assert_privacy, check_run
from topicaudit.engine.configuration.config import AuditConfig, Config, run_config, with_learner
from topicaudit.engine.configuration.loading import check_fields, config_from_dict, load_config
from topicaudit.engine.storage.audit_results import AuditResults
from topicaudit.engine.storage.check_result import CheckResult
from topicaudit.engine.storage.results import RunResults
from topicaudit.errors import UserError, deleted_working_directory
from topicaudit.folder_anchors import command_scope
from topicaudit.engine.run import execute_run
from topicaudit.reports.build import build_report


def _named_errors(function):
    """The API's boundary is the command line's: a working directory deleted under the call is the UserError the
    command line prints (exit 2), not a bare FileNotFoundError from deep inside; a SystemExit from code the call ran
    is a RuntimeError, never the script's exit; and the folders the call declares topicaudit's own (its caches) are
    its own only until it returns, as a command line's end with its process."""
    @functools.wraps(function)
    def named(*args, **kwargs):
        try:
            with command_scope():
                return function(*args, **kwargs)
        except FileNotFoundError as error:
            deleted = deleted_working_directory(error)
            if deleted is None:
                raise
            raise deleted from None
        except SystemExit as error:
            # A learner's sys.exit(0) in its guarantee() or pickling ended a script's `topicaudit.run(...)` with
            # exit 0 and no result, read as a pass (hostile pass XIX-s; assert_privacy said it already).
            raise RuntimeError(f"topicaudit.{function.__name__} was ended by sys.exit({error.code!r}) before it "
                               "returned (called by a learner's code or a library it uses); this is no result and "
                               "no verdict") from error
    return named


def as_config(config: Config | AuditConfig | str | Path | dict[str, Any] | None = None) -> Config | AuditConfig:
    """A configuration from a Config or AuditConfig (read into a checked copy), a TOML file's path, or a dict
    shaped like the TOML (None: the demo run); a TOML naming a released model ([model] phi) gives an AuditConfig."""
    if config is None:
        return Config()
    if isinstance(config, (Config, AuditConfig)):
        return check_fields(config)  # set in Python: read as a file's keys are, into a copy
    if isinstance(config, dict):
        return config_from_dict(config)
    return load_config(arguments.path(config, "config (a Config, AuditConfig, dict or TOML path)"))


@_named_errors
def run(config: Config | str | Path | dict[str, Any] | None = None, quiet: bool = True,
        learner: Any = None) -> RunResults:
    """Train a target and its shadows as the configuration says and attack it (``topicaudit run``).

    learner: a learner object (yours or a built-in class) to audit instead of
    the configuration's [target] learner, k and params; it is recorded as its
    class path and constructor parameters (scikit-learn's convention), so the
    run directory identifies it and the same object resumes the run
    (docs/adding-a-learner.md). Returns the run directory's ``results.json`` as
    :class:`RunResults` (``to_json()`` is the file's content); an interrupted
    run resumes. The run directory also holds roc.png when shadows ran.
    """
    quiet = arguments.boolean(quiet, "quiet")
    config = with_learner(run_config(as_config(config)), learner)  # an AuditConfig: a clear UserError
    return execute_run(config, quiet=quiet)


@_named_errors
def audit_model(phi: str | Path | AuditConfig, candidates: str | Path | None = None, reference: str | Path | None = None,
                quiet: bool = True, **settings: Any) -> AuditResults:
    """Rank candidate documents by membership evidence against a released Φ (``topicaudit audit``).

    phi: Φ's file, a TOML configuration file, or an AuditConfig ([model], [corpus] =
    the candidates, [reference]); ``settings`` are the command's flags by name
    (vocabulary, shadows, learner, k, params, rank_by, output, …) and override
    the file. Returns ``audit.json`` as :class:`AuditResults`: ``all_scores`` holds every candidate's scores
    (read from scores.csv on first use), ``paths`` the output files, ``exposure`` the overall exposure figure.
    """
    phi = arguments.phi(phi)
    quiet = arguments.boolean(quiet, "quiet")
    candidates = arguments.optional_path(candidates, "candidates")
    reference = arguments.optional_path(reference, "reference")
    for name in ("output", "vocabulary"):  # output=5 was a TypeError from deep inside
        if settings.get(name) is not None:
            settings[name] = arguments.path(settings[name], name)
    for name in ("params", "candidates_options", "reference_options"):  # params="max_iter=3": a raw ValueError
        table = settings.get(name)  # names as a file's keys: {1: 2} was a TypeError or ValueError from inside
        if table is not None and (not isinstance(table, dict) or not all(isinstance(key, str) for key in table)):
            raise UserError(f"{name} must be a dict of NAME: value (got {type(settings[name]).__name__}), e.g. "
                            "params={'max_iter': 20}")
    config = audit_config(phi, candidates=candidates, reference=reference, **settings)
    return execute_audit(config, quiet=quiet)


@_named_errors
def check(run_dir: str | Path, epsilon: float | None = None, delta: float | None = None,
          alpha: float | None = None) -> CheckResult:
    """Hold a finished run against a privacy claim (``topicaudit check``); ``.violated`` says the verdict."""
    run_dir = arguments.path(run_dir, "run_dir")
    return check_run(run_dir, arguments.real(epsilon, "epsilon"), arguments.real(delta, "delta"),
                     arguments.real(alpha, "alpha"))


@_named_errors
def report(paths: str | Path | list[str | Path], output: str | Path | None = None, *, attack: str = "lira_online",
           top: int = 20, show_text: bool = False, compare_vocabularies: bool = False, quiet: bool = True) -> Path:
    """Build the report page of finished runs and sweeps (``topicaudit report``); returns its directory.

    paths: one run or sweep directory, or a list of them. Its options are named here, not passed on as
    ``**options``: ``report(R, bogus=1)`` was a TypeError naming the internal ``build_report()``.
    """
    rows = arguments.integer(top, "top")  # not 50.5, "50" or True; None: the default
    show_text, compare_vocabularies, quiet = (arguments.boolean(v, n) for v, n in (
        (show_text, "show_text"), (compare_vocabularies, "compare_vocabularies"), (quiet, "quiet")))
    return build_report(arguments.paths(paths, "paths"), arguments.optional_path(output, "output"),
                        attack=attack, top=20 if rows is None else rows, show_text=show_text,
                        compare_vocabularies=compare_vocabularies, quiet=quiet)


__all__ = ["AuditConfig", "AuditResults", "CheckResult", "Config", "RunResults", "as_config", "assert_privacy",
           "audit_model", "check", "load_config", "report", "run"]
