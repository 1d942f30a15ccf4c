"""Progress lines: the time left is an honest estimate."""
import io

from topicaudit.engine.progress import Progress


def test_progress_estimates_the_time_left_from_the_pace_after_the_first_completion():
    """A slow start (Ray, the first compile) is not charged to every item left."""
    p = Progress("shadow models", 64, stream=io.StringIO(), quiet=True)
    p.start -= 30.0                       # 30 s before the first model came in
    p.advance()
    assert p.time_left(p.first[0]) is None  # one pace sample is no pace
    p.advance()
    p.advance()
    left = p.time_left(p.first[0] + 2.0)  # two more models in 2 s: 1 s each, 61 left
    assert left == 61.0
