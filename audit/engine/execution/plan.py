"""Who trains on what: the seeded membership plan of one audit.

The target trains on each document independently with probability ½ (the
independence is what one-run ε auditing needs). Shadow models come in
complementary pairs — a random half and the other half — so every document is
IN exactly N/2 shadow models, whatever the corpus size.

Every random choice of a run flows from one integer seed through
``numpy.random.SeedSequence`` spawning, so shadow model ``i`` gets the same
documents and the same fitting seed whatever N is and however many workers run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topicaudit.engine.configuration.validation import check_seed, check_shadows
from topicaudit.errors import UserError
from topicaudit.memory import check_fits_in_memory


@dataclass(frozen=True)
class Plan:
    """Membership and fitting seeds; the run directory keeps ``arrays()`` as ``plan.npz``."""

    seed: int
    target_in: np.ndarray  # (n_docs,) bool
    shadow_in: np.ndarray  # (n_shadows, n_docs) bool
    target_seed: int
    shadow_seeds: np.ndarray  # (n_shadows,) int64, each < 2**32

    @property
    def n_docs(self) -> int:
        return self.target_in.shape[0]

    @property
    def n_shadows(self) -> int:
        return self.shadow_in.shape[0]

    def arrays(self) -> dict[str, np.ndarray]:
        """What ``plan.npz`` holds."""
        return {"seed": np.int64(self.seed), "target_in": self.target_in, "shadow_in": self.shadow_in,
                "target_seed": np.int64(self.target_seed), "shadow_seeds": self.shadow_seeds}


def check_plan(n_docs: int, n_shadows: int, seed: int) -> None:
    """What ``make_plan`` refuses, checked without drawing it (a run checks it before Ray starts)."""
    check_shadows(n_shadows, "the number of shadow models (--shadows)")
    if n_docs < 4:
        raise UserError(f"the corpus has {n_docs} usable documents; an audit needs at least 4")
    check_seed(seed, "the seed (--seed)")
    # shadow_in is n_shadows × n_docs booleans; every shadow also gets one row of
    # float64 per statistic (6), held twice while the batches are joined.
    check_fits_in_memory(float(n_shadows) * n_docs * (1 + 2 * 8 * 6),
                         f"{n_shadows} shadow models on {n_docs} documents", "use fewer shadow models (--shadows)")


def make_plan(n_docs: int, n_shadows: int, seed: int) -> Plan:
    """Draw the target's members and N/2 complementary pairs of shadow halves."""
    check_plan(n_docs, n_shadows, seed)
    membership_seq, target_fit_seq, shadow_fit_seq, pairs_seq = np.random.SeedSequence(seed).spawn(4)

    rng = np.random.default_rng(membership_seq)
    target_in = rng.random(n_docs) < 0.5
    while target_in.all() or not target_in.any():  # only possible for tiny corpora
        target_in = rng.random(n_docs) < 0.5

    shadow_in = np.empty((n_shadows, n_docs), dtype=bool)
    for pair, pair_seq in enumerate(pairs_seq.spawn(n_shadows // 2)):
        half = np.zeros(n_docs, dtype=bool)
        half[np.random.default_rng(pair_seq).permutation(n_docs)[: n_docs // 2]] = True
        shadow_in[2 * pair] = half
        shadow_in[2 * pair + 1] = ~half

    return Plan(
        seed=seed,
        target_in=target_in,
        shadow_in=shadow_in,
        target_seed=int(target_fit_seq.generate_state(1)[0]),
        shadow_seeds=shadow_fit_seq.generate_state(n_shadows).astype(np.int64),
    )
