"""Privacy claims as tests: compare an audit's empirical ε lower bounds with a claimed ε.

A claim (ε, δ) is *violated* when the data prove ε_LB > ε at confidence
1 − α. The bounds are one-run bounds, valid for a single training in which
each candidate was included independently with probability ½: the natural
documents of the LiRA target (``topicaudit.attacks.registry.epsilon_lower_bounds``) and the
canaries of the canary release (``topicaudit.attacks.canaries``). α is split over every
test (Bonferroni), so the largest bound is itself valid and a correct
mechanism is flagged in at most α of audits.

A claim is tested by the experiments of its adjacency: a document-level claim
by natural documents and document canaries, a word-level one (``word``,
``local-word``) by word canaries. CONSISTENT means "not refuted", never
"proven private": the result also states the audit's ceiling, the largest ε
any outcome of its coins could have proven.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from topicaudit.attacks.canaries import WORD_KINDS, anchored_positions
from topicaudit.attacks.mechanism import RELEASED_FRESH, neutral_fresh_scores, simulate_scores
from topicaudit.attacks.registry import bounded_attacks
from topicaudit.bounds.epsilon import EpsilonBound, Method, check_level
from topicaudit.bounds.one_run import OneRunAuditor, delta_tail_bound
from topicaudit.bounds.verdict import (
    THREAT_MODELS,
    VALID_BOUNDS,
    bound_ceiling,
    bound_tests,
    canary_verdict_scores,
    guess_family,
)
from topicaudit.engine.config import Config, config_from_dict, load_config, run_config
from topicaudit.engine.preflight import check_claim_inputs
from topicaudit.engine.integrity import verify_run_directory
from topicaudit.engine.results import CURVE, DELTA_TAIL, CheckResult, GuaranteeInfo, MechanismInfo
from topicaudit.engine.run import execute_run
from topicaudit.engine.rundir import atomic_write_text, read_arrays, read_results
from topicaudit.errors import UserError
from topicaudit.targets.learners.dpsu import gaussian_step_profile
from topicaudit.targets.privacy.composition import privacy_profile
from topicaudit.targets.privacy.guarantee import adjacency_of

DEFAULT_DELTA = 1e-5  # as [attack] delta, for runs that recorded none
DEFAULT_ALPHA = 0.05  # as [attack] alpha, for runs that recorded none
# The natural-document tests keep the one-run bound and guesses the run itself reports.
NATURAL_METHODS = (Method.ONE_RUN,)
# Simulated audits per power estimate, and their seed (the estimate is reproducible).
POWER_REPLICATES = 20
POWER_SEED = 20240613



def canary_evidence(run_dir: Path) -> tuple[dict[str, np.ndarray], np.ndarray, str] | None:
    """Canary scores joined to their coins by canary id, and the canaries' kind; None without canaries."""
    found = _canary_files(run_dir)
    return None if found is None else found[:3]


def _canary_files(run_dir: Path) -> tuple[dict[str, np.ndarray], np.ndarray, str, np.ndarray | None] | None:
    """``canary_evidence``, and each threshold canary's fixed one-word documents (canaries.npz ``anchors``, None
    for other kinds), from one read of canaries.npz."""
    coins_path, scores_path = run_dir / "canaries.npz", run_dir / "canary_scores.npz"
    if not coins_path.exists():
        return None
    if not scores_path.exists():
        raise UserError(f"{run_dir} has canaries but no canary_scores.npz: the run did not finish; "
                        "rerun the same command to complete it")
    canaries, scores = read_arrays(coins_path), read_arrays(scores_path)
    ids, score_ids = canaries["ids"], scores.pop("ids")
    if ids.shape != score_ids.shape or not np.array_equal(np.sort(ids), np.sort(score_ids)) \
            or np.unique(ids).size != ids.size:
        raise UserError(f"{run_dir}: the canary scores do not match the canaries' coins (their ids differ); "
                        "the run directory was altered: delete canary_scores.npz and rerun the audit")
    order = np.argsort(score_ids)[np.argsort(np.argsort(ids))]  # the score row of each canary id, in coin order
    return ({name: values[order] for name, values in scores.items()}, canaries["coins"], str(canaries["kind"]),
            canaries.get("anchors"))


def check_run(run_dir: str | Path, epsilon: float | None = None, delta: float | None = None,
              alpha: float | None = None, attacks: list[str] | None = None) -> CheckResult:
    """Check a finished run directory against a claim (default: the target's own guarantee, the run's α).

    attacks: whose bounds on the natural documents to use (α split over every
    test); default lira_online and lira_offline (docs/attacks.md).
    """
    run_dir = Path(run_dir)
    verify_run_directory(run_dir)  # manifest hashes, types and shapes, truth and canary order (or exit 2)
    results_path, scores_path = run_dir / "results.json", run_dir / "scores.npz"
    found = _canary_files(run_dir) if results_path.exists() else None
    canaries, anchors = (None, None) if found is None else (found[:3], found[3])
    if not results_path.exists() or not (scores_path.exists() or canaries):
        raise UserError(f"{run_dir} is not a finished topicaudit run (no results.json with scores.npz or "
                        "canary scores); run `topicaudit run` first or pass a configuration file")
    results = read_results(results_path)
    target, guarantee = results.target, results.target.guarantee
    learner = target.learner
    word_canaries = canaries is not None and canaries[2] in WORD_KINDS
    adjacency = adjacency_of(guarantee.adjacency)
    word_claim = adjacency is not None and not adjacency.document_level and (epsilon is None or word_canaries)
    observe = results.canaries.observe if results.canaries is not None else None
    recorded_mechanism = results.canaries.mechanism if results.canaries is not None else None
    if recorded_mechanism is not None and recorded_mechanism.stage == "vocabulary" and observe == "mechanism":
        # The canaries observed the DP vocabulary step: by default, hold it to its own claim.
        guarantee = dataclasses.replace(guarantee, epsilon=recorded_mechanism.parameters["epsilon"],
                                        delta=recorded_mechanism.parameters["delta"], event=None)
        learner = f"{target.vocabulary_step} (the vocabulary step's own claim)"
    if epsilon is None:
        epsilon = guarantee.epsilon
        if epsilon is None:
            raise UserError(f"the target of {run_dir} ({learner}) claims no ε; "
                            "pass the claim to test with --epsilon (and --delta)")
    if word_claim and not word_canaries:
        raise UserError(
            f"the target of {run_dir} ({learner}) claims ε = {epsilon:g} per word ({guarantee.adjacency} "
            "adjacency), which whole-document tests cannot hold it to; audit it with word canaries "
            "(--canaries M, kind auto or word), or pass a document-level claim (group privacy: L·ε for "
            "documents of L words) with --epsilon"
        )
    recorded = results.recorded_bounds
    if delta is None:
        delta = guarantee.delta if guarantee.epsilon is not None else (
            recorded.delta if recorded is not None and recorded.delta is not None else DEFAULT_DELTA)
    if alpha is None:
        alpha = (round(1 - recorded.confidence, 12) if recorded is not None and recorded.confidence is not None
                 else DEFAULT_ALPHA)
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise UserError(f"--epsilon must be a finite number ≥ 0 (got {epsilon})")
    check_level(alpha, delta, "--alpha", "--delta")

    # (name prefix, scores, labels, methods, guess family) of every test the claim's adjacency admits
    sources, observed, mechanism, shape = [], {}, None, None
    if canaries is not None and word_canaries == word_claim:
        observe = observe or "release"  # runs from before canaries could observe a mechanism
        methods = tuple(VALID_BOUNDS)
        mechanism = recorded_mechanism if observe == "mechanism" else None
        if mechanism is not None and epsilon == guarantee.epsilon:
            shape = claim_shape(guarantee, mechanism, anchors)
            if shape is not None:
                # The curve test subsumes Steinke et al.'s bound here; dropping it leaves α to the tests that bite.
                methods = (Method.FDP_PURE, shape.method)
        if mechanism is not None and mechanism.fresh_released is not None:
            methods += (DELTA_TAIL,)
        sources.append(("canaries/", canary_verdict_scores(canaries[0], observe), canaries[1], methods,
                        guess_family))
        observed["canaries/"] = f"canaries on {THREAT_MODELS[observe]}"
    if scores_path.exists() and not word_claim:
        natural = read_arrays(scores_path)
        if "is_member" not in natural:
            raise UserError(f"{scores_path} lacks is_member; it was not written by this version of "
                            "topicaudit — rerun the audit")
        names = [n for n in natural if n not in ("is_member", "doc_index")]
        missing = [a for a in attacks or () if a not in names]
        if missing:
            raise UserError(f"--attack {missing[0]}: {run_dir} has no scores of that attack; it has: {', '.join(names)}")
        chosen = attacks or bounded_attacks(names)
        if not chosen:
            raise UserError(f"{scores_path} holds no attack scores; rerun the audit")
        sources.append(("natural/", {a: natural[a] for a in chosen}, natural["is_member"],
                        NATURAL_METHODS, None))
        observed["natural/"] = f"natural documents on {THREAT_MODELS['release']}"
    if not sources:
        raise UserError(f"{run_dir} has only word canaries, which test word-level claims; the target claims "
                        f"{guarantee.adjacency or 'nothing'}-level privacy: rerun with document canaries "
                        "([attack.canaries] kind = \"unique-word\") or shadow models")
    alpha_each = alpha / sum(len(scores) * len(methods) for _, scores, _, methods, _ in sources)
    bounds, ceiling, signal = {}, 0.0, False
    for prefix, scores, labels, methods, family in sources:
        if labels.all() or not labels.any():
            continue  # one class only: these coins prove nothing
        valid = [m for m in methods if m not in SHAPED]
        tests = bound_tests(scores, labels, delta, alpha_each, valid, family)
        if shape is not None and shape.method in methods:
            tests.update(shape.tests(scores, labels, float(epsilon), alpha_each))
        if DELTA_TAIL in methods:
            released, fresh = mechanism.fresh_released
            tests[f"mechanism:{DELTA_TAIL}"] = delta_tail_bound(released, fresh, float(delta), alpha_each)
        bounds.update({prefix + name: b for name, b in tests.items()})
        ceiling = max(ceiling, bound_ceiling(labels, delta, alpha_each, valid, family))
        signal = signal or any(separates(values, labels, alpha) for values in scores.values())
    if not bounds:
        raise UserError(f"{run_dir}: every candidate landed on the same side of its coin; nothing can be tested")
    power = None
    if mechanism is not None and (mechanism.kind != "dpsu" or mechanism.anchors is not None):
        labels = sources[0][2]
        methods = [m for m in sources[0][3] if m not in SHAPED]
        power = simulated_power(mechanism, labels, float(epsilon), float(delta), alpha_each, shape, methods)
    result = CheckResult(run_dir, float(epsilon), float(delta), float(alpha), bounds, ceiling,
                         "word" if word_claim else "document", observed, False, power)
    # Tied scores never had a chance; scores at chance have none either, unless a simulation of the claimed
    # mechanism says what this design can catch (a correct mechanism audited well is often at chance).
    tied = all(np.all(v == v[0]) for _, scores, _, _, _ in sources for v in scores.values())
    no_signal = not result.violated and (tied or (not signal and power is None))
    return dataclasses.replace(result, no_signal=no_signal)


def claimed_profile(guarantee: GuaranteeInfo, mechanism: MechanismInfo) -> tuple[np.ndarray, np.ndarray] | None:
    """The (ε_i, δ_i) pairs of the claimed mechanism's whole curve where its shape is known, else None.

    Gaussian mechanisms have one: a learner's from its dp-accounting event, a
    Gaussian DP vocabulary step's from its σ (its event states only (ε, δ)).
    """
    if mechanism.stage == "vocabulary":
        p = mechanism.parameters
        if p.get("noise") != "gaussian":
            return None
        return gaussian_step_profile(float(p["scale"]), float(p["epsilon"]), float(p["delta"]))
    return privacy_profile(guarantee.guarantee()) if guarantee.event else None


@dataclass(frozen=True)
class ClaimShape:
    """The claimed mechanism's own trade-off curve, where its shape is known: tested beside the (ε, δ) family.

    Either a ``profile`` of (ε_i, δ_i) pairs, tested on every canary by the
    f-DP curve test (``Method.FDP_CURVE``), or, for a Gaussian DP vocabulary
    step audited with anchored canaries, the Gaussian mechanism itself: an
    anchored canary's word is a candidate with or without it, so the step
    releases its weight through N(0, σ²) at L2 sensitivity 1, exactly μ-GDP
    with μ = 1/σ, and the threshold (post-processing) spends none of its δ
    there; the fresh canaries' δ-tail test holds that δ. The μ-GDP test
    (``Method.FDP_GDP``) on the anchored canaries reads μ_LB as ε at δ/2,
    the point the step's σ was calibrated to, so it exceeds the claimed ε
    exactly when μ_LB > 1/σ.
    """

    method: Method
    profile: tuple[np.ndarray, np.ndarray] | None = None
    gaussian_delta: float = 0.0     # δ at which μ-GDP is read as ε (half the step's δ)
    anchored: np.ndarray | None = None  # (m,) bool: the canaries the μ-GDP test scores

    def tests(self, scores: dict[str, np.ndarray], labels: np.ndarray, claimed_epsilon: float, alpha_each: float,
              anchored: np.ndarray | None = None) -> dict[str, EpsilonBound]:
        """This shape's test of each score; ``anchored`` replaces the run's own mask (simulated audits)."""
        if self.profile is not None:
            return curve_tests(scores, labels, self.profile, claimed_epsilon, alpha_each, guess_family)
        keep = self.anchored if anchored is None else anchored
        out = {}
        for name, values in scores.items():
            k_plus, k_minus = guess_family(values[keep])
            bound = OneRunAuditor(values[keep], labels[keep]).bound(Method.FDP_GDP, self.gaussian_delta, alpha_each,
                                                                    k_plus=k_plus, k_minus=k_minus)
            out[f"{name}:{Method.FDP_GDP}"] = dataclasses.replace(bound, details={
                **bound.details, "canaries": "anchored", "scored": int(keep.sum()),
                "assumes": "the step's mechanism is the claimed one: Gaussian noise at L2 sensitivity 1"})
        return out


# The tests a ClaimShape or the δ-tail run, outside the (ε, δ) family ``bound_tests`` computes.
SHAPED = (CURVE, Method.FDP_GDP, DELTA_TAIL)


def claim_shape(guarantee: GuaranteeInfo, mechanism: MechanismInfo, anchors: np.ndarray | None) -> ClaimShape | None:
    """The claimed mechanism's curve test for this audit, or None where its shape is not known."""
    p = mechanism.parameters or {}
    if mechanism.stage == "vocabulary" and p.get("noise") == "gaussian" and anchors is not None and \
            (anchors > 0).sum() >= 2:
        return ClaimShape(Method.FDP_GDP, gaussian_delta=float(p["delta"]) / 2.0, anchored=anchors > 0)
    profile = claimed_profile(guarantee, mechanism)
    return ClaimShape(CURVE, profile=profile) if profile is not None else None


def separates(scores: np.ndarray, labels: np.ndarray, alpha: float) -> bool:
    """Whether the scores rank members above non-members better than chance (one-sided rank test at α).

    Tied scores never do; an audit whose every test fails this has no
    signal, and its verdict must not read as a test that could have refuted.
    """
    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-np.inf)
    if np.all(scores == scores[0]) or labels.all() or not labels.any():
        return False
    return bool(stats.mannwhitneyu(scores[labels], scores[~labels], alternative="greater").pvalue < alpha)


def curve_tests(scores: dict[str, np.ndarray], labels: np.ndarray, profile, claimed_epsilon: float,
                alpha_each: float, family) -> dict[str, EpsilonBound]:
    """The f-DP one-run test of the claimed mechanism's own trade-off curve, for each score."""
    out = {}
    for name, values in scores.items():
        k_plus, k_minus = family(values)
        out[f"{name}:{CURVE}"] = OneRunAuditor(values, labels).curve(profile, claimed_epsilon, alpha_each,
                                                                     k_plus=k_plus, k_minus=k_minus)
    return out


def simulated_power(mechanism: MechanismInfo, labels: np.ndarray, epsilon: float, delta: float, alpha_each: float,
                    shape: ClaimShape | None, methods, replicates: int = POWER_REPLICATES) -> dict[str, float]:
    """The share of simulated audits of this design that refute a mechanism 2× and 10× less private.

    The claimed mechanism is simulated with its privacy loss multiplied by the
    factor, scored and bounded exactly as the audit was (same coins' count,
    same tests at the same α); a refutation is a bound above the claimed ε.
    Each factor draws m scores of trained and m of untrained canaries once;
    every replicate tosses its own coins and takes its members' and
    non-members' scores from those pools without replacement (a tenth of the
    cost of drawing each replicate afresh, which 100,000 canaries over 200
    steps would make the slowest part of ``check``).

    A DP vocabulary step's loss is multiplied two ways, its noise divided or
    every document's budget multiplied (anchors included, up to the cap Γ);
    the estimate is the smaller share of the two. Both forms of a factor draw
    the same random numbers, so they differ only where the mechanisms do (the
    cap, the fresh canaries' releases) and the minimum is not biased down by
    the simulation's own noise.
    """
    rng = np.random.default_rng(POWER_SEED)
    m = labels.size
    parameters = {**mechanism.parameters, "anchors": mechanism.anchors or 0}
    anchored = anchored_positions(m) if mechanism.kind == "dpsu" else np.ones(m, bool)  # as simulate_scores places them
    forms = ("noise", "budget") if mechanism.kind == "dpsu" else ("noise",)
    out = {}
    for factor, form in ((f, form) for f in (2.0, 10.0) for form in forms):
        if mechanism.kind == "dpsu":
            rng = np.random.default_rng((POWER_SEED, int(factor)))
        trained, untrained = (simulate_scores(mechanism.kind, parameters, np.full(m, present), int(mechanism.tokens),
                                              factor, rng, paired=bool(mechanism.paired), k=int(mechanism.topics),
                                              form=form)
                              for present in (True, False))
        hits = 0
        for _ in range(replicates):
            coins = rng.random(m) < 0.5
            members = rng.choice(m, int(coins.sum()), replace=False)
            others = rng.choice(m, int((~coins).sum()), replace=False)
            values, picked = np.empty(m), np.empty(m, bool)
            values[coins], values[~coins] = trained[members], untrained[others]
            picked[coins], picked[~coins] = anchored[members], anchored[others]
            if mechanism.kind == "dpsu":  # the fresh canaries' neutral score is the mixed anchored scores' median
                values = neutral_fresh_scores(values, picked)
            scores = {"mechanism": values}
            tests = bound_tests(scores, coins, delta, alpha_each, methods)
            if mechanism.kind == "dpsu":
                released = int((values >= RELEASED_FRESH).sum())
                tests["delta-tail"] = delta_tail_bound(released, m // 2, delta, alpha_each)
            if shape is not None:
                tests.update(shape.tests(scores, coins, epsilon, alpha_each, anchored=picked))
            hits += max(b.epsilon for b in tests.values()) > epsilon
        out[f"{factor:g}x"] = min(hits / replicates, out.get(f"{factor:g}x", 1.0))
    out["replicates"] = replicates
    return out


def own_claim_check(run_dir: str | Path) -> tuple[CheckResult, bool]:
    """The run's bounds and ceiling exactly as ``check`` computes them; and whether its own claim was tested.

    The one code path behind the run summary, the report's verdict and
    ``check``: against the target's own claim when these tests can hold it to
    it, else at no claim (ε = 0 stands in; the bounds do not depend on it).
    """
    try:
        return check_run(run_dir), True
    except UserError:
        return check_run(run_dir, epsilon=0.0), False  # no claim, or one only word canaries could test


def write_reports(result: CheckResult, json_path: Path | None, junit_path: Path | None) -> list[Path]:
    written = []
    for path, text in ((json_path, json.dumps(result.to_json(), indent=2) + "\n"),
                       (junit_path, result.to_junit())):
        if path is not None:
            path = Path(path)
            if not path.parent.is_dir():
                raise UserError(f"cannot write {path}: directory {path.parent} does not exist")
            try:
                atomic_write_text(path, text)
            except OSError as error:
                raise UserError(f"cannot write {path}: {error.strerror or error}; choose another place "
                                "(--json, --junit)") from None
            written.append(path)
    return written


def assert_privacy(config, epsilon: float | None = None, delta: float | None = None, alpha: float | None = None,
                   output: str | Path | None = None, canaries: int | None = None) -> CheckResult:
    """Audit a configuration (run or resume it) and fail unless it is consistent with its claim.

    For a project's own tests: ``assert_privacy("audit.toml", epsilon=3)``.
    config: a ``Config``, a TOML path or a dict of the TOML's content.
    canaries: the number of canaries ([attack.canaries] count) when given.
    Raises AssertionError with the refuting bound when the claim is violated.
    """

    if isinstance(config, dict):
        config = config_from_dict(config)
    elif not isinstance(config, Config):
        config = load_config(config)
    config = run_config(config)
    if output is not None:
        config.output = str(output)
    if canaries is not None:
        config.attack.canaries.count = canaries
    check_claim_inputs(config, epsilon, delta, alpha)  # a claim it cannot test fails before any fit
    execute_run(config, quiet=True)
    result = check_run(config.run_dir, epsilon, delta, alpha)
    if result.violated:
        raise AssertionError(result.message())  # not a bare assert: ``python -O`` would strip it
    return result
