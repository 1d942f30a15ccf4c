"""The answer a report leads with: one verdict card per run, computed as ``topicaudit check`` computes it.

The card holds the claim (ε, δ, what it protects), every ε bound with what it
observed (natural documents, canaries on the release, canaries on the
mechanism), the verdict (VIOLATED, CONSISTENT, NO CLAIM, NO SIGNAL), the
audit's ceiling, and the strongest attack with its TPR at 0.1% and 1% FPR and
AUC. The bounds come from ``topicaudit.engine.check`` (the claim of the run's
``check.json`` when ``check`` was run on it, else the target's own), so the
page and ``check`` never disagree.
"""
from __future__ import annotations

import functools
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from topicaudit.engine.storage import manifest
from topicaudit.engine.check import check_run, own_claim_check
from topicaudit.engine.storage.check_result import (CheckResult, bound_and_claim, ceiling_remedy, confidence,
                                                   integrity_phrase)
from topicaudit.engine.storage.results import RunResults
from topicaudit.engine.storage.bounded_read import read_json, read_regular
from topicaudit.engine.presentation.guidance import figure_meanings, next_steps
from topicaudit.engine.power import TARGET_POWER
from topicaudit.errors import UserError

# What each family of tests observed, by the prefix of its name in CheckResult.bounds.
OBSERVED = {
    "natural": "natural documents on the released Φ (LiRA with shadow models)",
    "canaries": "canaries on the released Φ",
}
STATUSES = ("VIOLATED", "CONSISTENT", "NO CLAIM", "NO SIGNAL")
JUNIT_BYTES = 2**20  # check.junit.xml holds one test case; its failure text is one check.json (kilobytes)
# The claim and outcome check.junit.xml records (CheckResult.to_junit): the case's name, its failure or skip.
JUNIT_CLAIM = re.compile(r'<testcase classname="topicaudit" name="epsilon &lt;= ([^ "]+) ')


@dataclass
class Verdict:
    status: str                  # one of STATUSES
    headline: str                # one sentence: the answer
    claim: str                   # ε, δ, adjacency and basis, or "none"
    bounds: list[list[str]]      # test, what it observed, ε ≥, method
    ceiling: str
    strongest: list[list[str]] = field(default_factory=list)  # experiment, attack, TPR@0.1%, TPR@1%, AUC
    power: str | None = None     # the audit's measured power, when the check reports it
    integrity: str | None = None  # what protected the run directory: authenticated, hashes only, or unverified
    meanings: list[tuple[str, str]] = field(default_factory=list)  # headline figure, its plain-language sentence
    next_steps: list[str] = field(default_factory=list)  # what would let the audit say more (guidance.next_steps)


def _observed(result, name: str) -> str:
    """What a test observed, as ``check`` states it (``CheckResult.observed``, by the test's prefix)."""
    source = name.split("/", 1)[0]
    return result.observed.get(source + "/") or OBSERVED.get(source, source)


def _power(power: dict | None) -> str | None:
    """A mechanism audit's simulated power, in words."""
    if power is None:
        return None
    return (f"a mechanism 2× less private than claimed is refuted in {power['2x']:.0%} of "
            f"{power['replicates']} simulated audits of this design, 10× in {power['10x']:.0%}")


def _status(result, claim_tested: bool) -> str:
    if result.no_signal:
        return "NO SIGNAL"
    if not claim_tested:
        return "NO CLAIM"
    return "VIOLATED" if result.violated else "CONSISTENT"


def _recorded_claim(run) -> tuple[float, float, float, list[str] | None] | None:
    """The claim ``check`` last tested on this run (its check.json) and the attacks it used, if any: only a
    check.json the run's manifest lists, with its hash (``check`` records it there). One the manifest does not list — written by
    another version, by hand, or by ``check`` when it could not re-MAC the manifest — is ignored with a note
    (the card tests the target's own claim); one whose hash differs is refused (exit 2). The pre-manifest
    layout has no manifest to list it: its check.json is read as before, and the card says UNVERIFIED."""
    path = run.path / "check.json"
    listed = manifest.entries(run.path)
    if not os.path.lexists(path):
        if listed is not None and "check.json" in listed:  # deleted: the card went back to the target's claim silently
            warnings.warn(f"{path} is listed in {run.path / manifest.NAME} but missing: the claim `topicaudit check` "
                          "last tested on this run was deleted; the verdict card tests the target's own claim",
                          stacklevel=2)
        return None
    if listed is not None:
        if "check.json" not in listed:
            warnings.warn(f"{path} is not listed in {run.path / manifest.NAME}, so the claim it records cannot be "
                          "trusted; the verdict card tests the target's own claim — run `topicaudit check "
                          f"{run.path} --epsilon E` to record the claim to test", stacklevel=2)
            return None
        # edited since check wrote it: exit 2 naming it (``collect.read_run`` refused it already)
        manifest.verify(run.path, ["check.json"])
    try:
        recorded = CheckResult.from_json(read_json(path), str(path))
        # with its attacks: the card tested the claim with the default ones, and said CONSISTENT where the
        # check it read had found VIOLATED with `--attack lira_online_global`
        return (float(recorded.claimed_epsilon), float(recorded.delta), float(recorded.alpha),
                recorded.attacks)
    except (UserError, TypeError, ValueError) as error:  # (was silent: the claim the user gave dropped unsaid)
        warnings.warn(f"{path} cannot be read as the document `topicaudit check` writes ({error}); the verdict "
                      "card tests the target's own claim", stacklevel=2)
        return None


def _junit_disagreement(run, status: str, epsilon: float | None) -> None:
    """Note a listed check.junit.xml recording another claim or verdict than the card's: ``check --json
    ELSEWHERE`` writes its check.json elsewhere and its JUnit XML into the run, beside an earlier check's
    check.json (or none), which is the claim the card tests — the run then holds two checks that disagree."""
    path = run.path / manifest.CHECK_FILES[1]
    listed = manifest.entries(run.path)
    if not os.path.lexists(path) or (listed is not None and path.name not in listed):
        return
    try:
        if listed is not None:
            manifest.verify(run.path, [path.name])
        text = read_regular(path, JUNIT_BYTES, "not the JUnit XML `topicaudit check` writes").decode("utf-8")
    except (UserError, UnicodeDecodeError):
        return  # collect.read_run refused an edited listed file already; an unreadable one says nothing here
    found = JUNIT_CLAIM.search(text)
    if found is None:
        return
    recorded = ("VIOLATED" if "<failure " in text else "NO SIGNAL" if "<skipped " in text else "CONSISTENT")
    card = f"{status}" + (f" at ε = {epsilon:g}" if epsilon is not None else "")
    if recorded != status or epsilon is None or found.group(1) != f"{epsilon:g}":
        warnings.warn(f"{path} records a check of ε = {found.group(1)} that found {recorded}, but the verdict "
                      f"card says {card} (the claim of the run's check.json, or the target's own without one): a "
                      "check whose check.json was written elsewhere (--json PATH) or deleted disagrees with the "
                      "card — run `topicaudit check "
                      f"{run.path} --epsilon E` without --json to record the claim the card should test",
                      stacklevel=2)


def _strongest(results: RunResults) -> list[list[str]]:
    """The attack with the highest TPR at 0.1% FPR (then AUC) in each experiment of the run."""
    rows = []
    canary_scores = results.canaries.scores if results.canaries is not None else None
    for experiment, metrics in (("natural documents", results.attacks), ("canaries", canary_scores or {})):
        if not metrics:
            continue
        name = max(metrics, key=lambda a: (metrics[a].tpr_at_fpr_0_001 or 0, metrics[a].auc or 0))
        m = metrics[name]
        rows.append([experiment, name, f"{100 * m.tpr_at_fpr_0_001:.2f}%", f"{100 * m.tpr_at_fpr_0_01:.2f}%",
                     f"{m.auc:.3f}"])
    return rows


def own_verdict(path: Path, suggest: bool = False) -> tuple[CheckResult, bool]:
    """The verdict on a run's own claim as ``check`` computes it with this code (once per run and report):
    the card and the ledger read it, so a run written by an older version shows what ``check`` says now.
    Remembered by the run's results.json as it is on disk, so a run rewritten since is computed afresh.

    suggest: a CONSISTENT mechanism audit short of 95% power also gets the canary count that reaches it
    (``CheckResult.canaries_for_power``, seconds of simulation: the card asks, the ledger's rows need not)."""
    stamp = (path / "results.json").stat()
    result, tested = _own_verdict(Path(path), stamp.st_mtime_ns, stamp.st_size, None)
    power = result.power
    if suggest and tested and not result.violated and power is not None and power["2x"] < TARGET_POWER:
        return _own_verdict(Path(path), stamp.st_mtime_ns, stamp.st_size, TARGET_POWER)
    return result, tested


@functools.lru_cache(maxsize=256)
def _own_verdict(path: Path, mtime_ns: int, size: int, suggest: float | None) -> tuple[CheckResult, bool]:
    return own_claim_check(path, suggest=suggest)


def run_verdict(run) -> Verdict:
    """The verdict card of a finished run (a ``topicaudit.reports.collect.Run``)."""
    guarantee = run.results.target.guarantee
    recorded = _recorded_claim(run)
    result, tested = None, False
    if recorded is not None:
        try:
            result, tested = check_run(run.path, *recorded), True
        except UserError as error:  # was silent: the claim check.json records dropped for the target's own
            warnings.warn(f"{run.path / 'check.json'} records a check this run cannot repeat ({error}); the verdict "
                          "card tests the target's own claim — run `topicaudit check "
                          f"{run.path} --epsilon E` to record the claim to test", stacklevel=2)
            result = None
    if result is None:
        result, tested = own_verdict(run.path, suggest=True)
    status = _status(result, tested)
    _junit_disagreement(run, status, result.claimed_epsilon if tested else None)
    level = f"{result.adjacency}-level, {confidence(result.alpha)} confidence, δ = {result.delta:g}"
    if tested:
        basis = guarantee.basis if recorded is None else "as given to `topicaudit check`"
        claim = (f"ε = {result.claimed_epsilon:g}, δ = {result.delta:g}, {result.adjacency}-level neighbours"
                 + (f" ({basis})" if basis and basis != "none" else ""))
    else:
        claim = ("none: the target claims no ε" if guarantee.epsilon is None else
                 f"ε = {guarantee.epsilon:g} per {guarantee.adjacency} (not testable by these tests)")
    best = result.strongest_attack
    strongest_source = _observed(result, best)
    if status == "VIOLATED":
        bound, claimed = bound_and_claim(result.epsilon_lower_bound, result.claimed_epsilon, True, digits=2)
        headline = (f"VIOLATED: the claim ε = {claimed} is refuted; {strongest_source} prove "
                    f"ε ≥ {bound} ({level}).")
    elif status == "CONSISTENT":
        reach = (f"power: {_power(result.power)}" if result.power is not None else
                 f"this audit could refute claims up to ε = {result.ceiling:.2f} with a perfect attack"
                 if result.ceiling > result.claimed_epsilon else
                 f"this audit cannot refute it whatever the outcome (its ceiling is ε = {result.ceiling:.2f}): "
                 f"{ceiling_remedy(result.canaries_for_ceiling)}")
        bound, _ = bound_and_claim(result.epsilon_lower_bound, result.claimed_epsilon, False, digits=2)
        headline = (f"CONSISTENT: not refuted (never a proof of privacy); the strongest bound is "
                    f"ε ≥ {bound} ({level}); {reach}."
                    + (f" This design cannot see {'; nor '.join(result.unseen)}." if result.unseen else "")
                    + (f" {', '.join(result.reversed_scores)} rank members below non-members: a defect of the score."
                       if result.reversed_scores else ""))
    elif status == "NO SIGNAL":
        headline = (f"NO SIGNAL: the tests could not tell members from non-members; the bound ε ≥ "
                    f"{result.epsilon_lower_bound:.2f} says nothing about the claim either way ({level}).")
    else:
        headline = (f"NO CLAIM to test: the audit proves ε ≥ {result.epsilon_lower_bound:.2f} from "
                    f"{strongest_source} ({level}); `topicaudit check {run.path} --epsilon E` tests a claim.")
    bounds = [[name, _observed(result, name), f"{b.epsilon:.3f}", b.method]
              for name, b in sorted(result.bounds.items(), key=lambda item: -item[1].epsilon)]
    return Verdict(status, headline, claim, bounds,
                   f"ε = {result.ceiling:.2f}: the largest ε any outcome of these tests could prove"
                   if math.isfinite(result.ceiling) else "unbounded",
                   _strongest(run.results), _power(result.power),
                   result.unverified or integrity_phrase(result.integrity, result.integrity_key_id),
                   figure_meanings(run.results, result), next_steps(result, tested))
