"""``results rekey``: the committed runs whose key's code part widened (more modules, more versions: the loaders
and tokenisers of their datasets) re-keyed, where git proves that the run was computed by exactly that code.

A stored run records the commit it was computed at. Where that commit is clean (no ``+dirty``: the tracked files
were the commit's), every module of today's code key has the same digest at that commit as now (docstrings and
comments aside, as in the key), and each package whose version the key names was pinned at that version by the
commit's ``requirements.txt``, the run is what today's code computes: its key's code part is rewritten and resealed,
its numbers untouched, and ``rekeyed`` records the proof. Any other run is left as it is (stale; recompute it)."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from ..core import codehash, files, results
from ..core.chapter import folder_chapter
from ..core.paths import PACKAGE_DIR, REPO_ROOT
from ..runs import store
from ..runs.store_verify import MANIFEST, write_manifest
from . import catalog, rekey_recompute


@cache
def _at(commit: str, path: str) -> str | None:
    """The text of ``path`` (relative to the repository) at ``commit``; None where the commit lacks it."""
    out = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=REPO_ROOT, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def _digest_at(commit: str, module: str) -> str | None:
    """A module's digest (``codehash.parse_source``) at ``commit``; None where the commit lacks it."""
    rel = Path(PACKAGE_DIR.name, *module.split(".")[1:])
    for path, package in ((rel / "__init__.py", True), (rel.with_suffix(".py"), False)):
        source = _at(commit, path.as_posix())
        if source is not None:
            return codehash.parse_source(source, module, package, f"{commit[:12]}:{path}").digest
    return None


def _pins(commit: str) -> dict[str, str]:
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", _at(commit, "requirements.txt") or "", re.M)
    return {name.lower(): version for name, version in found}


def proof(meta: dict[str, Any], code: codehash.CodeState) -> str | None:
    """Why the run of ``meta`` was computed by ``code`` (one line), or None where git cannot show it."""
    commit = str(meta.get("git_commit") or "")
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None  # no commit, or '+dirty': the files were not the commit's
    if any(_digest_at(commit, m) != digest for m, digest in code.modules.items()):
        return None
    old = dict((meta.get("code") or {}).get("versions", {}))
    pins = _pins(commit)
    if any(old.get(lib, pins.get(lib.lower())) != version for lib, version in code.versions.items()):
        return None
    return f"each of its {len(code.modules)} modules as at {commit[:12]}, where it was computed; versions pinned"


def rekey_folder(folder: Path, datasets: tuple[str, ...]) -> tuple[int, int]:
    """Re-key the folder's runs that ``proof`` covers; (re-keyed, left as they were). The manifest is rewritten."""
    done = left = 0
    for path in sorted(p for p in folder.glob("*.json") if p.name != MANIFEST):
        meta = files.check(folder, path.stem)
        code = store.code_of(sorted(meta["code"]["modules"]), datasets)
        if meta["key"].get("code") == code.digest:
            continue
        why = proof(meta, code)
        if why is None:
            left += 1
            continue
        old = meta["key"]["code"]
        meta |= {
            "key": meta["key"] | {"code": code.digest},
            "code": code.as_meta(),
            "rekeyed": {"from": old, "why": why},
        }
        results.write_meta(folder, path.stem, meta)
        done += 1
    if done:
        write_manifest(folder)
    return done, left


def command(args: Any) -> int:
    """``results rekey [--profile P]``: a line per folder, re-keyed and left as they were; with ``--recompute``,
    re-keyed after a recomputation instead (``rekey_recompute``)."""
    if args.recompute:
        return rekey_recompute.command(args.profile or "default", args.only.split(",") if args.only else None)
    root = store.committed_root()
    for profile in [args.profile] if args.profile else store.STORED_PROFILES:
        for folder in sorted(f for f in (root / profile).glob("*") if f.is_dir()):
            datasets = tuple(getattr(catalog.chapter_module(folder_chapter(folder.name)), "DATASETS", ()))
            done, left = rekey_folder(folder, datasets)
            print(f"{profile}/{folder.name}: {done} run(s) re-keyed, {left} left stale (no proof: recompute them)")
    return 0


def add_command(actions: Any) -> None:
    """``results rekey`` on the ``results`` command's subparsers."""
    rk = actions.add_parser("rekey", help="re-key committed runs git proves were computed by today's code")
    rk.add_argument("--profile", choices=store.STORED_PROFILES, help="one profile (default: every stored profile)")
    rk.add_argument(
        "--recompute",
        action="store_true",
        help="re-key a stale run where one run of its computation, recomputed, gives its files byte for byte "
        "(one profile: default unless --profile)",
    )
    rk.add_argument("--only", help="with --recompute: comma-separated chapter names (default: every chapter)")
