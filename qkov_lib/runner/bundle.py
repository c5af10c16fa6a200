"""Results bundles: one tar.gz of a profile's units (every chapter's tables, executed notebook and metadata) and of the
stored runs they were made from (``bundle_store``: the atlas's settings among them, each with its key and seal), with
a manifest (format version, profile, commit, each file's path, sha256 and size). ``python -m qkov_lib results pack
PROFILE FILE`` writes one (``pack``, here); ``results unpack FILE`` restores it, after ``bundle_check`` has checked
the whole of it.

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import files, results
from ..core.paths import RESULTS_ROOT
from . import bundle_store

FORMAT = "qkov-results-bundle"
VERSION = 2  # 2: stored runs (store/...) in place of loose sweep cells (sweeps/...), which carried no key or seal
MANIFEST = "manifest.json"
PACK_HINT = "pack the results again with `python -m qkov_lib results pack`"


class BundleError(RuntimeError):
    """A bundle that cannot be written or restored; the message names the file, the problem and the fix."""


@dataclass
class Packed:
    """What ``pack`` wrote: the manifest, the chapters packed, and the units left out (with why)."""

    manifest: dict[str, Any]
    units: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
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
            listed = files.check(folder, chapter).get("files", {})
        except results.ResultsError as err:
            left_out[chapter] = str(err)
            continue
        units[chapter] = [folder / name for name in sorted(listed)] + [meta]
    return units, left_out


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info


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
    """Write the profile's intact units and the stored runs they were made from to ``target``
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
        metas = {c: files.read_meta(folder, c) for c in units}
        exported = {
            p.relative_to(runs).as_posix(): p for p in bundle_store.export(profile, metas, results_root, Path(runs))
        }
        paths = {p.relative_to(results_root).as_posix(): p for files in units.values() for p in files} | exported
        manifest = _write(target, profile, paths)
    return Packed(manifest, sorted(units), left_out, bundle_store.count(manifest))


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
        files.umask_mode(tmp)
        os.replace(tmp, target)
    except OSError as err:
        raise BundleError(
            f"cannot write {target} ({err.strerror}); free space or fix permissions, then pack "
            f"again (nothing was written)"
        ) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return manifest
