"""The committed store's integrity (``runs.store``): one ``manifest.json`` per folder naming every file with its
sha256, written as runs are stored; a run is read only where its folder's manifest names it (``manifested``), and
``verify`` finds every stray, missing or edited file and every broken seal (tests/project/test_committed_store.py
runs it over the repository's store; ``results status --check`` too). ``repair`` rebuilds a folder's manifest from
the runs whose seals hold. Every name read from a metadata or a manifest is one plain name in its folder
(``files.plain_name``), and no store folder is a link (``refuse_links``): nothing outside the store is written."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core import files, paths, results

MANIFEST = "manifest.json"
REPAIR = "python -m qkov_lib results repair"


class StoreError(results.ResultsError):
    """The store cannot be used as it stands (a link, a damaged manifest or metadata, a folder that cannot be
    written): one line naming the file and the fix."""


def refuse_links(root: Path, folder: Path) -> None:
    """StoreError when the store's root, or a folder between it and ``folder``, is a symbolic link: the store never
    reads or writes through one."""
    parts = folder.relative_to(root).parts
    for path in (root, *(root.joinpath(*parts[: i + 1]) for i in range(len(parts)))):
        if path.is_symlink():
            raise StoreError(
                f"{path} is a symbolic link, not a folder of the results store; refusing to write through it: "
                f"replace it with a folder (rm '{path}'), then run again"
            )


def check_writable(folder: Path, committed: bool) -> None:
    """Before any run is computed into ``folder``: StoreError naming the place and the fix when the folder (or the
    nearest one above it that exists) cannot be written, or, in the committed store, when a metadata in it is no
    stored run's or its manifest is damaged (what storing a run would trip on after training; a manifest not yet
    written, as after a kill before the folder's first manifest, is written with the next run)."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise StoreError(
            f"cannot write into {existing} ({err.strerror}); make the results store writable, then run again "
            f"(nothing was computed)"
        ) from None
    if committed and folder.is_dir():
        stems = _stems(folder)
        for stem in stems:
            _meta(folder / f"{stem}.json")
        if stems and (folder / MANIFEST).exists():
            read_manifest(folder)


def read_manifest(folder: Path) -> dict[str, str]:
    """The folder's manifest (file name -> sha256); StoreError naming it and ``REPAIR`` when it is missing, not
    JSON (merge-conflict markers, an empty file), not a mapping of names to digests (a JSON list) or names none
    of the runs beside it (``{}``)."""
    path = folder / MANIFEST
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{path} is missing; rebuild it from the sealed runs: {REPAIR}") from None
    except (OSError, ValueError, RecursionError) as err:
        raise StoreError(
            f"{path} is damaged ({type(err).__name__}); rebuild it from the sealed runs: {REPAIR}"
        ) from None
    if not isinstance(listed, dict) or not all(isinstance(v, str) for v in listed.values()):
        raise StoreError(f"{path} is damaged (not a manifest); rebuild it from the sealed runs: {REPAIR}")
    if not listed and _stems(folder):
        raise StoreError(f"{path} is damaged (it names none of the runs beside it); rebuild it: {REPAIR}")
    return listed


def _stems(folder: Path) -> list[str]:
    """The stems of the folder's metadata files, its manifest aside."""
    return [p.stem for p in sorted(folder.glob("*.json")) if p.name != MANIFEST]


def _meta(path: Path) -> dict[str, Any]:
    """A stored run's metadata as JSON, read without checking its seal; StoreError naming the file otherwise."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        meta = err
    if not isinstance(meta, dict) or not isinstance(meta.get("files", {}), dict):
        raise StoreError(
            f"{path} is no stored run's metadata ({type(meta).__name__}: not a JSON object listing its files); "
            f"remove it, or compute its run again"
        )
    return meta


def meta_files(path: Path) -> list[str]:
    """The file names a stored run's metadata (``path``) lists, unchecked (``files.plain_name`` checks each where it
    becomes a path); StoreError naming the file where it is no run's metadata."""
    return list(_meta(path).get("files", {}))


def write_manifest(folder: Path, stems: Sequence[str] | None = None) -> None:
    """The folder's manifest: every file each stored run lists (``stems``: those runs; default every metadata in the
    folder), and the run's metadata, with their sha256."""
    listed: dict[str, str] = {}
    for stem in _stems(folder) if stems is None else stems:
        meta_path = folder / f"{stem}.json"
        named = _meta(meta_path).get("files", {})
        for name in named:
            files.plain_name(name, folder, meta_path)
        listed |= dict(named) | {meta_path.name: results.sha256_file(meta_path)}
    files.write_atomic(folder / MANIFEST, json.dumps(listed, indent=1, sort_keys=True) + "\n")


def manifested(folder: Path, stem: str) -> bool:
    """Whether ``folder``'s manifest names the stored run ``stem``'s metadata with its sha256 (which in turn names
    each table's): a run dropped into the committed store by hand, without its manifest entry, is not taken."""
    try:
        return read_manifest(folder).get(f"{stem}.json") == results.sha256_file(folder / f"{stem}.json")
    except (StoreError, OSError):
        return False


def damage(folder: Path, stem: str) -> str | None:
    """Why the committed run ``stem`` in ``folder`` cannot be read (its manifest, its seal, its files), in one line;
    None when it reads whole or is absent."""
    if not (folder / f"{stem}.json").is_file():
        return None
    try:
        read_manifest(folder)
        if not manifested(folder, stem):
            return f"{folder / MANIFEST} does not name {stem}.json with its sha256 (a stray or an edit)"
        files.check(folder, stem)
    except results.ResultsError as err:
        return str(err)
    return None


def repair(folder: Path) -> tuple[int, list[str]]:
    """Rebuild ``folder``'s manifest from the stored runs whose seals and files hold (``results.check``) and which
    name this folder's run, chapter and profile; how many it names, and the runs left out, one line each (``verify``
    then calls their files strays)."""
    kept, left = [], []
    for stem in _stems(folder):
        try:
            meta = files.check(folder, stem)
            where = (meta.get("run"), meta.get("chapter"), meta.get("profile"))
            if where != (stem, folder.name, folder.parent.name):
                raise results.ResultsError(f"{folder / f'{stem}.json'} names another run, chapter or profile {where}")
            kept.append(stem)
        except results.ResultsError as err:
            left.append(f"left out {folder / f'{stem}.json'}: {err}")
    write_manifest(folder, kept)
    return len(kept), left


def verify(root: Path, profile: str | None = None) -> list[str]:
    """What is wrong with a committed store (``profile``'s folders alone, where given): a folder without a readable
    manifest, a link, a file the manifest does not name (a stray), a file it names that is missing or whose sha256
    differs (edited), a stored run whose seal or files do not check. Empty when every file is accounted for."""
    top = root / profile if profile else root
    depth = 2 if profile else 3
    problems = [
        f"{p}: outside the store's layout (<profile>/<chapter>/<file>)"
        for p in sorted(top.rglob("*"))
        if p.is_file() and len(p.relative_to(top).parts) != depth
    ]
    problems += [f"{p}: a symbolic link in the store" for p in sorted(top.rglob("*")) if p.is_symlink()]
    folders = [
        f for f in top.glob("*" if profile else "*/*") if f.is_dir() and not (f.is_symlink() or f.parent.is_symlink())
    ]
    for folder in sorted(folders):
        problems += _folder_problems(folder)
    return problems


def _folder_problems(folder: Path) -> list[str]:
    """``verify`` of one folder."""
    try:
        listed = read_manifest(folder)
    except StoreError as err:
        return [str(err)]
    problems = []
    present = {p.name for p in folder.iterdir() if p.name != MANIFEST}
    problems += [f"{folder}: {name} is named by no manifest (a stray file)" for name in sorted(present - listed.keys())]
    for name, digest in sorted(listed.items()):
        try:
            path = files.plain_name(name, folder, folder / MANIFEST)
        except files.UnsafeName as err:
            problems.append(f"{err} ({REPAIR})")
            continue
        if name not in present:
            problems.append(f"{folder}: {name} is missing")
        elif results.sha256_file(path) != digest:
            problems.append(f"{folder}: {name} differs from its manifest (edited?)")
    for meta in sorted(n for n in present & listed.keys() if n.endswith(".json")):
        try:
            files.check(folder, meta.removesuffix(".json"))
        except results.ResultsError as err:
            problems.append(f"{folder}: {err}")
    return problems


def computed_at(store: Path) -> str | None:
    """The commit a run is computed at (``results.git_commit``), without '+dirty' where the only tracked files that
    differ from it lie in the committed ``store``: the runs of one computation rewrite them as each finishes, and
    they are no part of the code that makes the runs."""
    commit = results.git_commit()
    if commit is None or not commit.endswith("+dirty"):
        return commit
    root, store = paths.REPO_ROOT, store.resolve()
    outside = [f":(exclude){store.relative_to(root)}"] if store.is_relative_to(root) else []
    try:
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *outside],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return commit
    return commit if dirty else commit.removesuffix("+dirty")
