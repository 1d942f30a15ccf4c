"""The Python API: every job of the command line as a function returning objects.

``topicaudit`` re-exports these; each returns what the matching command writes
(the ``results.json`` / ``audit.json`` content as a dict, a ``CheckResult``, the
report's directory), so a script or notebook need not read files back.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from topicaudit.engine.check import CheckResult, assert_privacy, check_run
from topicaudit.engine.config import Config, config_from_dict, load_config
from topicaudit.engine.run import run_audit
from topicaudit.engine.user_audit import UserAuditSpec, run_user_audit
from topicaudit.reports.build import build_report


def as_config(config: Config | str | Path | dict[str, Any] | None = None) -> Config:
    """A Config from a Config, a TOML file's path, or a dict shaped like the TOML (None: the demo)."""
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    if isinstance(config, dict):
        return config_from_dict(config)
    return load_config(config)


def run(config: Config | str | Path | dict[str, Any] | None = None, quiet: bool = True) -> dict[str, Any]:
    """Train a target and its shadows as the configuration says and attack it (``topicaudit run``).

    Returns the content of the run directory's ``results.json``; an interrupted run resumes.
    """
    return run_audit(as_config(config), quiet=quiet)


def audit_model(phi: str | Path | None = None, candidates: str | Path | None = None,
                reference: str | Path | None = None, config: Config | str | Path | dict[str, Any] | None = None,
                quiet: bool = True, **options: Any) -> dict[str, Any]:
    """Rank candidate documents by membership evidence against a released Φ (``topicaudit audit``).

    Either a configuration ([model], [corpus] = candidates, [reference]) or the
    three paths; ``options`` are ``UserAuditSpec`` fields (vocabulary, shadows,
    learner, k, params, rank_by, output, …). Returns ``audit.json``'s content.
    """
    if config is not None:
        spec = UserAuditSpec.from_config(as_config(config))
    else:
        spec = UserAuditSpec(phi=str(phi), candidates=str(candidates), reference=str(reference), **options)
    return run_user_audit(spec, quiet=quiet)


def check(run_dir: str | Path, epsilon: float | None = None, delta: float | None = None,
          alpha: float | None = None) -> CheckResult:
    """Hold a finished run against a privacy claim (``topicaudit check``); ``.violated`` says the verdict."""
    return check_run(run_dir, epsilon, delta, alpha)


def report(paths: list[str | Path], output: str | Path | None = None, **options: Any) -> Path:
    """Build the report page of finished runs and sweeps (``topicaudit report``); returns its directory."""
    return build_report(paths, output, **options)


__all__ = ["Config", "CheckResult", "as_config", "assert_privacy", "audit_model", "check", "load_config", "report",
           "run"]
