"""Tidy results: data/results/<profile>/<chapter>[.<table>].csv and <chapter>.json metadata, written atomically."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

RESULTS_ENV = "QKOV_RESULTS_DIR"
ROOT_ENV = "QKOV_RESULTS_ROOT"
PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent


def results_root() -> Path:
    """Where every profile's results live: $QKOV_RESULTS_ROOT if set (by the runner), else data/results."""
    return Path(os.environ.get(ROOT_ENV) or REPO_ROOT / "data" / "results")


def results_dir(profile: str) -> Path:
    """Where a chapter writes: $QKOV_RESULTS_DIR if set (the runner's staging folder), else <root>/<profile>."""
    override = os.environ.get(RESULTS_ENV)
    return Path(override) if override else results_root() / profile


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


def table_path(folder: Path, chapter: str, table: str) -> Path:
    return folder / (f"{chapter}.csv" if table == "main" else f"{chapter}.{table}.csv")


def save(folder: Path, chapter: str, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> list[Path]:
    """Write each table as CSV and the metadata (with the list of tables) as JSON; returns the paths written."""
    paths = []
    for name, frame in tables.items():
        path = table_path(folder, chapter, name)
        write_atomic(path, frame.to_csv(index=False))
        paths.append(path)
    meta = {**meta, "tables": sorted(tables)}
    json_path = folder / f"{chapter}.json"
    write_atomic(json_path, json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    return paths + [json_path]


def load(folder: Path, chapter: str) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Read back what ``save`` wrote."""
    meta = json.loads((folder / f"{chapter}.json").read_text())
    tables = {name: pd.read_csv(table_path(folder, chapter, name)) for name in meta["tables"]}
    return tables, meta


def git_commit() -> str | None:
    """The repository's HEAD commit, with '+dirty' when tracked files differ from it; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def library_fingerprint() -> str:
    """sha256 over every qkov_lib source file: changes whenever the library changes."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
