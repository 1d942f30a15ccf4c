"""Learners backed by optional libraries: import them with one clear message when absent."""
from __future__ import annotations

import importlib

from topicaudit.errors import UserError


def require(module: str, extra: str, purpose: str):
    """Import ``module`` or tell the user which extra installs it (``purpose``: who needs it)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(
            f"{purpose} needs the {module} library, which is not installed; install it with "
            f"pip install 'topicaudit[{extra}]'"
        ) from None
