"""What a canary really added where a Gaussian step's score looks: measured, for power estimates only.

The Gaussian score (``mechanism.GaussianScorer``) assumes that a sampled
canary adds its whole clipped contribution (N tokens, or C) to one topic, the
one it reads. A learner's E-step does not always do so: DP-SVI's puts 97% of
a one-word canary's tokens there on average on PHEME, and under 76% at 5% of
the sampled steps (benchmarks/RESULTS.md §29). The score's power is very
sensitive to that share (a 2× bug is refuted at 64,000 canaries in 100% of
audits simulated with the whole contribution, in 85% with the measured
shares, and in 17 of 20 real audits), so the simulation must use what the
learner really contributed.

Two measurements, both of the canaries' own columns:

- recorded: the learner hands ``Recorder.gaussian`` its sum before the noise
  (``clean``), and the transcript keeps each sampled canary's share in its
  scored topic (``contributions``): exact, thousands of values;
- observed: the transcript's noisy sums in the scored topic, trained canaries
  against untrained ones: (mean_in − mean_out) / (q·size) estimates the mean
  share, with its standard error (the noise's σ over √(steps·canaries)).

The recorded shares are used when the observed data do not contradict them
(their mean no more than ``CONTRADICTION`` standard errors above the observed
estimate); otherwise, or when nothing was recorded, the observed estimate
less ``LOWER`` standard errors, a share the data support at 95% confidence.
Either way no share exceeds 1: the simulation never credits a canary with
more than the claim's contribution. These read the coins, so only power
estimates use them; no bound does.
"""
from __future__ import annotations

import math

import numpy as np

from topicaudit.attacks.canaries import CanarySet
from topicaudit.targets.mechanisms import GaussianNoise, Transcript

QUANTILES = 100      # the recorded shares kept in results.json: their quantiles at (i + ½)/100
CONTRADICTION = 3.0  # standard errors above the observed mean share at which a recorded share is not believed
LOWER = 1.645        # standard errors below the observed mean share used when nothing credible was recorded
BLOCK = 4_096        # columns read at a time


def trained_columns(transcript: Transcript, canaries: CanarySet) -> tuple[np.ndarray, np.ndarray]:
    """The transcript's column positions of trained and of untrained canary words (a paired canary's tails
    word trains when its coin is tails)."""
    columns = np.asarray(transcript.columns, dtype=np.int64)
    words, coins = canaries.words, np.asarray(canaries.coins, dtype=bool)
    if words is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    trained = [words[coins]]
    untrained = [words[~coins]]
    if canaries.alternate_words is not None:
        trained.append(canaries.alternate_words[~coins])
        untrained.append(canaries.alternate_words[coins])
    order = np.argsort(columns)

    def positions(group: list[np.ndarray]) -> np.ndarray:
        wanted = np.concatenate(group).astype(np.int64)
        if not columns.size:
            return np.zeros(0, np.int64)
        at = order[np.searchsorted(columns, wanted, sorter=order).clip(0, columns.size - 1)]
        return at[columns[at] == wanted]

    return positions(trained), positions(untrained)


def observed_share(transcript: Transcript, canaries: CanarySet) -> tuple[float, float] | None:
    """(mean share, standard error) of the canaries' contribution in their scored topic, from the noisy sums:
    trained against untrained columns; None without both."""
    m = transcript.mechanism
    assert isinstance(m, GaussianNoise)
    trained, untrained = trained_columns(transcript, canaries)
    if trained.size < 2 or untrained.size < 2:
        return None
    sums = transcript.arrays["noisy_sums"]                                   # (T, k, columns)
    top = transcript.arrays.get("top_topics")

    def moments(at: np.ndarray) -> tuple[float, float]:
        """Mean and variance of the scored topic's noisy sum over every step and these columns, a block of
        columns at a time (a large audit's sums are hundreds of megabytes)."""
        total = square = 0.0
        for start in range(0, at.size, BLOCK):
            block = at[start:start + BLOCK]
            y = np.asarray(sums[..., block], dtype=np.float64)
            if top is None:  # the score reads every topic: the column's whole sum bounds what one topic holds
                y = y.sum(axis=1)
            else:
                y = np.take_along_axis(y, np.asarray(top)[:, None, block].astype(np.int64), axis=1)[:, 0, :]
            total, square = total + float(y.sum()), square + float((y * y).sum())
        n = at.size * sums.shape[0]
        return total / n, max(square / n - (total / n) ** 2, 0.0)

    (inside, inside_var), (outside, outside_var) = moments(trained), moments(untrained)
    n_in, n_out = trained.size * sums.shape[0], untrained.size * sums.shape[0]
    scale = m.sampling_rate * m.contribution
    share = (inside - outside) / scale
    error = math.sqrt(inside_var / n_in + outside_var / n_out) / scale
    return float(share), float(error)


def measured_contribution(transcript: Transcript | None, canaries: CanarySet) -> list[float] | None:
    """The shares of its clipped contribution a sampled trained canary added to its scored topic, for the power
    simulation: the recorded shares' quantiles when the data do not contradict them, else one share the data
    support at 95% (module docstring); None for another kind of release, or without trained and untrained
    canaries."""
    if transcript is None or not isinstance(transcript.mechanism, GaussianNoise):
        return None
    observed = observed_share(transcript, canaries)
    if observed is None:
        return None
    share, error = observed
    recorded = transcript.arrays.get("contributions")
    if recorded is not None and np.size(recorded) and float(np.mean(recorded)) <= share + CONTRADICTION * error:
        shares = np.clip(np.asarray(recorded, dtype=np.float64), 0.0, 1.0)
        return [round(float(v), 6) for v in np.quantile(shares, (np.arange(QUANTILES) + 0.5) / QUANTILES)]
    return [round(min(max(share - LOWER * error, 0.0), 1.0), 6)]


__all__ = ["measured_contribution", "observed_share", "trained_columns"]
