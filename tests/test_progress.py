"""Progress lines: the time left is an honest estimate."""
import io
import threading
import time

import pytest

from topicaudit.engine.execution.progress import Heartbeat, Overall, Progress, enter_activity, leave_activity


def test_progress_estimates_the_time_left_from_the_pace_after_the_first_completion():
    """A slow start (Ray, the first compile) is not charged to every item left."""
    p = Progress("shadow models", 64, stream=io.StringIO(), quiet=True)
    p.start -= 30.0                       # 30 s before the first model came in
    p.advance()
    assert p.time_left(p.first[0]) is None  # one pace sample is no pace
    p.advance()
    p.advance()
    left = p.time_left(p.first[0] + 2.0)  # two more models in 2 s: 1 s each, 61 left
    assert left == pytest.approx(61.0)  # clock readings of any size: float rounding


# -- the sweep's overall progress, and the heartbeat ------------------------------------------------------

# Recorded wall times (s) of the KOS sweep over k = 5, 10, 15, 20, 25, three replicates each, 64 shadows
# (benchmarks/results/kos-k-sweep/report.md, its "wall time" column): ten times longer at k = 25 than at k = 5,
# the hard case for an estimate made after the first run.
KOS_K_SWEEP = [(5, 39.9), (5, 44.4), (5, 38.4), (10, 56.8), (10, 69.8), (10, 58.2), (15, 82.9), (15, 97.4),
               (15, 192.0), (20, 138.0), (20, 324.0), (20, 318.0), (25, 426.0), (25, 396.0), (25, 438.0)]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def replay(recorded, parameter):
    """The estimate of the time left after each part, beside the truth."""
    clock = FakeClock()
    overall = Overall("sweep", [v for v, _ in recorded], parameter, clock=clock)
    assert overall.time_left() is None and "estimated after the first run" in overall.line()
    out = []
    for i, (_, seconds) in enumerate(recorded):
        overall.start()
        clock.now += seconds
        overall.finish()
        out.append((overall.time_left(), sum(t for _, t in recorded[i + 1:])))
    assert overall.line().startswith(f"sweep: {len(recorded)}/{len(recorded)} done") and "left" not in overall.line()
    return out


def test_the_sweep_estimate_after_the_first_run_is_within_2x_of_the_recorded_truth():
    estimates = replay(KOS_K_SWEEP, "target.k")
    left, truth = estimates[0]
    assert truth / 2 <= left <= 2 * truth, (left, truth)
    # and never 10× off afterwards
    assert all(truth / 10 <= left <= 10 * truth for left, truth in estimates[:-1])
    assert estimates[-1] == (0, 0)


def test_a_sweep_over_epsilon_is_paced_as_independent_of_the_value():
    recorded = [(0.5, 60.0), (0.5, 62.0), (1, 58.0), (1, 61.0), (8, 63.0), (8, 59.0), (64, 60.0), (64, 62.0)]
    left, truth = replay(recorded, "target.params.epsilon")[0]
    assert truth / 1.2 <= left <= 1.2 * truth  # 7 × 60 s, not scaled by ε = 64


def test_runs_finished_before_the_sweep_resumed_are_not_paced():
    clock = FakeClock()
    overall = Overall("sweep", [1, 1, 1, 1], "target.learner", clock=clock)
    for _ in range(2):  # finished earlier: returned at once
        overall.start()
        clock.now += 0.5
        overall.finish(ran=False)
    assert overall.time_left() is None
    overall.start()
    clock.now += 100
    overall.finish()
    assert overall.time_left() == 100  # one run left at 100 s a run, not (0.5 + 0.5 + 100) / 3
    assert "~100 s left" in overall.line()


def test_the_heartbeat_names_the_phase_when_nothing_was_printed_for_a_while():
    stream = io.StringIO()
    entered = enter_activity("fits")
    assert entered  # the main thread's phases are noted
    try:
        with Heartbeat(stream, every=0.3):
            time.sleep(1.4)
    finally:
        leave_activity(entered)
    lines = stream.getvalue().splitlines()
    assert 2 <= len(lines) <= 5, lines
    assert lines[0].startswith("  … fitting models: ") and "since the command started" in lines[0]
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(enter_activity("load")))
    thread.start()
    thread.join()
    assert elsewhere == [False]  # Ray's start in the background does not rename what the command is doing


def test_the_heartbeat_is_silent_under_quiet_and_while_progress_is_printed():
    stream = io.StringIO()
    with Heartbeat(stream, every=0.3, quiet=True):
        time.sleep(0.5)
    assert stream.getvalue() == ""
    with Heartbeat(stream, every=0.6):
        p = Progress("shadow models", 10, stream=stream, every=0.0)
        for _ in range(5):
            time.sleep(0.2)
            p.advance()
    assert "…" not in stream.getvalue()


def test_a_phase_line_says_what_follows_it_and_how_long_the_command_has_run():
    stream = io.StringIO()
    with Heartbeat(io.StringIO(), quiet=True):
        p = Progress("shadow models", 8, stream=stream, every=0.0, then="then scoring and writing, seconds")
        for _ in range(4):
            p.advance()
    last = stream.getvalue().splitlines()[-1]
    assert "s left (then scoring and writing, seconds); " in last and last.endswith("s since the command started")
