"""topicaudit's engine: corpus → plan → shadow fits → statistics → scores → metrics."""

from topicaudit.version import __version__  # noqa: F401
