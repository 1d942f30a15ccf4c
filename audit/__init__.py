"""topicaudit's engine: corpus → plan → shadow fits → statistics → scores → metrics."""

__version__ = "0.1.0"
