"""Reading a file the user named: one message per way it can fail, before any parser sees it."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from topicaudit.errors import UserError
from topicaudit.memory import check_fits_in_memory


def read_user_file(path: Path, what: str) -> bytes:
    """The bytes of a file the user named (``what`` says which: "JSON corpus file", "Φ file"…), or a UserError."""
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):  # /dev/zero, a FIFO: reading would never end
                raise UserError(f"{path}: not a regular file, but a {what} was expected; give the file's path")
            check_fits_in_memory(2 * info.st_size, f"reading the {what} {path}",
                                 "use a smaller file, or free memory")
            return f.read()
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found; check the path") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, but a {what} was expected; give the file's path") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied reading the {what}; make it readable") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
