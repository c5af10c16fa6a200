"""Stored runs in results bundles: a bundle carries the stored runs (``runs.store``) its units were made from, in the
scratch store's form, ``store/<profile>/<chapter>/<run>-<key12>.json`` beside its tables, so that the published
site, ``results pack``/``unpack`` and the fetch move the same files the store keeps. An unpack moves them into the
scratch store (``<results>/store/``), where a chapter whose run has the same key takes it instead of computing it,
even when the page itself is stale here; the runner's run of a stored profile then commits it (``runs.store``)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ..core import files, results
from ..runs import store
from . import catalog, units

STORE = "store"  # <bundle>/store/<profile>/<chapter>/<run>-<key12>.<json|csv|table.csv>
DEPTH = 4
RUN_FILE = re.compile(r"(?P<stem>[A-Za-z0-9_-]+-[0-9a-f]{12})(?:\.json|(?:\.[A-Za-z0-9_]+)?\.csv)")


def place(name: str, profile: str) -> str | None:
    """The chapter a bundle member ``store/<profile>/<chapter>/<run file>`` belongs to; None outside that layout."""
    parts = PurePosixPath(name).parts
    ok = (
        len(parts) == DEPTH
        and parts[0] == STORE
        and parts[1] == profile
        and parts[2] in catalog.CHAPTERS
        and RUN_FILE.fullmatch(parts[3])
    )
    return parts[2] if ok else None


def _stem(name: str, digest: str) -> str:
    return f"{name}-{digest[:12]}"


def find(profile: str, chapter: str, name: str, digest: str, results_root: Path) -> tuple[Path, str] | None:
    """Where the run ``name`` under the key ``digest`` lies, checked (the committed store first, then the scratch
    store under ``results_root``): its folder and file stem; None when neither holds it whole."""
    for folder, stem in (
        (store.committed_root() / profile / chapter, name),
        (results_root / STORE / profile / chapter, _stem(name, digest)),
    ):
        try:
            meta = files.check(folder, stem)
        except (results.ResultsError, OSError):
            continue
        if store.sha(meta.get("key")) == digest:
            return folder, stem
    return None


def export(profile: str, unit_metas: Mapping[str, Mapping[str, Any]], results_root: Path, into: Path) -> list[Path]:
    """Copy the stored runs each unit used (chapter -> its metadata, whose ``stored_runs.keys`` name them) into
    ``into/store/<profile>/<chapter>/`` in the scratch store's form, the bytes of each table unchanged; the files
    written. A run no longer held (the store was reset since) is left out: the unit travels without it."""
    written: list[Path] = []
    for chapter, meta in unit_metas.items():
        keys = (meta.get("stored_runs") or {}).get("keys") or {}
        for name, digest in sorted(keys.items()):
            if (where := find(profile, chapter, name, digest, results_root)) is not None:
                written += _copy(*where, into / STORE / profile / chapter, _stem(name, digest))
    return written


def _copy(folder: Path, stem: str, target: Path, new_stem: str) -> list[Path]:
    """A stored run's files under another stem: the tables' bytes as they are, the metadata listing their new names
    (sealed again)."""
    meta = files.read_meta(folder, stem)
    target.mkdir(parents=True, exist_ok=True)
    copied = {}
    for table in meta["tables"]:
        source, dest = results.table_path(folder, stem, table), results.table_path(target, new_stem, table)
        shutil.copyfile(source, dest)
        copied[dest.name] = meta["files"][source.name]
    return [*(target / f for f in copied), results.write_meta(target, new_stem, {**meta, "files": copied})]


def check(staged: Path, profile: str) -> str | None:
    """The first problem with the stored runs staged under ``staged/store/<profile>/``: a run whose seal or files do
    not check, whose metadata names another run, chapter, profile or key than its path, or a file no run lists;
    None when every run is whole."""
    root = staged / STORE / profile
    for folder in sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []:
        listed: set[str] = set()
        for meta_path in sorted(folder.glob("*.json")):
            stem = meta_path.stem
            try:
                meta = files.check(folder, stem)
            except results.ResultsError as err:
                return f"its stored run {folder.name}/{stem} is unusable ({err})"
            want = _stem(str(meta.get("run")), store.sha(meta.get("key")))
            if (meta.get("chapter"), meta.get("profile"), want) != (folder.name, profile, stem):
                return f"its stored run {folder.name}/{stem} names another run, chapter, profile or key inside"
            listed |= {*meta.get("files", {}), meta_path.name}
        if stray := sorted(p.name for p in folder.iterdir() if p.name not in listed):
            return f"it holds {folder.name}/{stray[0]}, which no stored run lists"
    return None


def refuse_links(staged: Path, profile: str, results_root: Path) -> None:
    """LinkedPath when a folder the staged runs would move into is a symbolic link (checked before anything moves)."""
    root = staged / STORE / profile
    for chapter in sorted(p.name for p in root.iterdir()) if root.is_dir() else []:
        for path in (results_root / STORE, results_root / STORE / profile, results_root / STORE / profile / chapter):
            units.refuse_link(path, "a folder of the results store")


def move_in(staged: Path, profile: str, results_root: Path) -> int:
    """Move the staged runs into the scratch store, each run's tables before its metadata (what marks it whole); the
    number of runs moved. A run held there whole under the same key is kept as it is: a bundle never replaces it."""
    root, moved = staged / STORE / profile, 0
    for meta_path in sorted(root.glob("*/*.json")) if root.is_dir() else []:
        target = results_root / STORE / profile / meta_path.parent.name
        if (target / meta_path.name).is_file() and _whole(target, meta_path.stem):
            continue
        target.mkdir(parents=True, exist_ok=True)
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        for name in [*meta["files"], meta_path.name]:
            source = files.plain_name(name, meta_path.parent, meta_path)
            os.replace(source, files.plain_name(name, target, meta_path))
        moved += 1
    return moved


def _whole(folder: Path, stem: str) -> bool:
    try:
        files.check(folder, stem)
    except results.ResultsError:
        return False
    return True


def count(manifest: Mapping[str, Any]) -> int:
    """How many stored runs a bundle's manifest lists."""
    return sum(1 for f in manifest["files"] if f["path"].startswith(f"{STORE}/") and f["path"].endswith(".json"))
