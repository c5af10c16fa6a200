"""The committed store's integrity (``runs.store``): one ``manifest.json`` per folder naming every file with its
sha256, written as runs are stored; a run is read only where its folder's manifest names it (``manifested``), and
``verify`` finds every stray, missing or edited file and every broken seal (tests/project/test_committed_store.py
runs it over the repository's store)."""

from __future__ import annotations

import json
from pathlib import Path

from ..core import results

MANIFEST = "manifest.json"


def write_manifest(folder: Path) -> None:
    """The folder's manifest: every file each stored run lists, and the run's metadata, with their sha256."""
    listed: dict[str, str] = {}
    for meta_path in sorted(folder.glob("*.json")):
        if meta_path.name == MANIFEST:
            continue
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        listed |= dict(meta.get("files", {})) | {meta_path.name: results.sha256_file(meta_path)}
    results.write_atomic(folder / MANIFEST, json.dumps(listed, indent=1, sort_keys=True) + "\n")


def manifested(folder: Path, stem: str) -> bool:
    """Whether ``folder``'s manifest names the stored run ``stem``'s metadata with its sha256 (which in turn names
    each table's): a run dropped into the committed store by hand, without its manifest entry, is not taken."""
    try:
        listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        return isinstance(listed, dict) and listed.get(f"{stem}.json") == results.sha256_file(folder / f"{stem}.json")
    except (OSError, ValueError):
        return False


def verify(root: Path) -> list[str]:
    """What is wrong with a committed store: a folder without its manifest, a file the manifest does not name (a
    stray), a file it names that is missing or whose sha256 differs (edited), a stored run whose seal or files do
    not check. Empty when every file is accounted for."""
    problems = [
        f"{p}: outside the store's layout (<profile>/<chapter>/<file>)"
        for p in sorted(root.rglob("*"))
        if p.is_file() and len(p.relative_to(root).parts) != 3
    ]
    for folder in sorted(f for f in root.glob("*/*") if f.is_dir()):
        try:
            listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            problems.append(f"{folder}: no readable {MANIFEST}; rerun the runs it holds")
            continue
        present = {p.name for p in folder.iterdir() if p.name != MANIFEST}
        problems += [
            f"{folder}: {name} is named by no manifest (a stray file)" for name in sorted(present - listed.keys())
        ]
        for name, digest in sorted(listed.items()):
            if name not in present:
                problems.append(f"{folder}: {name} is missing")
            elif results.sha256_file(folder / name) != digest:
                problems.append(f"{folder}: {name} differs from its manifest (edited?)")
        for meta in sorted(n for n in present & listed.keys() if n.endswith(".json")):
            try:
                results.check(folder, meta.removesuffix(".json"))
            except results.ResultsError as err:
                problems.append(f"{folder}: {err}")
    return problems
