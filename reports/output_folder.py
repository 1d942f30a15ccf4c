"""Where a report is written: its output folder checked, the report staged beside it and swapped in whole.

The output directory is built complete in a temporary directory beside it and renamed into place, so a failed
report leaves nothing half-written and an older report is replaced only by a whole new one. A report directory
holds a marker listing the files the report wrote: an existing directory is replaced only when it is empty or
holds nothing else, so no file of the user's is ever deleted or overwritten. Staging directories left by a
killed report are removed by the next one. Every folder is written, moved and removed by descriptor
(``topicaudit.owned_folders``): never through a link put in its place.
"""
from __future__ import annotations

import errno
import glob
import os
import re
from pathlib import Path
from typing import Callable

from topicaudit.engine.configuration.validation import check_output_directory
from topicaudit.engine.presentation.roc_figure import matplotlib_defaults
from topicaudit.engine.storage import manifest
from topicaudit.engine.storage.bounded_read import refuse_among_models
from topicaudit.engine.storage.durable_write import disk_full
from topicaudit.engine.storage.lock import listing, remove_made, uninterrupted
from topicaudit.errors import UserError
from topicaudit.folder_anchors import absolute
from topicaudit.owned_folders import Folder, ancestors, make_folders, new_folder, open_folder, remove
from topicaudit.reports.document import Report
from topicaudit.reports.html import render_html
from topicaudit.reports.markdown import render_markdown

MARKER = ".topicaudit-report"  # the files a report wrote, one relative path a line
MARKER_MAX_BYTES = 1 << 20  # far above any report's list of files; a larger "marker" is not one report wrote


def write_report(output: Path, read_from: list[Path], compose: Callable[[Path], Report]) -> Path:
    """Write the report ``compose(figure_dir)`` builds into ``output``: staged beside it, swapped in whole, every
    step undone on failure (the staging, the folders made above it, the times of the user's folder they are in).
    ``read_from``: the directories the report reads, which the output may not be in or over."""
    # not over a file or folder a reported directory is read from (the default, DIR/report, is not one)
    output = Path(absolute(output)) if output.name == "" or ".." in output.parts else output  # `.`; `a/gone/..`
    manifest.refuse_over_read_names(output, read_from, "-o/--output")
    check_target(output)
    refuse_among_models(output.parent, "-o/--output")
    check_output_directory(output, "-o/--output")
    new_parents = [parent for parent in output.parents if not os.path.lexists(parent)]  # made: removed on failure
    above = (new_parents[-1] if new_parents else output).parent  # the user's: its times put back on failure
    found, staging, made = listing(above), None, None
    try:
        make_folders(output.parent)
        with open_folder(output.parent) as parent:  # the folders made, by identity: removed on failure only if so
            made = [os.fstat(parent.fd), *ancestors(parent, len(new_parents) - 1)] if parent.fd is not None else None
        remove_stale_staging(output)
        with uninterrupted():  # made and named at once (written by descriptor)
            staging = new_folder(output.parent, f".{output.name}.tmp-{os.getpid()}-")
        with matplotlib_defaults():
            report = compose(staging / "figures")
        with open_folder(staging) as folder:
            folder.put("report.html", render_html(report).encode("utf-8"))
            folder.put("report.md", render_markdown(report).encode("utf-8"))
            folder.put(MARKER, "".join(f"{name}\n" for name in folder.files()).encode("utf-8"))  # by descriptor
            with uninterrupted():  # the old report aside and the new one in its place, both or neither
                _swap_in(staging, output, folder)
    except BaseException as error:
        with uninterrupted():  # whole: one SIGTERM to the process group, taken twice, left the staging folder
            if staging is not None:
                remove(staging)
            remove_made(new_parents, above, found, made)
        if isinstance(error, OSError) and disk_full(error, output) is not None:
            raise disk_full(error, output) from None
        raise
    return output


def _swap_in(staging: Path, output: Path, staged: Folder) -> None:
    """By descriptor: the staged report (still ``staged``, not a link put there) in place, the old one removed."""
    with open_folder(output.parent) as folder:
        folder.expect(staging.name, staged)  # LinkedFolder when a link (or another folder) was put in its place
        old = None
        if output.exists():
            check_target(output)  # still a report (checked again just before replacing it)
            old = folder.make_folder(f".{output.name}.old-{os.getpid()}-")
            try:
                with folder.child(old) as aside:
                    folder.move(output.name, aside, "report")
            except OSError as error:  # the old report stays; the folder made for it is not left beside it
                folder.rmdir(old)
                if error.errno != errno.EBUSY:
                    raise
                raise UserError(f"cannot replace {output}: it is a mount point (or in use by the system), and a "
                                "report replaces its folder by renaming; choose another -o") from None
        folder.move(staging.name, folder, output.name)
        if old is not None:
            folder.remove_tree(old)


def check_target(output: Path) -> None:
    """An existing output must be empty or a report this command wrote, holding nothing else."""
    if output.is_symlink() and not output.exists():
        raise UserError(f"output {output} is a symbolic link to a missing {os.readlink(output)}; remove the link "
                        "or choose another -o")
    if output.is_symlink():  # `-o L`, L a link to a folder of yours: the link was replaced by the report (XIX-zs)
        raise UserError(f"output {output} is a symbolic link (to {os.readlink(output)}); a report replaces its "
                        "folder as a whole, which would replace the link rather than write into its target: give "
                        "the folder itself, or another -o")
    if not output.exists():
        return
    if not output.is_dir():
        raise UserError(f"output {output} exists and is not a directory; choose another -o")
    # A link counts as what it is, not as its target: a link to a folder of the user's (`figures` → ~/photos)
    # was a "folder", the output "empty", and the link was removed with the directory the report replaces.
    entries = sorted(output.rglob("*"))
    found = [p.relative_to(output).as_posix() for p in entries if p.is_symlink() or not p.is_dir()]
    folders = [p.relative_to(output).as_posix() for p in entries if p.is_dir() and not p.is_symlink()]
    if not found and not folders:
        return
    marker = output / MARKER
    if marker.is_symlink() or not marker.is_file() or marker.stat().st_size > MARKER_MAX_BYTES:
        raise UserError(f"output directory {output} was not made by `topicaudit report` (it holds "
                        f"{', '.join((found + folders)[:3])}); nothing in it is replaced: choose another -o")
    written = set(marker.read_text(encoding="utf-8", errors="replace").splitlines()) | {MARKER}
    extra = [name for name in found if name not in written] + [name for name in folders if name != "figures"]
    if extra:
        raise UserError(f"output directory {output} holds {', '.join(extra[:3])}, which `topicaudit report` did not "
                        "write; move it out (the report directory is replaced as a whole), or choose another -o")


# All a killed report's staging can hold (tmp: the report being built, a page's .NAME.XXXXXXXX.tmp too; old: the
_STAGED = re.compile(r"(report/)?(figures(/[A-Za-z0-9._-]+)?|(\.)?(report\.html|report\.md|\.topicaudit-report)"
                     r"(?(4)\.[0-9a-f]{8}\.tmp))|report")  # one it replaced, in report/)


def remove_stale_staging(output: Path) -> None:
    """Staging directories of killed reports (their process gone) beside ``output``: real directories of this user
    holding only what a report writes. A user's folder named like one (``.out.tmp-999999-mine``) was deleted whole;
    and another user's, in a folder everyone may write to (/tmp), was deleted by a report run as root, which the
    sticky bit does not stop (hostile pass XIX-o)."""
    for entry in output.parent.glob(f".{glob.escape(output.name)}.*-*"):
        match = re.fullmatch(rf"\.{re.escape(output.name)}\.(tmp|old)-(\d+)-[A-Za-z0-9_]+", entry.name)
        if not match or entry.is_symlink() or not entry.is_dir() or not _mine(entry):
            continue
        if not _alive(int(match.group(2))) and all(
                not p.is_symlink() and _STAGED.fullmatch(p.relative_to(entry).as_posix()) for p in entry.rglob("*")):
            remove(entry)


def _mine(entry: Path) -> bool:
    try:
        return entry.lstat().st_uid == os.geteuid()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):  # Overflow: no process has it, so no report staged it
        pass
    return True
