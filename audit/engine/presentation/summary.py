"""The one-screen summary ``topicaudit run`` prints: the attacks' metrics, the canaries', and the stored verdict.

- :func:`summary_table`: the whole summary, from a run's results and its stored verdict;
- :func:`verdict_lines`: its verdict block, the bound, ceiling or power and the verdict as ``check`` gives it.

Both read the typed results (``topicaudit.engine.storage.results``, ``.check_result``) and the
words of ``topicaudit.engine.presentation.guidance``; nothing is computed here.
"""
from __future__ import annotations

from topicaudit.engine.presentation.guidance import figure_meanings, headline_attack, next_steps
from topicaudit.engine.storage.check_result import CheckResult, confidence
from topicaudit.engine.storage.results import RunResults


def summary_table(results: RunResults, verdict: tuple[CheckResult, bool] | None = None) -> str:
    """The one-screen summary printed at the end of a run.

    verdict: the stored verdict (``RunResults.own_verdict``: result, claim tested), so the bound and
    ceiling printed are ``check``'s own; without it no bound is printed.
    """
    target, guarantee, corpus = results.target, results.target.guarantee, results.corpus
    assert corpus is not None, "every run writes its corpus (engine/run.py)"
    claim = "none" if guarantee.epsilon is None else f"{guarantee.epsilon:g}"
    if guarantee.epsilon is not None and guarantee.adjacency:
        claim += f" ({guarantee.adjacency}-level, {guarantee.basis})"
    lines = [f"{corpus.source}"]
    columns = f"{'AUC':>8}{'TPR@0.1%FPR':>14}{'TPR@1%FPR':>12}"
    if results.attacks:
        recommended = headline_attack(results)
        lines += [
            f"  {corpus.n_docs} documents, target vocabulary {target.vocabulary_size} words, "
            f"{target.n_members} members; {target.learner} k={target.k}; "
            f"{results.n_shadows} shadow models",
            "",
            f"  {'attack':<26}{columns}",
        ]
        for name, m in results.attacks.items():
            mark = (f"  ← recommended for {results.n_shadows} shadow model{'s' * (results.n_shadows != 1)}"
                    if name == recommended and results.n_shadows >= 1 else "")
            lines.append(f"  {name:<26}{m.auc:>8.3f}{m.tpr_at_fpr_0_001:>13.2%}{m.tpr_at_fpr_0_01:>12.2%}{mark}")
    if results.canaries is not None:
        c = results.canaries
        lines += ["", f"  canaries: {c.count} {c.kind} ({c.length} tokens each), {c.members} in the "
                      f"canary release beside {c.fixed_training_documents} fixed documents; "
                      f"{target.learner} k={target.k}"]
        if c.scores:
            lines.append(f"  {'canary score':<26}{columns}")
        for name, m in (c.scores or {}).items():
            lines.append(f"  {'canary ' + name:<26}{m.auc:>8.3f}{m.tpr_at_fpr_0_001:>13.2%}"
                         f"{m.tpr_at_fpr_0_01:>12.2%}")
        lines.append(f"  canaries scored on {c.threat_model or 'the released Φ'}")
    if verdict is not None:
        lines += ["", *verdict_lines(*verdict, claim)]
    meanings = figure_meanings(results, verdict[0] if verdict is not None else None)
    if meanings:
        lines += ["", "  what the figures mean:", *(f"    {figure}: {sentence}" for figure, sentence in meanings)]
    for message in results.warnings:
        lines.append(f"  warning from a Ray worker: {message}")
    if target.test_under_noise is not None:
        lines.append(f"  TEST MECHANISM: noise divided by {target.test_under_noise:g}, claim unchanged")
    if target.test_bug is not None:
        lines.append(f"  TEST MECHANISM: bug {target.test_bug!r} planted, claim unchanged; never release it")
    t = results.timings_s or {}
    parts = [f"{label} {t[key]:.1f} s" for key, label in
             (("fit_wall", "fits and their statistics"), ("statistics", "statistics of reloaded models"),
              ("canary_fit_wall", "canary fit")) if t.get(key)]
    lines += ["", f"  wall time {t['total']:.1f} s ({', '.join(parts)})"]
    return "\n".join(lines)


def verdict_lines(result: CheckResult, claim_tested: bool, claim: str) -> list[str]:
    """The bound, the ceiling and the verdict, as ``check`` computes them (α split over every test)."""
    level = f"{result.adjacency}-level, {confidence(result.alpha)} confidence, δ = {result.delta:g}"
    strength = (f"power against a mechanism 2× / 10× less private: {result.power['2x']:.0%} / "
                f"{result.power['10x']:.0%} of simulated audits" if result.power is not None
                else f"this audit can prove at most {result.ceiling:.2f}")
    lines = [f"  empirical ε ≥ {result.epsilon_lower_bound:.3f} ({result.strongest_attack}; {level}); {strength}",
             f"  claimed ε: {claim}"]
    if claim_tested and claim.split(" ")[0] != f"{result.claimed_epsilon:g}":
        # A DP vocabulary step audited by threshold canaries is held to its own claim, not the pipeline's.
        lines[-1] = (f"  claimed ε: {result.claimed_epsilon:g} (the vocabulary step's own claim, tested here; "
                     f"the pipeline claims {claim})")
    if claim_tested:
        lines.append(f"  {result.message().split(':', 1)[0]} (topicaudit check gives the same verdict)")
        lines += [f"  this design cannot see {family}" for family in result.unseen if not result.violated]
    else:
        lines.append("  no claim tested here: `topicaudit check RUN_DIR --epsilon E` tests one")
    lines += [f"  next: {step}" for step in next_steps(result, claim_tested)]
    return lines
