"""Everything ``check CONFIG`` can reject before the audit it would run: the claim and the flags.

An audit of a configuration takes minutes; a claim it cannot test, or a
flag it cannot honour, must fail in a second instead, before any fit. The
checks read only the configuration and the target's own guarantee (built,
never fitted), and mirror ``topicaudit.engine.verdict.run_verdict``'s messages.
"""
from __future__ import annotations

import math

from topicaudit.attacks.canaries import WORD_KINDS, resolve_kind
from topicaudit.attacks.registry import ATTACKS, unknown_attacks
from topicaudit.bounds.epsilon import check_level
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.configuration.config_checks import validate
from topicaudit.errors import UserError
from topicaudit.targets import configured_target
from topicaudit.targets.base import claim
from topicaudit.targets.privacy.guarantee import adjacency_of


def check_claim_inputs(config: Config, epsilon: float | None = None, delta: float | None = None,
                       alpha: float | None = None, attacks: list[str] | None = None,
                       names: dict[str, str] | None = None) -> None:
    """Raise a UserError now for any claim or option the audit of ``config`` could not test.

    names: how the caller calls each argument (the CLI passes its flags:
    {"epsilon": "--epsilon", ...}); the Python API's own names by default.
    """
    names = {"epsilon": "epsilon", "delta": "delta", "alpha": "alpha", "attacks": "attacks",
             "canaries": "canaries", **(names or {})}
    validate(config)
    if epsilon is not None and not (epsilon >= 0 and math.isfinite(epsilon)):
        raise UserError(f"{names['epsilon']} must be a finite number ≥ 0 (got {epsilon})")
    check_level(config.attack.alpha if alpha is None else alpha, config.attack.delta if delta is None else delta,
                names["alpha"], names["delta"])
    unknown = unknown_attacks(attacks or [])
    if unknown:
        raise UserError(f"{names['attacks']} {unknown[0]}: unknown attack; known: {', '.join(ATTACKS)}")
    target = configured_target(config.target)
    guarantee = target.guarantee()
    canaries = config.attack.canaries
    observes_step = canaries.observe != "release" and target.observes_vocabulary
    kind = resolve_kind(canaries.kind, guarantee.adjacency, claim(target.learner).relation,
                        observes_step) if canaries.count else None
    if kind == "threshold" and observes_step:
        # Threshold canaries observe the DP vocabulary step, which check holds to its own claim (as check RUN_DIR).
        guarantee = claim(target.vocabulary_step)
    claimed = None if math.isinf(guarantee.epsilon) else guarantee.epsilon
    if epsilon is None and claimed is None:
        raise UserError(f"the target ({config.target.learner}) claims no ε, so there is nothing to check; pass the "
                        f"claim to test with {names['epsilon']} (and {names['delta']})")
    adjacency = adjacency_of(guarantee.adjacency)
    word_level = adjacency is not None and not adjacency.document_level
    if word_level and epsilon is None and kind not in WORD_KINDS:
        raise UserError(
            f"the target ({config.target.learner}) claims ε = {claimed:g} per word ({adjacency.value} adjacency), "
            f"which whole-document tests cannot hold it to; audit it with word canaries ({names['canaries']} M, kind "
            f"auto, word or paired-word), or pass a document-level claim (group privacy: L·ε for documents of L words) "
            f"with {names['epsilon']}")
    word_claim = word_level and (epsilon is None or kind in WORD_KINDS)
    if kind in WORD_KINDS and not word_claim and not config.attack.shadows:
        raise UserError("this audit has only word canaries, which test word-level claims, and the claim is "
                        "document-level: use document canaries ([attack.canaries] kind = \"unique-word\") "
                        "or shadow models")
    if attacks:
        if not config.attack.shadows:
            raise UserError(f"{names['attacks']} chooses attacks on the natural documents, but this audit "
                            "trains no shadow model ([attack] shadows = 0): drop it, or audit with shadows")
        missing = [a for a in attacks if config.attack.attacks and a not in config.attack.attacks]
        if missing:
            raise UserError(f"{names['attacks']} {missing[0]}: this audit does not report that attack "
                            f"([attack] attacks = {', '.join(config.attack.attacks)}); add it there or "
                            "choose another")
