"""Tidy results: data/results/<profile>/<chapter>[.<table>].csv, the executed <chapter>.ipynb and <chapter>.json
metadata. The metadata lists every file of the chapter with its sha256 (``files``) and carries a digest of itself
(``metadata_sha256``), so a reader can tell a complete, untouched set from a damaged, mixed or hand-edited one
(``check``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .paths import REPO_ROOT, RESULTS_ROOT

RESULTS_ENV = "QKOV_RESULTS_DIR"
ROOT_ENV = "QKOV_RESULTS_ROOT"


def results_root() -> Path:
    """Where every profile's results live: $QKOV_RESULTS_ROOT if set (by the runner), else data/results."""
    return Path(os.environ.get(ROOT_ENV) or RESULTS_ROOT)


INTERACTIVE = "interactive"
SEAL = "metadata_sha256"  # the metadata's own digest, so that a hand edit of the root of a unit's check shows
UNAVAILABLE = "data unavailable"  # the status of a unit whose chapter stopped for want of its dataset


def in_runner() -> bool:
    """Whether the chapter runs inside the book's runner, which names its staging folder in $QKOV_RESULTS_DIR; a
    chapter run by hand (JupyterLab, plain papermill) has none."""
    return bool(os.environ.get(RESULTS_ENV))


PUBLISHED, BY_HAND = "published", "run by hand"  # where a gathering page read a chapter's results


@dataclass(frozen=True)
class Sources:
    """Where a gathering page (the summary, the scorecard) reads each chapter's results under one profile: the
    published ones (``<root>/<profile>``) and, run by hand, a chapter's own hand run (``<root>/interactive/
    <profile>``) where it is newer, so that a page run in JupyterLab reflects the chapters just run there."""

    published: Path
    by_hand: Path | None = None

    def folder(self, chapter: str) -> Path:
        """The folder holding the results of ``chapter`` this page reads."""
        if self.by_hand is not None:
            mine, theirs = self.by_hand / f"{chapter}.json", self.published / f"{chapter}.json"
            if mine.is_file() and (not theirs.is_file() or mine.stat().st_mtime > theirs.stat().st_mtime):
                return self.by_hand
        return self.published

    def origin(self, chapter: str) -> str:
        """``PUBLISHED`` or ``BY_HAND``: which results of ``chapter`` this page reads."""
        return BY_HAND if self.by_hand is not None and self.folder(chapter) == self.by_hand else PUBLISHED


def sources(profile: str) -> Sources:
    """The results a gathering page reads under ``profile``: in the runner only the published ones (a build never
    reads a reader's hand runs), by hand also the newer hand runs."""
    root = results_root()
    return Sources(root / profile, None if in_runner() else root / INTERACTIVE / profile)


def folder_of(where: Path | Sources, chapter: str) -> Path:
    """The folder of ``chapter``'s results: ``where`` itself, or the one ``Sources`` chooses."""
    return where.folder(chapter) if isinstance(where, Sources) else where


def results_dir(profile: str) -> Path:
    """Where a chapter writes: $QKOV_RESULTS_DIR if set (the runner's staging folder), else
    <root>/interactive/<profile>, so a chapter run from JupyterLab or papermill never overwrites the runner's units."""
    override = os.environ.get(RESULTS_ENV)
    return Path(override) if override else results_root() / INTERACTIVE / profile


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultsError(RuntimeError):
    """A chapter's results that are missing, incomplete or changed since they were written."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def table_path(folder: Path, chapter: str, table: str) -> Path:
    return folder / (f"{chapter}.csv" if table == "main" else f"{chapter}.{table}.csv")


def read_meta(folder: Path, chapter: str) -> dict[str, Any]:
    """A chapter's metadata; ResultsError when it is missing or unreadable."""
    path = folder / f"{chapter}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"no results for {chapter!r} in {folder}") from None
    except (OSError, ValueError) as err:
        raise ResultsError(f"{path} is unreadable ({type(err).__name__}); rerun the chapter with --force") from None


def _seal(meta: dict[str, Any]) -> str:
    """The sha256 of the metadata without its seal, as JSON with sorted keys."""
    body = {k: v for k, v in meta.items() if k != SEAL}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def check(folder: Path, chapter: str) -> dict[str, Any]:
    """The chapter's metadata after checking its seal (a hand edit breaks it) and that every file it lists is present
    with the recorded sha256; ResultsError naming the first thing that is not."""
    meta = read_meta(folder, chapter)
    if SEAL not in meta:
        raise ResultsError(
            f"{folder / f'{chapter}.json'} has no seal (written by an older version or by hand); rerun the chapter"
        )
    if meta[SEAL] != _seal(meta):
        raise ResultsError(
            f"{folder / f'{chapter}.json'} changed after it was written (its seal differs: edited by "
            f"hand?); rerun the chapter"
        )
    for name, digest in meta.get("files", {}).items():
        path = folder / name
        if not path.is_file():
            raise ResultsError(f"{path} is missing; rerun the chapter")
        if sha256_file(path) != digest:
            raise ResultsError(f"{path} changed after it was written (sha256 differs); rerun the chapter")
    return meta


def save(folder: Path, chapter: str, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> list[Path]:
    """Write each table as CSV, then the metadata (the list of tables and each file's sha256) as JSON, last: the
    JSON is what marks the set complete. Returns the paths written."""
    paths = []
    for name, frame in tables.items():
        path = table_path(folder, chapter, name)
        write_atomic(path, frame.to_csv(index=False))
        paths.append(path)
    meta = {**meta, "tables": sorted(tables), "files": {p.name: sha256_file(p) for p in paths}}
    return [*paths, write_meta(folder, chapter, meta)]


def write_meta(folder: Path, chapter: str, meta: dict[str, Any]) -> Path:
    """Write the metadata with its seal (``SEAL``: the sha256 of the rest, as it reads back), through a temporary
    file."""
    path = folder / f"{chapter}.json"
    meta = json.loads(json.dumps({k: v for k, v in meta.items() if k != SEAL}, default=str))
    write_atomic(path, json.dumps({**meta, SEAL: _seal(meta)}, indent=2, sort_keys=True) + "\n")
    return path


def load(folder: Path, chapter: str) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Read back what ``save`` wrote, after ``check``."""
    meta = check(folder, chapter)
    tables = {name: pd.read_csv(table_path(folder, chapter, name)) for name in meta["tables"]}
    return tables, meta


def profile_tables(root: Path, profile: str, page: str) -> dict[str, pd.DataFrame] | None:
    """A chapter's tables as run under ``profile`` into the results root ``root`` (``load``, checked
    against its sealed metadata), to set beside another profile's; None when that unit is missing or fails its
    check."""
    unit = profile_unit(root, profile, page)
    return None if unit is None else unit[0]


def profile_unit(root: Path, profile: str, page: str) -> tuple[dict[str, pd.DataFrame], dict] | None:
    """``profile_tables`` with the unit's metadata (the parameters it ran with among them)."""
    try:
        return load(root / profile, page)
    except ResultsError:
        return None


def git_commit() -> str | None:
    """The repository's HEAD commit, with '+dirty' when tracked files differ from it; None outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")
