"""topicaudit: membership-inference audits of released topic models, held against their privacy claims.

The command line (``topicaudit run|audit|check|sweep|report``) and this API do
the same jobs:

- ``run(config)``: train a target and its shadow models and attack it; returns
  a ``RunResults``, results.json typed (attack metrics, empirical ε lower bounds);
- ``audit_model(phi, candidates, reference, ...)``: rank candidate documents
  by membership evidence against a Φ you trained; returns an ``AuditResults`` (audit.json);
- ``check(run_dir, epsilon)``: hold a finished run against a claimed ε; a
  ``CheckResult`` whose ``violated`` is the verdict;
- ``assert_privacy(config, epsilon)``: run and check in one call (for tests);
- ``report(paths)``: the report page of finished runs and sweeps;
- ``load_config(path)`` / ``Config`` (``run``) / ``AuditConfig`` (``audit``):
  the configuration both the TOML files and the command-line flags build
  (docs/configuration.md).

Packages, lowest layer first (each imports only its own layer or lower ones):
``topicaudit.targets`` (learners, DP mechanisms, guarantees),
``topicaudit.inputs`` (corpora, Φ files), ``topicaudit.bounds`` and
``topicaudit.attacks`` (the mathematics), ``topicaudit.engine`` (plan, Ray,
the shadow experiment, run directories), ``topicaudit.reports``,
``topicaudit.cli`` (docs/architecture.md).
"""

import importlib

# First: from here on, each module's file is noted as its code is loaded, so that a plug-in edited after its import
# is told from the code that runs (topicaudit.loaded_code).
from topicaudit import environment_reads, files_read, loaded_code, working_directory
from topicaudit.version import __version__

loaded_code.install()
files_read.install()
working_directory.install()
environment_reads.install()

API = ("AuditConfig", "AuditResults", "CheckResult", "Config", "RunResults", "as_config", "assert_privacy",
       "audit_model", "check", "load_config", "report", "run")
__all__ = [*API, "__version__"]


def __getattr__(name: str):
    # The API is loaded on first use: a Ray worker importing only a learner
    # (topicaudit.targets.…) must not pay for the engine, scipy.stats and reports.
    if name in API:
        return getattr(importlib.import_module("topicaudit.api"), name)
    raise AttributeError(f"module 'topicaudit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API})
