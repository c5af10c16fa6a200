"""A chapter's unit on disk: the lock a run holds, its staging folder, the seal (every file's sha256 and the
fingerprint), and the move into the profile's folder, metadata last; the notebook of a failed run, kept."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core import files, results
from .execute import ChapterFailed, tidy
from .fingerprint import chapter_code, computed_by, data_identities

STAGING = ".staging-"  # <results root>/.staging-<chapter>: a run in progress
LOCKS = ".locks"  # <results root>/.locks/<chapter>.lock: held while a chapter runs
FAILED = "failed"  # <results root>/<profile>/failed/<chapter>.ipynb: the last failed run, for reading


class ChapterBusy(ChapterFailed):
    """Another process is running the same chapter into the same results folder."""


class LinkedPath(ChapterFailed):
    """A file or folder the runner writes (a lock, a staging folder) is a link or not what it should be: refused,
    and what it points to is never written."""


def try_lock(fd: int) -> bool:
    if sys.platform == "win32":  # no fcntl there
        import msvcrt  # platform: Windows only

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    import fcntl  # platform: POSIX only

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def refuse_link(path: Path, what: str) -> None:
    """LinkedPath when ``path`` is a symbolic link: the runner never writes through one."""
    if path.is_symlink():
        raise LinkedPath(
            f"{path} is a symbolic link, not {what}; refusing to write through it: remove the link "
            f"(rm '{path}') and run again"
        )


def open_private(path: Path, what: str) -> int:
    """Open (or create) one of the runner's own files for reading and writing without following a link, and check
    that it is a plain file with no other name (a hard link); its descriptor, or LinkedPath."""
    refuse_link(path.parent, f"the folder of {what}")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP or path.is_symlink():
            refuse_link(path, what)
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        raise LinkedPath(
            f"{path} is not a plain file of its own (a hard link, a device or a pipe), not {what}; "
            f"refusing to write to it: remove it (rm '{path}') and run again"
        )
    return fd


@contextmanager
def chapter_lock(results_root: Path, chapter: str) -> Iterator[None]:
    """Hold <results root>/.locks/<chapter>.lock, or raise ChapterBusy naming its holder (LinkedPath when the lock
    file is a link). The operating system releases the lock when the process ends, however it ends."""
    path = results_root / LOCKS / f"{chapter}.lock"
    fd = open_private(path, "the runner's lock file")
    with os.fdopen(fd, "r+") as fh:
        if not try_lock(fh.fileno()):
            holder = fh.read().strip() or "another process"
            raise ChapterBusy(
                f"chapter {chapter!r} is already running into {results_root} ({holder}); wait for "
                f"it to finish, or pass another --results folder"
            )
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        fh.flush()
        yield


def clear_stale_staging(results_root: Path, chapter: str) -> int:
    """Remove staging folders of ``chapter`` left by runs that were killed; call only while holding its lock. A
    link in their place is refused (LinkedPath), never followed."""
    stale = [
        p
        for p in results_root.glob(f"{STAGING}{chapter}*")
        if p.name == f"{STAGING}{chapter}" or p.name.startswith(f"{STAGING}{chapter}-")
    ]
    for path in stale:
        refuse_link(path, "the runner's staging folder")
        shutil.rmtree(path, ignore_errors=True)
    return len(stale)


def make_staging(staging: Path) -> None:
    """Create a chapter's staging folder; LinkedPath when a link stands in its place."""
    refuse_link(staging, "the runner's staging folder")
    staging.mkdir()


def with_results(final: Path, chapter: str) -> dict[str, Any] | None:
    """The metadata of the chapter's intact unit in ``final`` when it holds results (not a page saying the data was
    missing), else None."""
    try:
        meta = files.check(final, chapter)
    except results.ResultsError:
        return None
    return None if meta.get("status") == results.UNAVAILABLE else meta


def seal(staging: Path, chapter: str, fp: dict[str, str], wall: float) -> None:
    """Stamp the staged unit: every file with its sha256, the fingerprint (and each code module's digest, to name
    what changed later), the runner's wall time; then check it."""
    strays = [p.name for p in staging.iterdir() if not p.name.startswith(f"{chapter}.")]
    if strays:
        raise ChapterFailed(f"chapter {chapter!r} wrote files not named {chapter}.*: {', '.join(strays)}")
    meta = files.read_meta(staging, chapter)
    code = chapter_code(chapter)
    meta.update(
        fingerprint=fp,
        code=code.as_meta(),
        computed_by=computed_by(code),
        runner_wall_time_s=round(wall, 3),
        files={p.name: results.sha256_file(p) for p in sorted(staging.iterdir()) if p.name != f"{chapter}.json"},
    )
    if identities := data_identities(chapter):
        meta["data_identity"] = identities  # which release and files: what ``fingerprint.same_data`` compares
    results.write_meta(staging, chapter, meta)
    files.check(staging, chapter)


def copy_in(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file beside it: ``target`` is whole or untouched."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        files.umask_mode(tmp)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def move_unit(staged: Path, final: Path, chapter: str) -> None:
    """Move the unit in ``staged`` into ``final``, replacing the chapter's unit there, metadata last (the unit reads
    as absent, never as mixed, until it lands). Resumable: a move cut short (a kill) is finished by calling it again,
    since a file the staged metadata lists that is no longer staged was moved already."""
    meta = f"{chapter}.json"
    listed = files.read_meta(staged, chapter).get("files", {})
    final.mkdir(parents=True, exist_ok=True)
    (final / meta).unlink(missing_ok=True)
    for old in final.glob(f"{chapter}.*"):
        if old.name not in listed:
            old.unlink()
    for name in listed:  # each one plain name (checked again: the move never leaves the two folders)
        source = files.plain_name(name, staged, staged / meta)
        if source.exists():
            os.replace(source, files.plain_name(name, final, staged / meta))
    os.replace(staged / meta, final / meta)


def move_in(chapter: str, staging: Path, final: Path, out_dir: Path) -> None:
    """Move a sealed unit into ``final`` (``move_unit``), then copy its notebook into the book."""
    move_unit(staging, final, chapter)
    copy_in(final / f"{chapter}.ipynb", out_dir / f"{chapter}.ipynb")


def keep_failed(staging: Path, chapter: str, final: Path, out_dir: Path) -> str:
    """Keep a failed run's notebook in <profile>/failed/ and show it as the chapter's page (the published results
    stay as they were, and the next run that succeeds replaces the page); returns a line saying where it is."""
    executed = staging / f"{chapter}.ipynb"
    if not executed.exists():
        return "no notebook was written"
    tidy(executed)
    kept = final / FAILED / f"{chapter}.ipynb"
    copy_in(executed, kept)
    copy_in(executed, out_dir / f"{chapter}.ipynb")
    return f"the failed notebook is kept at {kept} and shown as the chapter's page"
