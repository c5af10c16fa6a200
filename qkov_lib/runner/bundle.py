"""Results bundles: one tar.gz of a profile's units (every chapter's tables, executed notebook and metadata), of the
stored runs they were made from (``bundle_store``) and of the sweep cells its atlas uses, with a manifest (format
version, profile, commit, each file's path, sha256 and size). ``python -m qkov_lib results pack PROFILE FILE`` writes
one (``pack``, here); ``results unpack FILE`` restores it, after ``bundle_check`` has checked the whole of it.

The manifest is this project's own rather than BagIt's: BagIt's checksums and validator would replace ~20 lines of
hashing, but not the checks that matter here (the layout, the profile, unit membership, size caps)."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..core import results
from ..core.paths import RESULTS_ROOT
from . import bundle_store, catalog
from .catalog import resolve

FORMAT = "qkov-results-bundle"
VERSION = 1
MANIFEST = "manifest.json"
SWEEPS = "sweeps"  # <results root>/sweeps/<name>/<digest>/<cell>.csv
PACK_HINT = "pack the results again with `python -m qkov_lib results pack`"


class BundleError(RuntimeError):
    """A bundle that cannot be written or restored; the message names the file, the problem and the fix."""


def _sweep_hook(name: str, module: ModuleType) -> Callable[[str], list[Path]]:
    """A chapter's folders of sweep cells under a profile, relative to the results root (its current code)."""

    def folders(profile: str) -> list[Path]:
        return [
            folder.relative_to(results.results_root()) for folder in module.sweep_folders(resolve(name, profile)[1])
        ]

    return folders


# the chapters that run a sweep: each declares ``sweep_folders(setup)`` in its module, as it declares ``DATASETS``
SWEEP_FOLDERS: dict[str, Callable[[str], list[Path]]] = {
    name: _sweep_hook(name, module) for name, module in catalog.CHAPTERS.items() if hasattr(module, "sweep_folders")
}


@dataclass
class Packed:
    """What ``pack`` wrote: the manifest, the chapters packed, and the units left out (with why)."""

    manifest: dict[str, Any]
    units: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    sweep_cells: int = 0
    stored_runs: int = 0


def unit_files(folder: Path) -> tuple[dict[str, list[Path]], dict[str, str]]:
    """Each intact unit in a profile's folder (chapter -> its files, metadata last), and the units left out because
    they are damaged or incomplete (chapter -> why)."""
    units, left_out = {}, {}
    for meta in sorted(folder.glob("*.json")):
        chapter = meta.stem
        if "." in chapter or chapter.startswith("."):
            continue
        try:
            listed = results.check(folder, chapter).get("files", {})
        except results.ResultsError as err:
            left_out[chapter] = str(err)
            continue
        units[chapter] = [folder / name for name in sorted(listed)] + [meta]
    return units, left_out


def sweep_files(profile: str, results_root: Path, chapters: Sequence[str] | None = None) -> list[Path]:
    """The finished cells of every sweep the profile's chapters (``chapters``, default all) use under this code,
    also of a chapter without an intact unit (a sweep the time budget stopped: the next build continues from its
    cells)."""
    return [
        cell
        for chapter, folders in SWEEP_FOLDERS.items()
        if chapters is None or chapter in chapters
        for rel in folders(profile)
        for cell in sorted((results_root / rel).glob("*.csv"))
    ]


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info


def sweep_names(profile: str) -> set[str]:
    """The sweeps a bundle of ``profile`` may hold cells of: the folders' names of every sweep hook."""
    return {Path(rel).parts[1] for folders in SWEEP_FOLDERS.values() for rel in folders(profile)}


def _write_bundle(tmp: str, manifest: dict[str, Any], paths: dict[str, Path]) -> None:
    """The tar.gz: the manifest, then every file it lists; no time stamps (the same units give the same bytes)."""
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        text = json.dumps(manifest, indent=1).encode()
        tar.addfile(_tarinfo(MANIFEST, len(text)), io.BytesIO(text))
        for entry in manifest["files"]:
            with open(paths[entry["path"]], "rb") as fh:
                tar.addfile(_tarinfo(entry["path"], entry["size"]), fh)


def pack(
    profile: str, target: Path, results_root: Path = RESULTS_ROOT, chapters: Sequence[str] | None = None
) -> Packed:
    """Write the profile's intact units, the stored runs they were made from and its sweeps' cells to ``target``
    (tar.gz, streamed through a temporary file beside it: the target is whole or as it was); ``chapters`` packs
    those chapters' alone."""
    folder = results_root / profile
    if not folder.is_dir():
        raise BundleError(
            f"there are no results of profile {profile!r} in {results_root}; run `python -m qkov_lib "
            f"reproduce --profile {profile}` first, or name the folder with --results"
        )
    if target.is_dir():
        raise BundleError(f"{target} is a folder; give the bundle's file name, like {target / f'{profile}.tar.gz'}")
    units, left_out = unit_files(folder)
    if chapters is not None:
        units = {c: files for c, files in units.items() if c in chapters}
        left_out = {c: why for c, why in left_out.items() if c in chapters}
    if not units:
        raise BundleError(
            f"{folder} holds no intact unit to pack ({len(left_out)} left out: "
            f"{'; '.join(left_out.values()) or 'none found'}); rerun the chapters first"
        )
    with tempfile.TemporaryDirectory(prefix="qkov-pack-") as runs:
        metas = {c: results.read_meta(folder, c) for c in units}
        exported = {
            p.relative_to(runs).as_posix(): p for p in bundle_store.export(profile, metas, results_root, Path(runs))
        }
        paths = {
            p.relative_to(results_root).as_posix(): p
            for p in [p for files in units.values() for p in files] + sweep_files(profile, results_root, chapters)
        } | exported
        manifest = _write(target, profile, paths)
    cells = sum(1 for name in paths if name.startswith(f"{SWEEPS}/"))
    return Packed(manifest, sorted(units), left_out, cells, bundle_store.count(manifest))


def _write(target: Path, profile: str, paths: dict[str, Path]) -> dict[str, Any]:
    """Write the bundle of ``paths`` (its member names -> the files) to ``target`` through a temporary file beside
    it; the manifest."""
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "profile": profile,
        "commit": results.git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "files": [
            {"path": name, "sha256": results.sha256_file(p), "size": p.stat().st_size} for name, p in paths.items()
        ],
    }
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as err:
        raise BundleError(f"cannot write {target} ({err.strerror}); name a file in a writable folder") from None
    try:
        _write_bundle(tmp, manifest, paths)
        os.replace(tmp, target)
    except OSError as err:
        raise BundleError(
            f"cannot write {target} ({err.strerror}); free space or fix permissions, then pack "
            f"again (nothing was written)"
        ) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return manifest
