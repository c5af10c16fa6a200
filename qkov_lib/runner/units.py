"""A chapter's unit on disk: the lock a run holds, its staging folder, the seal (every file's sha256 and the
fingerprint), and the move into the profile's folder, metadata last; the notebook of a failed run, kept."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..core import results
from .execute import ChapterFailed, tidy
from .fingerprint import chapter_code, computed_by

STAGING = ".staging-"  # <results root>/.staging-<chapter>: a run in progress
LOCKS = ".locks"  # <results root>/.locks/<chapter>.lock: held while a chapter runs
FAILED = "failed"  # <results root>/<profile>/failed/<chapter>.ipynb: the last failed run, for reading


class ChapterBusy(ChapterFailed):
    """Another process is running the same chapter into the same results folder."""


def _try_lock(fh) -> bool:
    try:
        import fcntl  # platform: POSIX only
    except ImportError:  # Windows
        import msvcrt  # platform: Windows only
        try:
            msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@contextmanager
def chapter_lock(results_root: Path, chapter: str) -> Iterator[None]:
    """Hold <results root>/.locks/<chapter>.lock, or raise ChapterBusy naming its holder. The operating system
    releases the lock when the process ends, however it ends."""
    path = results_root / LOCKS / f"{chapter}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        if not _try_lock(fh):
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise ChapterBusy(f"chapter {chapter!r} is already running into {results_root} ({holder}); wait for "
                              f"it to finish, or pass another --results folder")
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        fh.flush()
        yield


def clear_stale_staging(results_root: Path, chapter: str) -> int:
    """Remove staging folders of ``chapter`` left by runs that were killed; call only while holding its lock."""
    stale = [p for p in results_root.glob(f"{STAGING}{chapter}*")
             if p.name == f"{STAGING}{chapter}" or p.name.startswith(f"{STAGING}{chapter}-")]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return len(stale)


def seal(staging: Path, chapter: str, fp: dict[str, str], wall: float) -> None:
    """Stamp the staged unit: every file with its sha256, the fingerprint (and each code module's digest, to name
    what changed later), the runner's wall time; then check it."""
    strays = [p.name for p in staging.iterdir() if not p.name.startswith(f"{chapter}.")]
    if strays:
        raise ChapterFailed(f"chapter {chapter!r} wrote files not named {chapter}.*: {', '.join(strays)}")
    meta = results.read_meta(staging, chapter)
    code = chapter_code(chapter)
    meta.update(fingerprint=fp, code=code.as_meta(), computed_by=computed_by(code), runner_wall_time_s=round(wall, 3),
                files={p.name: results.sha256_file(p) for p in sorted(staging.iterdir())
                       if p.name != f"{chapter}.json"})
    results.write_meta(staging, chapter, meta)
    results.check(staging, chapter)


def copy_in(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file beside it: ``target`` is whole or untouched."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def move_in(chapter: str, staging: Path, final: Path, out_dir: Path) -> None:
    """Move a sealed unit into ``final``, metadata last (the unit reads as absent, never as mixed, until it lands),
    then copy its notebook into the book."""
    meta = f"{chapter}.json"
    final.mkdir(parents=True, exist_ok=True)
    (final / meta).unlink(missing_ok=True)
    for old in final.glob(f"{chapter}.*"):
        old.unlink()
    for path in staging.iterdir():
        if path.name != meta:
            os.replace(path, final / path.name)
    os.replace(staging / meta, final / meta)
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
