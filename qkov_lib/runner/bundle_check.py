"""The checks of a results bundle (``bundle``) before anything in a results folder changes: ``read`` (its manifest) and
``check_into`` (every member staged beside the target and checked), which ``unpack`` runs.

A file that is damaged, truncated or foreign is refused with one message naming the problem and the fix: not ours,
another format version, a profile that is not one of this book's, a member outside the layout a bundle may hold
(``<profile>/<chapter>.json``, ``.ipynb``, ``.csv`` or ``.<table>.csv`` of a chapter of this book, or a stored
run's ``store/<profile>/<chapter>/<run>-<key12>.*``, which carries its own key and seal), a link, a
member the manifest does not list or lists with another size, a unit file its unit does not list, a unit or run that
fails its own check, or sizes past the caps (``MAX_*``). Members are streamed to a staging folder beside the target
(never whole in memory), each checked against its size and sha256 as it is written; then the units move in one at a
time, metadata last, under the chapter's lock, and the stored runs after them."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO, Any

from ..core import files, results
from ..core.chapter import PROFILES
from . import bundle_store, catalog
from .bundle import (
    FORMAT,
    MANIFEST,
    PACK_HINT,
    VERSION,
    BundleError,
)

GZIP_MAGIC = b"\x1f\x8b"
UNIT_FILE = re.compile(r"(?P<chapter>[a-z0-9_]+)(?:\.(?:json|ipynb)|(?:\.[A-Za-z0-9_]+)?\.csv)")
MAX_MEMBER = 1 << 30  # 1 GiB: no file of a unit or a stored run comes near it
MAX_METADATA = 16 << 20  # a unit's metadata is kilobytes
MAX_TOTAL = 16 << 30


def _place(name: str, profile: str) -> str | None:
    """Where a member belongs: its chapter for a unit file (<profile>/<chapter>.json, .ipynb, .csv or
    .<table>.csv, of a chapter of this book), ``bundle_store.STORE`` for a stored run's file; None for anything
    else (loose sweep cells among them: they carry no key or seal)."""
    parts = PurePosixPath(name).parts
    if name != PurePosixPath(name).as_posix() or "\\" in name:
        return None
    unit = UNIT_FILE.fullmatch(parts[-1]) if parts else None
    if len(parts) == 2 and parts[0] == profile and unit and unit["chapter"] in catalog.CHAPTERS:
        return unit["chapter"]
    return bundle_store.STORE if bundle_store.place(name, profile) else None


def _manifest(tar: tarfile.TarFile, where: Path) -> dict[str, Any]:
    """The bundle's manifest, checked: ours, this format version, one of the book's profiles, a list of files with
    sizes within the caps."""
    try:
        member = tar.getmember(MANIFEST)
        stream = tar.extractfile(member) if member.isfile() and member.size <= MAX_METADATA else None
        if stream is None:
            raise ValueError
        manifest = json.loads(stream.read())
    except KeyError:
        raise BundleError(
            f"{where} is not a results bundle (it has no {MANIFEST}); give a file written by "
            f"`python -m qkov_lib results pack`"
        ) from None
    except (ValueError, AttributeError):
        raise BundleError(
            f"{where} is not a results bundle ({MANIFEST} is not readable JSON); give a file written "
            f"by `python -m qkov_lib results pack`"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(
            f"{where} is not a results bundle (its manifest is not of format {FORMAT!r}); give a file "
            f"written by `python -m qkov_lib results pack`"
        )
    if manifest.get("version") != VERSION:
        raise BundleError(
            f"{where} is a results bundle of format version {manifest.get('version')!r}; this library "
            f"reads version {VERSION}: {PACK_HINT}"
        )
    files = manifest.get("files")
    if not (
        isinstance(manifest.get("profile"), str)
        and isinstance(files, list)
        and all(
            isinstance(f, dict)
            and isinstance(f.get("path"), str)
            and isinstance(f.get("sha256"), str)
            and isinstance(f.get("size"), int)
            and not isinstance(f.get("size"), bool)
            for f in files
        )
    ):
        raise BundleError(
            f"{where} has a malformed manifest (a profile and a list of files, each with its path, "
            f"sha256 and size); {PACK_HINT}"
        )
    if manifest["profile"] not in PROFILES:
        raise BundleError(
            f"{where} names profile {manifest['profile']!r}, which is not one of this book's "
            f"({', '.join(PROFILES)}); refusing it: {PACK_HINT}"
        )
    for f in files:
        cap = MAX_METADATA if f["path"].endswith(".json") else MAX_MEMBER
        if not 0 <= f["size"] <= cap:
            raise BundleError(
                f"{where} lists {f['path']!r} at {f['size']} bytes, past the cap of {cap} for such a "
                f"file; refusing it: {PACK_HINT}"
            )
    if sum(f["size"] for f in files) > MAX_TOTAL:
        raise BundleError(
            f"{where} lists {sum(f['size'] for f in files)} bytes in all, past the cap of "
            f"{MAX_TOTAL}; refusing it: {PACK_HINT}"
        )
    return manifest


def _members(tar: tarfile.TarFile, manifest: dict[str, Any], where: Path) -> dict[str, tarfile.TarInfo]:
    """The archive's files, after checking that each is a plain file in the bundle layout, listed once in the
    manifest with its size, and that every manifest entry is in the archive."""
    profile = manifest["profile"]
    listed = {f["path"]: f["size"] for f in manifest["files"]}
    if len(listed) != len(manifest["files"]):
        raise BundleError(f"{where}'s manifest lists a file twice; {PACK_HINT}")
    for name in listed:
        if _place(name, profile) is None:
            raise BundleError(
                f"{where}'s manifest names a path outside the results layout ({name!r}: not "
                f"{profile}/<chapter>.<json|ipynb|csv> of a chapter of this book, nor a stored run's "
                f"{bundle_store.STORE}/{profile}/<chapter>/<run>-<key>.<json|csv>); refusing it: {PACK_HINT}"
            )
    members: dict[str, tarfile.TarInfo] = {}
    for member in tar.getmembers():
        if member.name == MANIFEST:
            continue
        if _place(member.name, profile) is None:
            raise BundleError(
                f"{where} holds a path outside the results layout ({member.name!r}: it escapes the "
                f"folder or is not {profile}/<chapter>.<json|ipynb|csv> or {bundle_store.STORE}/...); "
                f"refusing it: {PACK_HINT}"
            )
        if not member.isfile():
            raise BundleError(
                f"{where} holds {member.name}, which is not a plain file (a link or a folder); refusing it: {PACK_HINT}"
            )
        if member.name in members:
            raise BundleError(f"{where} holds {member.name} twice; {PACK_HINT}")
        if member.name not in listed:
            raise BundleError(
                f"{where} holds {member.name}, which its manifest does not list (the bundle was altered); {PACK_HINT}"
            )
        if member.size != listed[member.name]:
            raise BundleError(
                f"{where} holds {member.name} at {member.size} bytes, but its manifest says "
                f"{listed[member.name]} (the bundle was altered); {PACK_HINT}"
            )
        members[member.name] = member
    missing = sorted(set(listed) - set(members))
    if missing:
        raise BundleError(
            f"{where}'s manifest lists {missing[0]}, which the archive lacks (the bundle is incomplete); {PACK_HINT}"
        )
    return members


def _stream(source: IO[bytes] | None, path: Path, entry: dict[str, Any], where: Path) -> None:
    """Copy one member to ``path`` in blocks, never past its listed size, checking its sha256 at the end."""
    if source is None:  # ``_members`` lets only plain files through, and tarfile reads every plain file
        raise BundleError(f"{where} holds {entry['path']}, which is not a plain file; refusing it: {PACK_HINT}")
    digest, size = hashlib.sha256(), 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        while block := source.read(1 << 20):
            size += len(block)
            if size > entry["size"]:
                break
            digest.update(block)
            out.write(block)
    if size != entry["size"] or digest.hexdigest() != entry["sha256"]:
        raise BundleError(
            f"{where} is damaged: {entry['path']} differs from its manifest (sha256); copy the "
            f"bundle again, or {PACK_HINT}"
        )


def _unit_members(manifest: dict[str, Any], staged: Path, where: Path) -> dict[str, list[str]]:
    """Each unit's files, after checking its staged metadata: every unit file in the bundle belongs to a unit whose
    metadata (sealed) lists it with the manifest's sha256."""
    profile, digests = manifest["profile"], {f["path"]: f["sha256"] for f in manifest["files"]}
    units: dict[str, list[str]] = {}
    for name in digests:
        if not name.startswith(f"{bundle_store.STORE}/"):
            unit = UNIT_FILE.fullmatch(PurePosixPath(name).name)
            if unit is None:  # ``_members`` refused every name outside the layout
                raise BundleError(f"{where}'s manifest names {name!r}, outside the results layout; {PACK_HINT}")
            units.setdefault(unit["chapter"], []).append(name)
    for chapter, names in units.items():
        meta_name = f"{profile}/{chapter}.json"
        if meta_name not in digests:
            raise BundleError(
                f"{where} holds {names[0]}, which belongs to no unit (the bundle has no {meta_name}); {PACK_HINT}"
            )
        try:
            listed = results.read_meta(staged / profile, chapter).get("files", {})
        except results.ResultsError as err:
            raise BundleError(f"{where}'s unit {chapter} is unusable ({err}); {PACK_HINT}") from None
        for name in names:
            file = PurePosixPath(name).name
            if name != meta_name and listed.get(file) != digests[name]:
                raise BundleError(
                    f"{where} holds {name}, which its unit's metadata does not list (or lists with "
                    f"another sha256); {PACK_HINT}"
                )
    return units


def _extract(
    tar: tarfile.TarFile, manifest: dict[str, Any], members: Mapping[str, tarfile.TarInfo], into: Path, where: Path
) -> None:
    """Stream every file under ``into``: the units' metadata first, which must list every other unit file, then
    the rest; each checked against its size and sha256 as it is written."""
    profile = manifest["profile"]
    entries = sorted(manifest["files"], key=lambda f: not f["path"].endswith(".json"))
    metas = [f for f in entries if f["path"].endswith(".json")]  # the units' and the stored runs'
    units = [f for f in metas if not f["path"].startswith(f"{bundle_store.STORE}/")]
    for entry in metas:
        _stream(tar.extractfile(members[entry["path"]]), into / entry["path"], entry, where)
    _unit_members(manifest, into, where)
    for entry in entries[len(metas) :]:
        _stream(tar.extractfile(members[entry["path"]]), into / entry["path"], entry, where)
    if why := bundle_store.check(into, profile):
        raise BundleError(f"{where} is refused: {why}; nothing was restored: {PACK_HINT}")
    for meta in units:
        chapter = PurePosixPath(meta["path"]).stem
        try:
            files.check(into / profile, chapter)
        except results.ResultsError as err:
            raise BundleError(
                f"{where}'s unit {chapter} fails its own check ({err}); nothing was restored, the "
                f"local unit is kept: {PACK_HINT}"
            ) from None


def _check_gzip(where: Path) -> None:
    """Read the whole gzip stream once: a file that is not gzip, or whose stream ends early (truncated) or fails its
    checks (damaged), is one BundleError."""
    with open(where, "rb") as fh:
        if fh.read(2) != GZIP_MAGIC:
            raise BundleError(
                f"{where} is not a results bundle (not a tar.gz archive); give a file written by "
                f"`python -m qkov_lib results pack`"
            )
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
        raise BundleError(
            f"{where} is not a results bundle (no tar archive inside the gzip: {err}); give a file "
            f"written by `python -m qkov_lib results pack`"
        ) from None


def read(source: Path) -> dict[str, Any]:
    """The manifest of the bundle at ``source``, after checking the whole archive (every member, sha256 and unit) in
    a temporary folder; BundleError naming the problem."""
    with tempfile.TemporaryDirectory() as tmp:
        return check_into(source, Path(tmp))


def check_into(source: Path, into: Path, profile: str | None = None) -> dict[str, Any]:
    """Extract the bundle into ``into`` after checking it, and check every unit there; its manifest. ``profile``,
    when given, must be the bundle's."""
    if not source.is_file():
        raise BundleError(
            f"{source} does not exist or is not a file; give the path of a bundle written by "
            f"`python -m qkov_lib results pack`"
        )
    _check_gzip(source)
    with _reading(source), tarfile.open(source, "r:gz") as tar:
        manifest = _manifest(tar, source)
        if profile is not None and manifest["profile"] != profile:
            raise BundleError(
                f"{source} holds the results of profile {manifest['profile']!r}, not {profile!r}; give "
                f"a bundle of {profile!r}"
            )
        members = _members(tar, manifest, source)
        need, free = sum(f["size"] for f in manifest["files"]), shutil.disk_usage(into).free
        if need > free:
            raise BundleError(
                f"{source} needs {need / 1e6:.0f} MB to unpack and {into.parent} has "
                f"{free / 1e6:.0f} MB free; free space, then unpack again"
            )
        _extract(tar, manifest, members, into, source)
    return manifest
