"""Results bundles: one tar.gz of a profile's units (every chapter's tables, executed notebook and metadata) and of
the sweep cells its atlas uses, with a manifest (format version, profile, commit, each file's path, sha256 and
size). ``python -m qkov_lib results pack PROFILE FILE`` writes one; ``results unpack FILE`` restores it.

Unpacking refuses, with one message naming the problem and the fix, a file that is damaged, truncated or foreign
(not ours, another format version, a path escaping the results folder, a member the manifest does not list, an entry
the archive lacks). Everything is extracted into a temporary folder beside the target and checked against the
manifest first; only then is each unit moved in, metadata last, under the chapter's lock. The runner checks restored
units as any other (``results.check``) before it reuses them."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from . import results
from .chapter import PROFILES
from .chapters import atlas
from .reproduce import RESULTS_ROOT, chapter_lock, resolve
from .sweep import cell_folder

FORMAT = "qkov-results-bundle"
VERSION = 1
MANIFEST = "manifest.json"
GZIP_MAGIC = b"\x1f\x8b"
SWEEPS = "sweeps"  # <results root>/sweeps/<name>/<digest>/<cell>.csv
SWEEP_DEPTH = 4  # sweeps / name / digest / cell.csv
PACK_HINT = "pack the results again with `python -m qkov_lib results pack`"


class BundleError(RuntimeError):
    """A bundle that cannot be written or restored; the message names the file, the problem and the fix."""


def _atlas_sweep(profile: str) -> list[Path]:
    """The atlas's folder of sweep cells under ``profile``, relative to the results root (its current code)."""
    setup = resolve("atlas", profile)[1]
    return [cell_folder("atlas", atlas.shared(setup), atlas.run_setting).relative_to(results.results_root())]


# --- hook: the chapters that run a sweep, and where their cells are (one entry per chapter; moves with the atlas)
SWEEP_FOLDERS: dict[str, Callable[[str], list[Path]]] = {"atlas": _atlas_sweep}


@dataclass
class Packed:
    """What ``pack`` wrote: the manifest, the chapters packed, and the units left out (with why)."""

    manifest: dict[str, Any]
    units: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    sweep_cells: int = 0


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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


def sweep_files(profile: str, units: Mapping[str, list[Path]], results_root: Path) -> list[Path]:
    """The finished cells of every sweep that the profile's packed chapters use."""
    files = []
    for chapter, folders in SWEEP_FOLDERS.items():
        if chapter in units:
            for rel in folders(profile):
                files += sorted((results_root / rel).glob("*.csv"))
    return files


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info


def pack(profile: str, target: Path, results_root: Path = RESULTS_ROOT) -> Packed:
    """Write the profile's intact units and their sweep cells to ``target`` (tar.gz, through a temporary file
    beside it: the target is whole or as it was)."""
    folder = results_root / profile
    if not folder.is_dir():
        raise BundleError(f"there are no results of profile {profile!r} in {results_root}; run `python -m qkov_lib "
                          f"reproduce --profile {profile}` first, or name the folder with --results")
    units, left_out = unit_files(folder)
    paths = [p for files in units.values() for p in files] + sweep_files(profile, units, results_root)
    blobs = {p.relative_to(results_root).as_posix(): p.read_bytes() for p in paths}
    manifest = {"format": FORMAT, "version": VERSION, "profile": profile, "commit": results.git_commit(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "files": [{"path": name, "sha256": _sha(data), "size": len(data)} for name, data in blobs.items()]}
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            text = json.dumps(manifest, indent=1).encode()
            tar.addfile(_tarinfo(MANIFEST, len(text)), io.BytesIO(text))
            for name, data in blobs.items():
                tar.addfile(_tarinfo(name, len(data)), io.BytesIO(data))
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    cells = sum(1 for name in blobs if name.startswith(f"{SWEEPS}/"))
    return Packed(manifest, sorted(units), left_out, cells)


def _safe(name: str, profile: str) -> PurePosixPath | None:
    """A member's path, if it stays inside the results folder in the bundle's layout: <profile>/<file> or
    sweeps/<name>/<digest>/<cell>.csv; None otherwise."""
    path = PurePosixPath(name)
    parts = path.parts
    if path.is_absolute() or not parts or any(p in ("", ".", "..") or p.startswith(".") or "\\" in p for p in parts):
        return None
    if (parts[0] == profile and len(parts) == 2) or (parts[0] == SWEEPS and len(parts) == SWEEP_DEPTH):
        return path
    return None


def _manifest(tar: tarfile.TarFile, where: Path) -> dict[str, Any]:
    """The bundle's manifest, checked: ours, this format version, a profile, a list of files."""
    try:
        member = tar.getmember(MANIFEST)
        manifest = json.loads(tar.extractfile(member).read())
    except KeyError:
        raise BundleError(f"{where} is not a results bundle (it has no {MANIFEST}); give a file written by "
                          f"`python -m qkov_lib results pack`") from None
    except (ValueError, AttributeError):
        raise BundleError(f"{where} is not a results bundle ({MANIFEST} is not readable JSON); give a file written "
                          f"by `python -m qkov_lib results pack`") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{where} is not a results bundle (its manifest is not of format {FORMAT!r}); give a file "
                          f"written by `python -m qkov_lib results pack`")
    if manifest.get("version") != VERSION:
        raise BundleError(f"{where} is a results bundle of format version {manifest.get('version')!r}; this library "
                          f"reads version {VERSION}: {PACK_HINT}")
    files = manifest.get("files")
    if not (isinstance(manifest.get("profile"), str) and isinstance(files, list) and all(
            isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("sha256"), str)
            and isinstance(f.get("size"), int) for f in files)):
        raise BundleError(f"{where} has a malformed manifest (a profile and a list of files, each with its path, "
                          f"sha256 and size); {PACK_HINT}")
    return manifest


def _members(tar: tarfile.TarFile, manifest: dict[str, Any], where: Path) -> dict[str, tarfile.TarInfo]:
    """The archive's files, after checking that each is a plain file at a safe path, listed once in the manifest,
    and that every manifest entry is in the archive."""
    profile = manifest["profile"]
    listed = [f["path"] for f in manifest["files"]]
    members: dict[str, tarfile.TarInfo] = {}
    for member in tar.getmembers():
        if member.name == MANIFEST:
            continue
        if _safe(member.name, profile) is None:
            raise BundleError(f"{where} holds a path outside the results layout ({member.name!r}: it escapes the "
                              f"folder or is not <profile>/<file> or sweeps/...); refusing it: {PACK_HINT}")
        if not member.isfile():
            raise BundleError(f"{where} holds {member.name}, which is not a plain file (a link or a folder); "
                              f"refusing it: {PACK_HINT}")
        if member.name in members:
            raise BundleError(f"{where} holds {member.name} twice; {PACK_HINT}")
        members[member.name] = member
    for name in listed:
        if _safe(name, profile) is None:
            raise BundleError(f"{where}'s manifest names a path outside the results layout ({name!r}); refusing it: "
                              f"{PACK_HINT}")
    extra = sorted(set(members) - set(listed))
    if extra:
        raise BundleError(f"{where} holds {extra[0]}, which its manifest does not list (the bundle was altered); "
                          f"{PACK_HINT}")
    missing = sorted(set(listed) - set(members))
    if missing:
        raise BundleError(f"{where}'s manifest lists {missing[0]}, which the archive lacks (the bundle is "
                          f"incomplete); {PACK_HINT}")
    if len(set(listed)) != len(listed):
        raise BundleError(f"{where}'s manifest lists a file twice; {PACK_HINT}")
    return members


def _extract(tar: tarfile.TarFile, manifest: dict[str, Any], members: Mapping[str, tarfile.TarInfo],
             into: Path, where: Path) -> None:
    """Write every file under ``into``, checking its size and sha256 against the manifest."""
    for entry in manifest["files"]:
        data = tar.extractfile(members[entry["path"]]).read()
        if len(data) != entry["size"] or _sha(data) != entry["sha256"]:
            raise BundleError(f"{where} is damaged: {entry['path']} differs from its manifest (sha256); copy the "
                              f"bundle again, or {PACK_HINT}")
        path = into / entry["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _check_gzip(where: Path) -> None:
    """Read the whole gzip stream once: a file that is not gzip, or whose stream ends early (truncated) or fails its
    checks (damaged), is one BundleError."""
    with open(where, "rb") as fh:
        if fh.read(2) != GZIP_MAGIC:
            raise BundleError(f"{where} is not a results bundle (not a tar.gz archive); give a file written by "
                              f"`python -m qkov_lib results pack`")
    try:
        with gzip.open(where, "rb") as fh:
            while fh.read(1 << 20):
                pass
    except EOFError:
        raise BundleError(f"{where} is truncated (the archive ends early); copy it again, or {PACK_HINT}") from None
    except (gzip.BadGzipFile, zlib.error) as err:
        raise BundleError(f"{where} is damaged ({err}); copy it again, or {PACK_HINT}") from None


@contextmanager
def _reading(where: Path) -> Iterator[None]:
    """The tar layer's read errors (after the gzip stream checked out) as one BundleError."""
    try:
        yield
    except tarfile.ReadError as err:
        raise BundleError(f"{where} is not a results bundle (no tar archive inside the gzip: {err}); give a file "
                          f"written by `python -m qkov_lib results pack`") from None


def read(source: Path) -> dict[str, Any]:
    """The manifest of the bundle at ``source``, after checking the whole archive (every member and sha256) without
    writing anything; BundleError naming the problem."""
    with tempfile.TemporaryDirectory() as tmp:
        return _checked(source, Path(tmp))


def _checked(source: Path, into: Path) -> dict[str, Any]:
    """Extract the bundle into ``into`` after checking it; its manifest."""
    if not source.is_file():
        raise BundleError(f"{source} does not exist or is not a file; give the path of a bundle written by "
                          f"`python -m qkov_lib results pack`")
    _check_gzip(source)
    with _reading(source), tarfile.open(source, "r:gz") as tar:
        manifest = _manifest(tar, source)
        _extract(tar, manifest, _members(tar, manifest, source), into, source)
    return manifest


def _move_unit(staged: Path, final: Path, chapter: str, results_root: Path) -> None:
    """Replace the chapter's unit in ``final`` by the staged one, metadata last (as the runner publishes), under
    the chapter's lock."""
    with chapter_lock(results_root, chapter):
        final.mkdir(parents=True, exist_ok=True)
        (final / f"{chapter}.json").unlink(missing_ok=True)
        for old in final.glob(f"{chapter}.*"):
            old.unlink()
        for path in sorted(staged.glob(f"{chapter}.*")):
            if path.name != f"{chapter}.json":
                os.replace(path, final / path.name)
        os.replace(staged / f"{chapter}.json", final / f"{chapter}.json")


@dataclass
class Unpacked:
    """What ``unpack`` restored: the manifest, the units moved in, the sweep cells, and units that fail their check
    (they rerun)."""

    manifest: dict[str, Any]
    units: list[str]
    sweep_cells: int
    failing: dict[str, str]


def unpack(source: Path, results_root: Path = RESULTS_ROOT, profile: str | None = None) -> Unpacked:
    """Restore a bundle into ``results_root``: extract into a temporary folder beside it and check every file, then
    move the units in (each replacing the unit of the same chapter) and the sweep cells. ``profile``, when given,
    must be the bundle's. On any error nothing in ``results_root`` has changed."""
    try:
        results_root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=results_root, prefix=".unpack-"))
    except OSError as err:
        raise BundleError(f"cannot write into {results_root} ({err.strerror}); name a writable folder with "
                          f"--results") from None
    try:
        try:
            manifest = _checked(source, tmp)
        except OSError as err:
            raise BundleError(f"cannot write into {results_root} ({err.strerror}); free space or fix permissions, "
                              f"then unpack again") from None
        name = manifest["profile"]
        if profile is not None and name != profile:
            raise BundleError(f"{source} holds the results of profile {name!r}, not {profile!r}; give a bundle of "
                              f"{profile!r}")
        units = sorted({p.name.split(".")[0] for p in (tmp / name).glob("*.json")}) if (tmp / name).is_dir() else []
        cells = sorted((tmp / SWEEPS).rglob("*.csv")) if (tmp / SWEEPS).is_dir() else []
        for chapter in units:
            _move_unit(tmp / name, results_root / name, chapter, results_root)
        for cell in cells:
            target = results_root / cell.relative_to(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(cell, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    failing = {}
    for chapter in units:
        try:
            results.check(results_root / name, chapter)
        except results.ResultsError as err:
            failing[chapter] = str(err)
    return Unpacked(manifest, units, len(cells), failing)


def add_commands(sub: Any) -> None:
    """``results pack PROFILE FILE`` and ``results unpack FILE`` on the command line's subparsers."""
    cmd = sub.add_parser("results", help="pack a profile's results into one file (tar.gz), or restore one")
    actions = cmd.add_subparsers(dest="action", required=True)
    pk = actions.add_parser("pack", help="write a profile's units and sweep cells to FILE")
    pk.add_argument("profile", choices=PROFILES)
    pk.add_argument("file", type=Path)
    up = actions.add_parser("unpack", help="restore a bundle written by `results pack`")
    up.add_argument("file", type=Path)
    up.add_argument("--profile", choices=PROFILES, help="refuse a bundle of another profile")
    for p in (pk, up):
        p.add_argument("--results", type=Path, default=RESULTS_ROOT, help="root of tidy results (<root>/<profile>)")


def command(args: Any) -> int:
    """Run ``results pack`` or ``results unpack``; 1 with one message when the bundle is refused."""
    try:
        if args.action == "pack":
            packed = pack(args.profile, args.file, args.results)
            for chapter, why in packed.left_out.items():
                print(f"left out {chapter}: {why}", file=sys.stderr)
            print(f"packed {len(packed.units)} units of profile {args.profile} and {packed.sweep_cells} sweep cells "
                  f"into {args.file} ({args.file.stat().st_size / 1e6:.1f} MB)")
        else:
            done = unpack(args.file, args.results, args.profile)
            for chapter, why in done.failing.items():
                print(f"{chapter} fails its check and will rerun: {why}", file=sys.stderr)
            commit = (done.manifest.get("commit") or "an unknown commit")[:12]
            print(f"restored {len(done.units)} units of profile {done.manifest['profile']} (packed at {commit}) and "
                  f"{done.sweep_cells} sweep cells into {args.results}")
    except BundleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
