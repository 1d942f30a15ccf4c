"""``check``'s result: the verdict on one claim (``CheckResult``, ``check --json``'s file and its JUnit XML) and
the words a verdict line uses for its confidence, its ceiling and the run directory's integrity.

:class:`CheckResult` is ``check --json``'s file (``topicaudit check``, ``topicaudit.check()``); ``run`` stores
the same record, without its schema and run directory, as results.json's ``verdict``
(``RunResults.own_verdict``).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from topicaudit.bounds.epsilon import EpsilonBound, Method
from topicaudit.bounds.verdict import THREAT_MODELS
from topicaudit.engine.storage.records import BOUNDS, check_schema
from topicaudit.errors import UserError, printable

CHECK_SCHEMA = "topicaudit.check/1"              # check --json of `topicaudit check`

# The f-DP one-run test of the claimed mechanism's own curve (mechanism audits of Gaussian mechanisms).
CURVE = Method.FDP_CURVE
# The δ-tail test of a DP vocabulary step: canary words no fixed document holds, released at all.
DELTA_TAIL = Method.DELTA_TAIL


def confidence(alpha: float) -> str:
    """1 − α as a percentage with the digits it has: α = 0.999 is "0.1%" (":.0%" printed "0%"), 0.001 "99.9%";
    an α too small for them is written out (α = 1e-300 printed "100%": hostile pass XIX-zd, E-conf)."""
    written = f"{(1.0 - alpha) * 100:.10g}%"
    return f"1 − {alpha:.3g}" if written == "100%" and alpha > 0 else written



# -- check ----------------------------------------------------------------------------------------------------
# What protected a run directory a verdict was read from (topicaudit.engine.storage.integrity; docs/run-directory.md#integrity).
HMAC, SHA256, NONE = "hmac-sha256", "sha256", "none"
# What a verdict on a directory in the pre-manifest layout says about itself.
UNVERIFIED = ("UNVERIFIED: this directory has no manifest.json (the layout written before manifests existed), "
              "so its files' hashes were not checked")


def ceiling_remedy(advice: dict[str, Any] | None) -> str:
    """What would lift an audit's ceiling (``CheckResult.canaries_for_ceiling``), in words."""
    if advice is None:
        return "add canaries, --canaries M"
    if advice.get("count") is None:
        return (f"even {advice['searched_to']:,} canaries would raise it only to ε ≈ {advice['ceiling']:.2f}: no "
                f"audit of this size can refute ε = {advice['claimed_epsilon']:g}")
    above = ", above the claim" if advice.get("reason") == "claim" else ""
    return (f"{advice['count']:,} canaries would raise it to ε ≈ {advice['ceiling']:.2f}{above}: "
            f"--canaries {advice['count']}")


def bound_and_claim(bound: float, claim: float, violated: bool, digits: int = 3) -> tuple[str, str]:
    """A bound (``digits`` decimals) and a claim (``:g``) as a verdict line prints them, with more digits where those
    would read the wrong way round: "ε ≥ 2.221 > claimed ε = 2.2213" (the bound 2.22132…) stated a smaller number
    greater."""
    claim_text = f"{claim:g}"
    for places in range(digits, 17):
        text = f"{bound:.{places}f}"
        if (float(text) > float(claim_text)) == violated:
            return text, claim_text
    return repr(float(bound)), repr(float(claim))


def integrity_phrase(mode: str | None, key_id: str | None = None) -> str | None:
    """What a verdict line or a report says about the mode that protected the run (None: not known)."""
    if mode == HMAC:
        return f"integrity: authenticated (manifest HMAC-SHA256 verified with integrity key {key_id})"
    if mode == SHA256:
        return ("integrity: hashes only (manifest SHA-256 verified; no integrity key configured, so a forger who "
                "rewrites the manifest is not caught)")
    if mode == NONE:
        return UNVERIFIED
    return None


# What results.json's verdict says when the run's tests could not hold the target to a claim (it claims none, or
# one these tests cannot bound): its bounds are at ε = 0, and "VIOLATED" there was read by scripts as a refutation.
NO_CLAIM = "NO CLAIM"


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one claim: every test's bound, what the tests observed, and how strong they were.

    What ``topicaudit check`` prints and ``topicaudit.check()`` returns. A
    claim (ε, δ) is violated when some test proves ε_LB > ε at confidence
    1 − α (α split over the tests).

    Attributes
    ----------
    run_dir : the run directory checked.
    claimed_epsilon, delta, alpha : the claim held against the run, and 1 − confidence.
    bounds : test ("natural/lira_online:one-run", "canaries/zeta:one-run") → its bound.
    ceiling : the largest ε any outcome of these tests could prove.
    adjacency : the claim's adjacency ("document" or "word"), which chose the tests.
    observed : test prefix ("natural/", "canaries/") → what its scores observed, in words.
    no_signal : the scores did not separate the candidates at all (then CONSISTENT would overstate
        what was tested).
    power : "2x" / "10x" → the simulated share of audits of this design that refute a mechanism 2× and
        10× less private than claimed (mechanism audits only), and "replicates".
    unseen : the bug families this design cannot see, which the power does not cover (mechanism audits).
    reversed_scores : tests whose scores rank members *below* non-members: a defect of that score (it cannot
        refute anything), reported rather than silently outvoted by the others.
    unverified : None when the run directory's manifest verified its files; else why not (a directory in the
        layout written before manifests existed), which the verdict line and the JSON repeat.
    disagreements : the constants the learner's record states otherwise than its claim's dp-accounting event
        (``targets.privacy.release_check``): the claim was computed for another mechanism than the one recorded.
    integrity : what protected the run directory: ``hmac-sha256`` (its manifest's MAC verified with the
        configured integrity key, ``integrity_key_id``), ``sha256`` (its hashes alone: no key configured) or
        ``none`` (unverified); None for a result not read from a directory (the verdict ``run`` stores).
    canaries_for_power : when the simulated power against a 2× weaker mechanism is below ``power`` (95%):
        the canary ``count`` whose simulated power reaches it (and that power, ``simulated``), or the largest
        count the search tried and its power (``searched_to``, ``searched_power``; count None) when the search's
        limits came first (``engine.power.canaries_for_power``).
    sizing : how ``check --canaries auto`` chose the canary count (``engine.sizing.Sizing.to_json``).
    attacks : the attacks on the natural documents the check was asked to use (``check --attack``), None for the
        default; the report's verdict card tests the recorded claim with them (it used the default: a check that
        found VIOLATED with one attack showed as CONSISTENT on the card).
    canaries_for_ceiling : when the ceiling stopped the audit short (``engine.power.canaries_for_ceiling``):
        ``reason`` "claim" (no outcome could refute the claim: the canary ``count`` whose ceiling passes it, or
        None with ``searched_to``) or "saturated" (the bound is the ceiling: the ceiling, ``ceiling``, of
        ``count`` canaries, 4× the candidates).

    ``violated`` and ``verdict`` are the outcome; ``to_json`` / ``from_json``
    are ``check --json``'s file (schema ``topicaudit.check/1``), ``to_junit``
    its JUnit XML.
    """

    run_dir: Path
    claimed_epsilon: float
    delta: float
    alpha: float
    bounds: dict[str, EpsilonBound]
    ceiling: float = math.inf
    adjacency: str = "document"
    observed: dict[str, str] = field(default_factory=dict)
    no_signal: bool = False
    power: dict[str, float] | None = None
    unseen: list[str] = field(default_factory=list)
    reversed_scores: list[str] = field(default_factory=list)
    unverified: str | None = None
    disagreements: list[str] = field(default_factory=list)
    integrity: str | None = None
    integrity_key_id: str | None = None
    canaries_for_power: dict[str, Any] | None = None
    sizing: dict[str, Any] | None = None
    canaries_for_ceiling: dict[str, Any] | None = None
    attacks: list[str] | None = None

    @property
    def saturated(self) -> bool:
        """The bound is the audit's ceiling: the design, not the model, capped it."""
        return (self.canaries_for_ceiling or {}).get("reason") == "saturated"

    @property
    def epsilon_lower_bound(self) -> float:
        return max(b.epsilon for b in self.bounds.values())

    @property
    def strongest_attack(self) -> str:
        return max(self.bounds, key=lambda name: self.bounds[name].epsilon)

    @property
    def violated(self) -> bool:
        return self.epsilon_lower_bound > self.claimed_epsilon

    @property
    def verdict(self) -> str:
        """VIOLATED, NO SIGNAL or CONSISTENT."""
        return "VIOLATED" if self.violated else "NO SIGNAL" if self.no_signal else "CONSISTENT"

    @property
    def threat_model(self) -> str:
        """What the strongest test observed, in words."""
        return self.observed.get(self.strongest_attack.split("/")[0] + "/", THREAT_MODELS["release"])

    def message(self) -> str:
        """The verdict line; after it, a record that disagrees with its claim, and what protected the run
        directory (unverified, hashes, or authenticated)."""
        body = printable(self._message())  # the run directory's name is anyone's: one visible line, encodable
        if self.disagreements:
            body += (" — the learner's record and its claim describe different mechanisms: "
                     + "; ".join(self.disagreements))
        said = self.unverified or integrity_phrase(self.integrity, self.integrity_key_id)
        return body if not said else f"{body} — {said}"

    def _message(self) -> str:
        level = f"{self.adjacency}-level, {confidence(self.alpha)} confidence, δ = {self.delta:g}"
        # A refutation names what its test observed; a claim not refuted, everything every test observed.
        observed = f"observed: {self.threat_model}" if self.violated else \
            f"observed: {'; '.join(dict.fromkeys(self.observed.values())) or self.threat_model}"
        if self.violated:
            best = self.bounds[self.strongest_attack]
            if best.method == DELTA_TAIL:
                d = best.details
                return (f"VIOLATED: {d['released']} of {d['fresh_canaries']} canary words that no other document "
                        f"holds were released (p ≤ {d['p_value']:.2g} under the claim): its δ = {self.delta:g} "
                        f"fails, for every ε; {observed} [{self.run_dir}]")
            if best.method == CURVE:
                return (f"VIOLATED: {self.strongest_attack} refutes the claimed mechanism's own trade-off curve "
                        f"(its privacy loss would have to be ≥ {best.details['curve_scale_lb']:.2f}× the claimed "
                        f"one; {level}); this refutes the mechanism the claim describes, not every (ε, δ) reading "
                        f"of it; {observed} [{self.run_dir}]")
            why = ("; the released Φ proves more than the recorded mechanism allows: the model was not built "
                   "from what the learner recorded, or the claim is wrong"
                   if self.strongest_attack.startswith("canaries-release/") else "")
            bound, claim = bound_and_claim(self.epsilon_lower_bound, self.claimed_epsilon, True)
            return (f"VIOLATED: {self.strongest_attack} proves ε ≥ {bound} ({level}) "
                    f"> claimed ε = {claim}; {observed}{why} [{self.run_dir}]")
        if self.no_signal:
            unseen = f"; nor could it see {'; nor '.join(self.unseen)}" if self.unseen else ""
            return (f"NO SIGNAL: the scores do not separate the candidates (tied, or at chance); this audit "
                    f"cannot refute any claim; {observed}{unseen} [{self.run_dir}]")
        if self.power is not None:
            reach = (f"power: a mechanism 2× less private than claimed is refuted in {self.power['2x']:.0%} "
                     f"of simulated audits of this design, 10× in {self.power['10x']:.0%}")
            needed = self.canaries_for_power
            if needed is not None and needed.get("count"):
                reach += (f" ({needed['count']:,} canaries would reach {needed['power']:.0%}: --canaries "
                          f"{needed['count']}, or --canaries auto)")
            elif needed is not None:
                reach += (f" (the search for a count reaching {needed['power']:.0%} stopped at "
                          f"{needed['searched_to']:,} canaries, {needed['searched_power']:.0%} in simulation: "
                          "more are needed, --canaries auto says how many)")

        elif self.ceiling > self.claimed_epsilon:
            reach = f"this audit could refute claims up to ε = {self.ceiling:.2f} with a perfect attack"
        else:
            reach = (f"this audit could not refute it whatever the outcome (its ceiling is ε = {self.ceiling:.2f}: "
                     f"{ceiling_remedy(self.canaries_for_ceiling)})")
        if self.unseen:
            reach += f"; this design cannot see {'; nor '.join(self.unseen)}"
        defect = (f"; {', '.join(self.reversed_scores)} rank members below non-members (a defect of "
                  f"{'that score' if len(self.reversed_scores) == 1 else 'those scores'}: it cannot refute)"
                  if self.reversed_scores else "")
        bound, claim = bound_and_claim(self.epsilon_lower_bound, self.claimed_epsilon, False)
        return (f"CONSISTENT: not refuted; {self.strongest_attack} proves ε ≥ {bound} "
                f"({level}) ≤ claimed ε = {claim}; {observed}; {reach}{defect} [{self.run_dir}]")

    def to_json(self) -> dict[str, Any]:
        """``check --json``'s content; the derived verdict, bound and threat model are written out too."""
        return {
            "schema": CHECK_SCHEMA,
            "run_dir": str(self.run_dir),
            "claimed_epsilon": self.claimed_epsilon,
            "delta": self.delta,
            "alpha": self.alpha,
            "adjacency": self.adjacency,
            # ∞ (a δ-tail refutation) as the string "inf", as every bound's JSON has it: strict JSON has no ∞
            "epsilon_lower_bound": (self.epsilon_lower_bound if math.isfinite(self.epsilon_lower_bound)
                                    else str(self.epsilon_lower_bound)),
            "strongest_attack": self.strongest_attack,
            "ceiling": self.ceiling,
            "violated": self.violated,
            "verdict": self.verdict,
            "no_signal": self.no_signal,
            "observed": self.observed,
            "threat_model": self.threat_model,
            "power": self.power,
            **({"unseen": self.unseen} if self.unseen else {}),
            **({"reversed_scores": self.reversed_scores} if self.reversed_scores else {}),
            **({"unverified": self.unverified} if self.unverified else {}),
            **({"disagreements": self.disagreements} if self.disagreements else {}),
            **({"integrity": self.integrity} if self.integrity else {}),
            **({"integrity_key_id": self.integrity_key_id} if self.integrity_key_id else {}),
            **({"canaries_for_power": self.canaries_for_power} if self.canaries_for_power else {}),
            **({"sizing": self.sizing} if self.sizing else {}),
            **({"canaries_for_ceiling": self.canaries_for_ceiling} if self.canaries_for_ceiling else {}),
            **({"attacks": self.attacks} if self.attacks else {}),
            "bounds": {name: b.to_json() for name, b in self.bounds.items()},
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "check.json", *, untested: bool = False) -> CheckResult:
        """The result ``to_json`` wrote; its verdict must be the one its bounds give (else the file was edited), or
        ``NO_CLAIM`` for the verdict ``run`` stored on a claim its tests could not hold (``untested``)."""
        check_schema(data, CHECK_SCHEMA, where)
        try:
            result = cls(Path(data["run_dir"]), data["claimed_epsilon"], data["delta"], data["alpha"],
                         BOUNDS.decode(data["bounds"], f"{where}.bounds"), data["ceiling"], data["adjacency"],
                         dict(data["observed"]), bool(data["no_signal"]), data["power"],
                         list(data.get("unseen", [])), list(data.get("reversed_scores", [])),
                         data.get("unverified"), list(data.get("disagreements", [])), data.get("integrity"),
                         data.get("integrity_key_id"), data.get("canaries_for_power"), data.get("sizing"),
                         data.get("canaries_for_ceiling"), _attack_names(data.get("attacks"), where))
        except (KeyError, TypeError, ValueError) as error:
            raise UserError(f"{where} is not a check result this topicaudit wrote ({type(error).__name__}: "
                            f"{error}); rerun `topicaudit check --json` to rewrite it") from None
        stated = data.get("verdict")
        if not result.bounds or stated != result.verdict and not (untested and stated == NO_CLAIM):
            raise UserError(f"{where}: its verdict is not the one its bounds give; the file was edited — rerun "
                            "`topicaudit check --json` to rewrite it")
        return result

    def to_junit(self) -> str:
        """One test case per run, failed when the claim is violated (any CI renders this)."""
        failure = (f'<failure message={quoteattr(self.message())} type="PrivacyClaimViolated">'
                   f"{escape(json.dumps(self.to_json(), indent=2))}</failure>") if self.violated else (
            f"<skipped message={quoteattr(self.message())}/>" if self.no_signal else "")
        name = quoteattr(printable(f"epsilon <= {self.claimed_epsilon:g} ({self.run_dir.name})"))
        return ('<?xml version="1.0" encoding="utf-8"?>\n'
                f'<testsuite name="topicaudit.check" tests="1" failures="{int(self.violated)}" errors="0">\n'
                f'  <testcase classname="topicaudit" name={name}>{failure}</testcase>\n'
                "</testsuite>\n")


def _attack_names(value: Any, where: str) -> list[str] | None:
    """check.json's ``attacks``: absent (the default), or a list of attack names."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(name, str) and name for name in value):
        raise ValueError(f"{where}.attacks is {value!r}, not a list of attack names")
    return list(value)
