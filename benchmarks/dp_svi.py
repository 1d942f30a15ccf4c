"""Park et al. DP-SVI: utility against ε on KOS, the accountants compared, the LiRA audits.

Usage (from the repository root):

    .venv/bin/python benchmarks/dp_svi.py [--sections perplexity,accountants,audits] [--seeds 2]

Appends one Markdown section (tables and the settings that produced them) to
benchmarks/results/dp_svi.md.

1. **Perplexity against ε on KOS.** A seeded 90/10 split of KOS's documents;
   DPStochasticVariationalLDA (k = 10, δ = 1e-5, RDP accountant, N = 200
   tokens) on the 90 %, at ε ∈ {0.5, 1, 2, 4, 8, 16, ∞} and three settings:
   *small batch* q = 0.05, J = 200; *large batch* q = 0.5, J = 20 (both 10
   passes on average, per-document clip C = 5, so Δ = 5); and *no clipping*
   (Park et al.'s sensitivity N = 200) with the large-batch schedule. Two
   held-out perplexities with Φ fixed on the 10 %: ``topicaudit.attacks.utility.
   heldout_perplexity`` (θ̂ and the score from the same words) and document
   completion (θ̂ by maximum likelihood, ``topicaudit.attacks.zeta.solve_zeta``, on a
   random half of each document's tokens, mixed 99:1 with uniform; scored on
   the other half). Mean over seeds; batch VB LDA (``lda``) and the uniform
   Φ as references.
2. **Accountants at equal noise.** ε of J Poisson-subsampled Gaussian steps by
   every accountant of ``topicaudit.targets.privacy.dp_svi_accounting`` for the settings of Park et
   al.'s experiments (D = 400,000; 2016a: one epoch of S ∈ {5k, 10k, 20k},
   σ ∈ {1, 1.24, 2}; 2016b: 160,000 documents in minibatches of S ∈ {10,
   ..., 400}, σ = 1, δ = 1e-4) and this benchmark's KOS settings; then the
   noise multiplier each accountant needs for 2016b's target
   (ε, δ) = (1, 1e-4).
3. **LiRA audits**: the results.json of runs/dp_svi_kos_* (made by
   ``topicaudit run benchmarks/configs/dp_svi_kos_*.toml --output runs/...``),
   tabulated if present.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results" / "dp_svi.md"

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.privacy.dp_svi_accounting import ACCOUNTANTS, calibrate_noise_multiplier, compute_epsilon

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, math.inf)
SETTINGS = {
    "small batch (q=0.05, J=200, C=5)": {"sampling_rate": 0.05, "n_iter": 200, "clip_norm": 5.0},
    "large batch (q=0.5, J=20, C=5)": {"sampling_rate": 0.5, "n_iter": 20, "clip_norm": 5.0},
    "no clipping (q=0.5, J=20, Δ=N=200)": {"sampling_rate": 0.5, "n_iter": 20, "clip_norm": None},
}


def fmt(x, digits=3):
    if x is None:
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    if isinstance(x, float):
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        return f"{x:.{digits}g}"
    return str(x)


def pct(x) -> str:
    return f"{100 * x:.2f} %"


def table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -- 1. perplexity --------------------------------------------------------------------------------

def kos_split(seed=0, test_fraction=0.1):
    from topicaudit.inputs.corpus import load_corpus

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X = load_corpus(DATA / "kos" / "docword.kos.txt").X.tocsr()
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
    n_test = round(test_fraction * X.shape[0])
    train, test = np.sort(perm[n_test:]), np.sort(perm[:n_test])
    Xte = X[test]
    counts = Xte.data.astype(np.int64)
    observed = rng.binomial(counts, 0.5).astype(np.float64)
    first = sp.csr_matrix((observed, Xte.indices.copy(), Xte.indptr.copy()), shape=Xte.shape)
    second = sp.csr_matrix(((counts - observed).astype(np.float64), Xte.indices.copy(), Xte.indptr.copy()),
                           shape=Xte.shape)
    first.eliminate_zeros()
    second.eliminate_zeros()
    return X[train], Xte, first, second


def completion_perplexity(phi, first, second) -> float:
    from topicaudit.attacks.zeta import evaluate_theta, solve_zeta

    theta = solve_zeta(phi, first, warn=False).theta
    theta = 0.99 * theta + 0.01 / phi.shape[0]
    f, _ = evaluate_theta(np.asarray(phi, dtype=np.float64), second, theta)
    return float(np.exp(-f.sum() / second.sum()))


def fixed_phi_perplexity(phi, Xte) -> float | None:
    try:
        from topicaudit.attacks.utility import heldout_perplexity
    except ImportError:
        return None
    return heldout_perplexity(phi, Xte)


def perplexity_section(seeds: int, k: int = 10) -> str:
    from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA
    from topicaudit.targets.learners.lda import VariationalLDA

    Xtr, Xte, first, second = kos_split()
    out = [f"### 1. Held-out perplexity against ε on KOS (k = {k}, δ = 1e-5, RDP accountant)", "",
           (f"Train {Xtr.shape[0]} documents, held out {Xte.shape[0]} ({int(Xte.sum())} tokens), "
           f"V = {Xtr.shape[1]}; N = 200 tokens; mean over {seeds} seed(s). "
           "*fixed-Φ*: `topicaudit.attacks.utility.heldout_perplexity`; *completion*: θ̂ on half of each held-out "
           "document's tokens, scored on the other half. Lower is better."), ""]
    refs = []
    for name, phi_fn in (("batch VB LDA (`lda`, 10 passes)", lambda s: VariationalLDA(k).fit(Xtr, s)),
                         ("uniform Φ", lambda s: np.full((k, Xtr.shape[1]), 1.0 / Xtr.shape[1]))):
        vals = [(fixed_phi_perplexity(phi, Xte), completion_perplexity(phi, first, second))
                for phi in (phi_fn(s) for s in range(seeds))]
        refs.append((name, float(np.mean([v[0] for v in vals])), float(np.mean([v[1] for v in vals]))))
    rows = []
    for setting, params in SETTINGS.items():
        for eps in EPSILONS:
            t0 = time.perf_counter()
            model = DPStochasticVariationalLDA(k, epsilon=eps, delta=1e-5, max_doc_tokens=200, **params)
            calib = time.perf_counter() - t0
            fixed, completion, fit_s = [], [], []
            for s in range(seeds):
                t0 = time.perf_counter()
                phi = model.fit(Xtr, s)
                fit_s.append(time.perf_counter() - t0)
                fixed.append(fixed_phi_perplexity(phi, Xte))
                completion.append(completion_perplexity(phi, first, second))
            g = model.guarantee()
            rows.append((setting, eps, model.noise_multiplier_, model.noise_std, g.epsilon,
                         float(np.mean(fixed)) if fixed[0] is not None else None, float(np.mean(completion)),
                         f"{calib:.1f} / {np.mean(fit_s):.1f}"))
            print(rows[-1], flush=True)
    out.append(table(["setting", "ε requested", "z", "σ = zΔ", "ε (RDP) claimed", "perplexity fixed-Φ",
                      "perplexity completion", "calibrate / fit s"], rows))
    out += ["", table(["reference", "perplexity fixed-Φ", "perplexity completion"], refs), ""]
    return "\n".join(out)


# -- 2. accountants ---------------------------------------------------------------------------------

def accountant_section() -> str:
    names = list(ACCOUNTANTS)
    header = ["setting", "q", "J", "σ", "δ"] + names
    rows = []
    cases = []
    for S in (5_000, 10_000, 20_000):
        for z in (1.0, 1.24, 2.0):
            cases.append((f"Park 2016a: S={S}, 1 epoch", S / 400_000, 400_000 // S, z, 1e-5))
    for S in (10, 20, 50, 100, 200, 400):
        cases.append((f"Park 2016b: S={S}, 160k docs", S / 400_000, 160_000 // S, 1.0, 1e-4))
    for setting, params in list(SETTINGS.items())[:2]:
        for eps in (1.0, 8.0):
            z = calibrate_noise_multiplier(eps, 1e-5, params["sampling_rate"], params["n_iter"])
            cases.append((f"KOS {setting.split(' (')[0]}, RDP ε={eps:g}", params["sampling_rate"],
                          params["n_iter"], z, 1e-5))
    t0 = time.perf_counter()
    for label, q, J, z, delta in cases:
        eps = {n: compute_epsilon(z, q, J, delta, n).epsilon for n in names}
        rows.append((label, q, J, z, delta, *[eps[n] for n in names]))
        print(rows[-1], flush=True)
    seconds = time.perf_counter() - t0
    out = ["### 2. The accountants at equal noise", "",
           ("ε of J Poisson-subsampled Gaussian steps with noise multiplier σ (add/remove one document). "
           "D = 400,000 in Park et al.'s settings. `zcdp` = no amplification (sound); `zcdp-park` = the "
           "second paper's route (amplified (ε, δ) treated as zCDP; not a theorem); `advanced`/`linear` "
           "compose the amplified analytic Gaussian per step (advanced: best δ split). "
           f"({seconds:.1f} s for the table.)"), "", table(header, rows), ""]
    # noise needed for Park et al. 2016b's target (ε, δ) = (1, 1e-4)
    rows = []
    for S in (10, 20, 50, 100, 200, 400):
        q, J = S / 400_000, 160_000 // S
        rows.append((f"S={S}", q, J, *[calibrate_noise_multiplier(1.0, 1e-4, q, J, n) for n in names]))
        print(rows[-1], flush=True)
    out += [("Noise multiplier each accountant needs for (ε, δ) = (1, 1e-4) (Park et al. 2016b's experiment; "
            "bisection, relative precision 1e-4):"), "",
            table(["setting", "q", "J"] + names, rows), ""]
    # Park et al. 2016a report ε = 2.44 for S = 20,000, σ = 1.24, one epoch, δ unstated
    q, J = 20_000 / 400_000, 20
    from topicaudit.targets.privacy.dp_svi_accounting import rdp_epsilon
    lines = []
    for delta in (1e-4, 1e-5, 1e-6, 1e-7):
        lines.append((delta, rdp_epsilon(1.24, q, J, delta, conversion="abadi").epsilon,
                      rdp_epsilon(1.24, q, J, delta).epsilon,
                      compute_epsilon(1.24, q, J, delta, "pld").epsilon))
    out += [("Park et al. (2016a) report ε = 2.44 for S = 20,000, σ = 1.24, one epoch, without stating δ; "
            "the moments accountant's conversion of the same RDP curve gives:"), "",
            table(["δ", "RDP, moments-accountant conversion", "RDP (optimal conversion)", "PLD"], lines), ""]
    return "\n".join(out)


# -- 3. audits --------------------------------------------------------------------------------------

def audit_section() -> str:
    import tomllib

    from topicaudit.targets import build_target

    rows = []
    for name in ("eps1", "eps8", "eps64", "nonprivate"):
        config = REPO / "benchmarks" / "configs" / f"dp_svi_kos_{name}.toml"
        run = REPO / "runs" / f"dp_svi_kos_{name}" / "results.json"
        t = tomllib.loads(config.read_text())["target"]
        claim = build_target(t["learner"], t["k"], "all", t.get("params")).learner.guarantee()
        z = claim.parameters.get("noise_multiplier", 0.0)
        if not run.exists():
            rows.append((name, claim.epsilon, z, "not run", "", "", "", "", "", "", ""))
            continue
        r = json.loads(run.read_text())
        a = r["attacks"]["lira_online"]
        off = r["attacks"]["lira_offline"]
        util = r.get("utility", {})
        rows.append((name, claim.epsilon, z, a["auc"], pct(a["tpr_at_fpr_0.001"]), pct(a["tpr_at_fpr_0.01"]), off["auc"],
                     r["epsilon_lower_bounds"]["epsilon"], util.get("heldout_perplexity"),
                     r["timings_s"]["total"]))
    out = ["### 3. LiRA audits (KOS, k = 5, 64 shadows, q = 0.5, J = 20, C = 5, δ = 1e-5)", "",
           ("`.venv/bin/topicaudit run benchmarks/configs/dp_svi_kos_<level>.toml --output "
           "runs/dp_svi_kos_<level>`. Claimed ε: the learner's guarantee (RDP); empirical ε: the run's "
           "one-run lower bound (95 % confidence)."), "",
           table(["level", "claimed ε", "z", "online AUC", "online TPR@0.1%FPR", "online TPR@1%FPR", "offline AUC",
                  "empirical ε ≥", "held-out perplexity", "wall s"], rows), ""]
    return "\n".join(out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", default="perplexity,accountants,audits")
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args(argv)
    sections = args.sections.split(",")
    started = time.perf_counter()
    parts = [(f"## Run of {datetime.datetime.now().isoformat(timespec='seconds')} "
             f"({platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()})"), ""]
    if "perplexity" in sections:
        parts.append(perplexity_section(args.seeds))
    if "accountants" in sections:
        parts.append(accountant_section())
    if "audits" in sections:
        parts.append(audit_section())
    parts.append(f"Total {time.perf_counter() - started:.0f} s.\n")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    new = not RESULTS.exists()
    with RESULTS.open("a") as fh:
        if new:
            fh.write("# DP-SVI (Park et al. 2016) benchmark results\n\nMade by `benchmarks/dp_svi.py`; "
                     "each run appends a section.\n\n")
        fh.write("\n".join(parts) + "\n")
    print("\n".join(parts))


if __name__ == "__main__":
    main()
