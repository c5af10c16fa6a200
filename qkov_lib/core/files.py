"""Stored files read back safely: a file name read from a stored file (a metadata's ``files`` and ``tables``, a
manifest, a bundle, the published site's index) becomes a path only as one plain name inside its folder
(``plain_name``), so a sealed metadata that lists ``../README.md`` is refused before anything outside its folder is
read, moved or deleted; ``check``, ``load`` and ``read_meta`` are ``core.results``' with that check first, for the
store, the runner, bundles and the site. Files written through a temporary file keep the umask's mode
(``umask_mode``).

Kept beside ``core.results`` rather than in it: that module is part of the code key of every stored real-data run
(their loaders import it), and these checks change no number."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from . import results


class UnsafeName(results.ResultsError):
    """A file name read from a stored file that is not one plain name inside its folder: refused before it becomes
    a path."""


def plain_name(name: object, folder: Path, source: Path | str) -> Path:
    """``folder / name`` for a file name read from ``source`` (a metadata, a manifest, an index), after checking that
    it is one plain name: a non-empty string without ``/``, ``\\``, ``:`` or NUL, not ``.`` or ``..``, whose path
    stays inside ``folder`` once resolved (no link out of it); else UnsafeName naming ``source`` and the name."""
    if isinstance(name, str) and name not in ("", ".", "..") and not any(c in name for c in "/\\:\0"):
        path = folder / name
        if path.resolve().parent == folder.resolve():
            return path
    raise UnsafeName(
        f"{source} names {name!r} as one of its files, which is not a plain file name inside {folder} (a path, "
        f"'..', a link out of it or empty); refusing it: the file was altered, remove it or write it again"
    )


def read_meta(folder: Path, chapter: str) -> dict[str, Any]:
    """``results.read_meta``, and ResultsError where the file holds no metadata (a JSON object whose ``files`` is an
    object) or names a file that is not a plain name in ``folder``."""
    path = folder / f"{chapter}.json"
    try:
        meta = results.read_meta(folder, chapter)
    except RecursionError:
        raise results.ResultsError(f"{path} is unreadable (nested too deep); rerun the chapter") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("files", {}), dict):
        raise results.ResultsError(f"{path} is no results' metadata (a JSON object listing its files); rerun it")
    for name in meta.get("files", {}):
        plain_name(name, folder, path)
    for table in meta.get("tables", []):
        plain_name(str(results.table_path(Path(), chapter, str(table))), folder, path)  # its file's name
    return meta


def check(folder: Path, chapter: str) -> dict[str, Any]:
    """``results.check`` after ``read_meta``'s checks: nothing outside ``folder`` is read."""
    read_meta(folder, chapter)
    return results.check(folder, chapter)


def load(folder: Path, chapter: str) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """``results.load`` after ``read_meta``'s checks: nothing outside ``folder`` is read."""
    read_meta(folder, chapter)
    return results.load(folder, chapter)


def umask_mode(path: str | Path) -> None:
    """Give a file made by ``tempfile.mkstemp`` (mode 0600) the mode ``open`` gives a new file: 0666 less the
    umask (0644 under the usual 022)."""
    os.chmod(path, 0o666 & ~_umask())


def _umask() -> int:
    """The process's umask, read where Linux states it (setting it to read it back races other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str) -> None:
    """``results.write_atomic`` whose file keeps the umask's mode: for the runner's own files (the store's and a
    unit's tables and metadata are written by ``results``, mode 0600 until that module is next changed)."""
    results.write_atomic(path, text)
    umask_mode(path)
