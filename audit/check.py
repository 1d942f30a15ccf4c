"""Privacy claims as tests: compare an audit's empirical ε lower bound with a claimed ε.

A claim (ε, δ) is *violated* when the data prove ε_LB > ε at confidence
1 − α. The bound is the one-run bound (``audit.attacks.epsilon_lower_bounds``),
valid for a single target training with independent ½ inclusion, so a correct
mechanism is flagged in at most α of audits (benchmarks/RESULTS.md records the
calibration).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from audit.attacks import epsilon_lower_bounds
from audit.errors import UserError
from audit.rundir import atomic_write_text

DEFAULT_DELTA = 1e-5  # as [attack] delta, for runs that recorded none
# Claims about one word (or token) of a document. A membership audit removes whole
# documents, so holding its bound against a per-word ε would flag correct mechanisms.
WORD_LEVEL = ("word", "local-word")


@dataclass(frozen=True)
class CheckResult:
    run_dir: Path
    claimed_epsilon: float
    delta: float
    alpha: float
    bounds: dict[str, Any]  # attack → EpsilonBound

    @property
    def epsilon_lower_bound(self) -> float:
        return max(b.epsilon for b in self.bounds.values())

    @property
    def strongest_attack(self) -> str:
        return max(self.bounds, key=lambda name: self.bounds[name].epsilon)

    @property
    def violated(self) -> bool:
        return self.epsilon_lower_bound > self.claimed_epsilon

    def message(self) -> str:
        verdict = "VIOLATED" if self.violated else "CONSISTENT"
        relation = ">" if self.violated else "≤"
        return (f"{verdict}: {self.strongest_attack} proves ε ≥ {self.epsilon_lower_bound:.3f} "
                f"(one-run bound, {1 - self.alpha:.0%} confidence, δ = {self.delta:g}) "
                f"{relation} claimed ε = {self.claimed_epsilon:g} [{self.run_dir}]")

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "topicaudit.check/1",
            "run_dir": str(self.run_dir),
            "claimed_epsilon": self.claimed_epsilon,
            "delta": self.delta,
            "alpha": self.alpha,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "strongest_attack": self.strongest_attack,
            "violated": self.violated,
            "bounds": {name: b.to_json() for name, b in self.bounds.items()},
        }

    def to_junit(self) -> str:
        """One test case per run, failed when the claim is violated (any CI renders this)."""
        failure = (f'<failure message={quoteattr(self.message())} type="PrivacyClaimViolated">'
                   f"{escape(json.dumps(self.to_json(), indent=2))}</failure>") if self.violated else ""
        name = quoteattr(f"epsilon <= {self.claimed_epsilon:g} ({self.run_dir.name})")
        return ('<?xml version="1.0" encoding="utf-8"?>\n'
                f'<testsuite name="topicaudit.check" tests="1" failures="{int(self.violated)}" errors="0">\n'
                f'  <testcase classname="topicaudit" name={name}>{failure}</testcase>\n'
                "</testsuite>\n")


def check_run(run_dir: str | Path, epsilon: float | None = None, delta: float | None = None,
              alpha: float = 0.05) -> CheckResult:
    """Check a finished run directory against a claim (default: the target's own guarantee)."""
    run_dir = Path(run_dir)
    results_path, scores_path = run_dir / "results.json", run_dir / "scores.npz"
    if not results_path.exists() or not scores_path.exists():
        raise UserError(f"{run_dir} is not a finished topicaudit run (no results.json and scores.npz); "
                        "run `topicaudit run` first or pass a configuration file")
    results = json.loads(results_path.read_text())
    guarantee = results["target"]["guarantee"]
    if epsilon is None:
        epsilon = guarantee["epsilon"]
        if epsilon is None:
            raise UserError(f"the target of {run_dir} ({results['target']['learner']}) claims no ε; "
                            "pass the claim to test with --epsilon (and --delta)")
        if guarantee.get("adjacency") in WORD_LEVEL:
            raise UserError(
                f"the target of {run_dir} ({results['target']['learner']}) claims ε = {epsilon:g} per word "
                f"({guarantee['adjacency']} adjacency), but a membership audit tests whole documents; a "
                "word-level claim gives a document of L words L·ε (group privacy), so pass that document-level "
                "claim with --epsilon (e.g. L = the longest document), or the claim you want to hold it to"
            )
    if delta is None:
        stored = results.get("epsilon_lower_bounds", {}).get("delta", DEFAULT_DELTA)
        delta = guarantee["delta"] if guarantee["epsilon"] is not None else stored
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise UserError(f"--epsilon must be a finite number ≥ 0 (got {epsilon})")
    if not 0 <= delta < 1:
        raise UserError(f"--delta must be in [0, 1) (got {delta})")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha must be in (0, 1) (got {alpha})")
    with np.load(scores_path, allow_pickle=False) as z:
        scores = {name: z[name] for name in z.files}
    bounds = epsilon_lower_bounds(scores, scores["is_member"], delta, alpha)
    return CheckResult(run_dir, float(epsilon), float(delta), float(alpha), bounds)


def write_reports(result: CheckResult, json_path: Path | None, junit_path: Path | None) -> list[Path]:
    written = []
    for path, text in ((json_path, json.dumps(result.to_json(), indent=2) + "\n"),
                       (junit_path, result.to_junit())):
        if path is not None:
            path = Path(path)
            if not path.parent.is_dir():
                raise UserError(f"cannot write {path}: directory {path.parent} does not exist")
            atomic_write_text(path, text)
            written.append(path)
    return written


def assert_privacy(config, epsilon: float | None = None, delta: float | None = None, alpha: float = 0.05,
                   output: str | Path | None = None) -> CheckResult:
    """Audit a configuration (run or resume it) and fail unless it is consistent with its claim.

    For a project's own tests: ``assert_privacy("audit.toml", epsilon=3)``.
    config: a ``Config``, a TOML path or a dict of the TOML's content.
    Raises AssertionError with the refuting bound when the claim is violated.
    """
    from audit.config import Config, config_from_dict, load_config
    from audit.run import run_audit

    if isinstance(config, dict):
        config = config_from_dict(config)
    elif not isinstance(config, Config):
        config = load_config(config)
    if output is not None:
        config.output = str(output)
    run_audit(config, quiet=True)
    result = check_run(config.run_dir, epsilon, delta, alpha)
    assert not result.violated, result.message()
    return result
