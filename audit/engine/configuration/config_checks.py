"""``validate``: every check of a whole configuration that needs no data, for either command (numbers in range,
names known, the output writable); the single checks it shares with the flags are in
:mod:`topicaudit.engine.configuration.validation`.
"""
from __future__ import annotations

from topicaudit.attacks.ranking import check_rank_by
from topicaudit.attacks.registry import ATTACKS, unknown_attacks
from topicaudit.bounds.epsilon import check_level
from topicaudit.engine.configuration.config import CANARY_KINDS, OBSERVE, AuditConfig, BaseConfig, Config, run_config
from topicaudit.engine.configuration.validation import (MAX_CANARIES, MAX_CANARY_LENGTH, MAX_NUM_CPUS, MAX_WORDS,
                                                       check_at_most, check_run_config, check_shadows)
from topicaudit.errors import UserError
from topicaudit.memory import check_fits_in_memory
from topicaudit.targets import LEARNERS
from topicaudit.targets.params import check_topics
from topicaudit.targets.plugins import LEARNER_GROUP, is_class_path, registered

# The least memory one canary takes (its id, coin, scores and row of the training set), to refuse a count that
# cannot fit before anything is allocated.
CANARY_BYTES = 64


def validate(config: BaseConfig) -> None:
    """Checks that need no data, for either variant: numbers in range, names known, the output writable."""
    for table, key in config.PATHS:
        value = getattr(getattr(config, table), key)
        if isinstance(value, str) and not value.strip():  # `path = ""` read the configuration's own folder
            raise UserError(f"[{table}] {key} is empty; give a file path, or remove the key")
    if not 0 < config.attack.tol < 1:
        raise UserError(f"[attack] tol must be in (0, 1) (got {config.attack.tol})")
    if config.ray.num_cpus < 0:
        raise UserError(f"[ray] num_cpus (--num-cpus) must be ≥ 0 (got {config.ray.num_cpus})")
    check_at_most(config.ray.num_cpus, MAX_NUM_CPUS, "[ray] num_cpus (--num-cpus)", "it sizes the local Ray "
                  "instance, and more CPUs than shadow models is never used (10**12 made Ray time out starting, "
                  "exit 4); 0 uses every core")
    if isinstance(config, AuditConfig):
        _validate_audit(config)
    else:
        _validate_run(run_config(config))
    check_run_config(config)  # seed range, writable output, [synthetic] sizes: before any work


def _validate_run(config: Config) -> None:
    canaries = config.attack.canaries
    check_shadows(config.attack.shadows, "[attack] shadows (--shadows)", 0 if canaries.count else 2,
                  "; 0 is allowed with canaries ([attack.canaries] count or --canaries), whose scores need no "
                  "shadow model")
    if canaries.count < 0:
        raise UserError(f"[attack.canaries] count must be ≥ 0 (got {canaries.count}); 0 means no canaries")
    # 2**63 reached NumPy as "Maximum allowed dimension exceeded"
    check_at_most(canaries.count, MAX_CANARIES, "[attack.canaries] count (--canaries)",
                  "each canary is a document added to the training set")
    check_fits_in_memory(canaries.count * CANARY_BYTES, f"[attack.canaries] count (--canaries) = {canaries.count}",
                         "audit fewer canaries")
    if canaries.observe not in OBSERVE:
        raise UserError(f"[attack.canaries] observe must be one of {', '.join(OBSERVE)} (got {canaries.observe!r})")
    if canaries.kind not in CANARY_KINDS:
        raise UserError(f"[attack.canaries] kind must be one of {', '.join(CANARY_KINDS)} (got {canaries.kind!r})")
    check_shadows(canaries.shadows, "[attack.canaries] shadows", 0)
    if canaries.length < 0:
        raise UserError(f"[attack.canaries] length must be ≥ 0 (got {canaries.length}); 0 picks it from the "
                        "learner's document cap or the corpus")
    check_at_most(canaries.length, MAX_CANARY_LENGTH, "[attack.canaries] length", "it is the tokens of one "
                  "canary document")
    if not config.target.test_under_noise >= 1.0:
        raise UserError(f"[target] test_under_noise must be ≥ 1 (got {config.target.test_under_noise})")
    check_topics(config.target.k, "[target] k")
    if config.attack.shadow_vocabulary not in ("target", "own"):
        raise UserError(
            f"[attack] shadow_vocabulary must be 'target' or 'own' (got {config.attack.shadow_vocabulary!r})"
        )
    check_level(config.attack.alpha, config.attack.delta, "[attack] alpha", "[attack] delta")
    unknown = unknown_attacks(config.attack.attacks)
    if unknown:
        raise UserError(f"[attack] attacks: unknown attack {unknown[0]!r}; known: {', '.join(ATTACKS)}")
    if config.corpus.max_words < 0:
        raise UserError(f"[corpus] max_words must be ≥ 0 (got {config.corpus.max_words}); 0 keeps every word")
    check_at_most(config.corpus.max_words, MAX_WORDS, "[corpus] max_words", "it is a vocabulary size; 0 keeps "
                  "every word")


def _validate_audit(config: AuditConfig) -> None:
    m = config.model
    if m.phi is None:
        raise UserError("no model to audit: give PHI on the command line, or [model] phi in the configuration")
    for role, flag in (("corpus", "candidates"), ("reference", "reference")):
        if getattr(config, role).path is None:
            raise UserError(f"[{role}] path is missing: the {flag} documents (--{flag} PATH)")
    if m.learner is not None and m.learner not in LEARNERS and not is_class_path(m.learner) \
            and m.learner not in registered(LEARNER_GROUP):
        raise UserError(f"unknown learner {m.learner!r} ([model] learner, --learner); known learners: "
                        f"{', '.join([*LEARNERS, *registered(LEARNER_GROUP)])}, or \"package.module:Class\"")
    check_shadows(config.attack.shadows, "[attack] shadows (--shadows)")
    if m.k is not None:
        check_topics(m.k, "[model] k (--k)", "by default it is Φ's number of rows")
    check_rank_by(config.ranking.by, "[ranking] by (--rank-by)")
    for role in ("corpus", "reference"):
        if getattr(config, role).max_words:
            raise UserError(f"[{role}] max_words is for `topicaudit run`: an audit counts its documents over Φ's "
                            "vocabulary; remove it")
    if config.ranking.top < 0:
        raise UserError(f"[ranking] top (--top) must be ≥ 0 (got {config.ranking.top})")
