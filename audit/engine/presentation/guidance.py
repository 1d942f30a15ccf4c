"""An audit's headline figures in plain words, and what to do when the audit could not say more.

The run's summary and the report's verdict card both read these, so the two
explain a figure in the same words; ``check`` carries the next step in its
one verdict line (``CheckResult.message``).

- :func:`figure_meanings`: one sentence per headline figure (the recommended
  attack's TPR at 0.1% FPR and AUC, the strongest canary score's, the ε
  bound, the ceiling, the power).
- :func:`next_steps`: for a bound at its ceiling (the design capped it), a
  claim above the ceiling (no outcome could refute it) and a mechanism audit
  short of 95% power, what would lift it, with the canary count.
"""
from __future__ import annotations

import math

from topicaudit.attacks.registry import recommended_attack
from topicaudit.engine.storage.check_result import CheckResult, ceiling_remedy, confidence
from topicaudit.engine.storage.results import AttackMetrics, RunResults
from topicaudit.engine.power import TARGET_POWER


def headline_attack(results: RunResults) -> str | None:
    """The natural-document attack a run's headline figures are of: the one recommended for its shadow models
    (docs/attacks.md), else the first it scored; None without natural-document attacks."""
    if not results.attacks:
        return None
    if results.n_shadows >= 1 and recommended_attack(results.n_shadows) in results.attacks:
        return recommended_attack(results.n_shadows)
    return next(iter(results.attacks))


def strongest_canary_score(results: RunResults) -> str | None:
    """The canary score with the highest TPR at 0.1% FPR (then AUC); None without canary scores."""
    scores = results.canaries.scores if results.canaries is not None else None
    if not scores:
        return None
    return max(scores, key=lambda name: (scores[name].tpr_at_fpr_0_001 or 0, scores[name].auc or 0))


def _rates(m: AttackMetrics) -> tuple[float, float]:
    """(TPR at 0.1% FPR, AUC): ``attacks.metrics.summarize`` writes both for every attack and canary score."""
    assert m.tpr_at_fpr_0_001 is not None and m.auc is not None, "summarize writes every metric"
    return m.tpr_at_fpr_0_001, m.auc


def _tpr_sentence(who: str, tpr: float, members: int, others: int, kind: str) -> str:
    allowed = math.floor(0.001 * others)
    budget = (f"{allowed:,} of the {others:,} here" if allowed else f"with {others:,} here: not a single one")
    found = round(tpr * members)
    return (f"set to wrongly accuse at most 1 in 1,000 {kind} that were not trained on ({budget}), {who} "
            f"correctly picks out {100 * tpr:.2f}% of those that were (about {found:,} of "
            f"{members:,}).")


def _auc_sentence(auc: float, kind: str) -> str:
    return (f"a randomly chosen trained-on {kind[:-1]} scores higher than a randomly chosen other one "
            f"{100 * auc:.1f}% of the time; 50% is guessing, 100% a perfect attack.")


def figure_meanings(results: RunResults, verdict: CheckResult | None = None) -> list[tuple[str, str]]:
    """(figure, one plain-language sentence) for each headline figure of a run and its verdict."""
    out = []
    name = headline_attack(results)
    if name is not None:
        (tpr, auc), target = _rates(results.attacks[name]), results.target
        members = int(target.n_members or 0)
        others = int((results.corpus.n_docs or 0) - members) if results.corpus is not None else 0
        marked = f"{name}, the recommended attack" if name == recommended_attack(max(results.n_shadows, 1)) else name
        out.append((f"TPR {100 * tpr:.2f}% at 0.1% FPR ({marked})",
                    _tpr_sentence("the attack", tpr, members, others, "documents")))
        out.append((f"AUC {auc:.3f} ({name})", _auc_sentence(auc, "documents")))
    canary = strongest_canary_score(results)
    if canary is not None:
        c = results.canaries
        # a canary score exists only in a canary audit's record, which states its count and members
        assert c is not None and c.scores is not None and c.count is not None and c.members is not None
        canary_tpr = c.scores[canary].tpr_at_fpr_0_001
        assert canary_tpr is not None, "summarize writes every metric"
        out.append((f"canary TPR {100 * canary_tpr:.2f}% at 0.1% FPR ({canary} score)",
                    _tpr_sentence(f"the {canary} score", canary_tpr, int(c.members), int(c.count - c.members),
                                  "canaries")))
    if verdict is not None:
        bound, level = verdict.epsilon_lower_bound, confidence(verdict.alpha)
        if not math.isfinite(bound):
            out.append(("ε ≥ ∞", f"the claim's δ = {verdict.delta:g} is refuted, whatever its ε: more canary words "
                                  "no other document holds were released than that δ allows."))
        elif bound <= 0:
            out.append(("ε ≥ 0", "the tests proved no leak: this is no evidence of leakage, and none of privacy "
                                  "either."))
        else:
            out.append((f"ε ≥ {bound:.2f}",
                        f"with {level} confidence, no privacy guarantee with ε below {bound:.2f} (at δ = "
                        f"{verdict.delta:g}) can be true of this model: training on a {verdict.adjacency} can "
                        f"shift an attacker's odds that it was used by a factor of e^{bound:.2f} ≈ "
                        f"{math.exp(bound):,.3g} or more."))
        if math.isfinite(verdict.ceiling):
            out.append((f"ceiling ε = {verdict.ceiling:.2f}",
                        "the largest bound these tests could prove even if every guess were right: a claim above "
                        "it cannot be refuted by this audit, and a bound at it may understate the leak."))
        if verdict.power is not None:
            out.append((f"power {verdict.power['2x']:.0%}",
                        f"if the mechanism leaked twice as much as claimed, {verdict.power['2x']:.0%} of audits "
                        f"designed like this one would catch it ({verdict.power['10x']:.0%} if ten times as "
                        "much)."))
    return out


def next_steps(verdict: CheckResult, tested: bool) -> list[str]:
    """What to do when the audit could not say more: its bound at its ceiling, a claim above the ceiling, or a
    mechanism audit short of 95% power against a mechanism 2× less private; empty when none applies."""
    steps = []
    advice = verdict.canaries_for_ceiling
    if advice is not None and advice.get("reason") == "claim" and tested:
        steps.append(f"no outcome of this audit could refute ε = {verdict.claimed_epsilon:g} (its ceiling is "
                     f"ε = {verdict.ceiling:.2f}): raise the ceiling: {ceiling_remedy(advice)}.")
    elif advice is not None and advice.get("reason") == "saturated":
        steps.append(f"the bound is this audit's ceiling (ε = {verdict.ceiling:.2f}): every guess of its strongest "
                     "test was right, so the number of candidates capped the bound and the model may leak more; to "
                     f"measure more, raise the ceiling: {ceiling_remedy(advice)}.")
    power = verdict.power
    if tested and not verdict.violated and power is not None and power["2x"] < TARGET_POWER:
        needed = verdict.canaries_for_power
        short = (f"this audit would catch a mechanism twice as leaky as claimed in only {power['2x']:.0%} of "
                 "audits")
        if needed is not None and needed.get("count"):
            steps.append(f"{short}: {needed['count']:,} canaries would reach {needed['power']:.0%} "
                         f"(--canaries {needed['count']}, or `topicaudit check CONFIG --canaries auto`, which "
                         "sizes the audit for it).")
        elif needed is not None:
            steps.append(f"{short}: the search for a count reaching {needed['power']:.0%} stopped at "
                         f"{needed['searched_to']:,} canaries ({needed['searched_power']:.0%} in simulation); more "
                         "are needed (`topicaudit check CONFIG --canaries auto` says how many).")
        else:  # the run leaves the search (seconds of simulation) to check
            steps.append(f"{short}: `topicaudit check {verdict.run_dir}` names the canary count that would reach "
                         f"{TARGET_POWER:.0%}, and `topicaudit check CONFIG --canaries auto` sizes the audit for it.")
    return steps
