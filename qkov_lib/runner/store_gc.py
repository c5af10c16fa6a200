"""``results gc``: the committed store's runs that no current key uses (a chapter, a computation or a run removed or
renamed), listed, and removed with ``--remove``.

A chapter's runs are the ones planning it lists (``stored.chapter_runs``). A chapter is swept only where every run
it lists is current: only then has planning gone through each of its computations, so a run it does not list is no
part of it. A folder that no chapter with stored runs owns is swept whole. A run of a chapter that is not current
waits until it is (``results status`` says why it is not). Nothing outside the profile's folders is read or
removed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import files
from ..core.chapter import PART
from ..runs import store, store_verify
from . import catalog, stored


@dataclass
class Sweep:
    """What a sweep of one profile found: each folder's runs no current key uses (their stems), and the chapters it
    could not sweep, a line each."""

    unused: dict[Path, list[str]] = field(default_factory=dict)
    not_swept: list[str] = field(default_factory=list)


def _runs_in(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.json") if p.name != store_verify.MANIFEST)


def sweep(profile: str) -> Sweep:
    """The committed store's runs of ``profile`` that no chapter's current plan lists, folder by folder."""
    owners = [c for c in catalog.CHAPTERS if stored.has_stored_runs(c)]
    used: dict[str, set[str]] = defaultdict(set)  # store folder -> the run names a current plan lists
    out, whole = Sweep(), set()
    for chapter in owners:
        found = stored.chapter_runs(chapter, profile)
        if found.error or found.count("current") < len(found.runs):
            out.not_swept.append(f"{chapter}: not swept ({found.error or 'not every run current: results status'})")
            continue
        whole.add(chapter)
        for run in found.runs:
            used[run.folder or chapter].add(run.name)
    root = store.committed_root() / profile
    for folder in sorted(f for f in root.glob("*") if f.is_dir()):
        store_verify.refuse_links(store.committed_root(), folder)
        owner = folder.name.split(PART)[0]
        if owner in whole or owner not in owners:
            if unused := [s for s in _runs_in(folder) if s not in used[folder.name]]:
                out.unused[folder] = unused
    return out


def remove(folder: Path, stems: list[str]) -> None:
    """Remove the runs ``stems`` of ``folder`` (their metadata and every file it lists), then rewrite its manifest,
    or remove the folder where no run is left."""
    for stem in stems:
        meta_path = folder / f"{stem}.json"
        for name in store_verify.meta_files(meta_path):
            files.plain_name(name, folder, meta_path).unlink(missing_ok=True)
        meta_path.unlink()
    if _runs_in(folder):
        store_verify.write_manifest(folder)
    else:
        (folder / store_verify.MANIFEST).unlink(missing_ok=True)
        if not any(folder.iterdir()):
            folder.rmdir()


def command(args: Any) -> int:
    """``results gc [--profile P] [--remove]``: a line per folder with runs no current key uses (and, with
    ``--remove``, removes them), a line per chapter not swept, and a last line counting them; 1 where a chapter
    could not be swept."""
    found = sweep(args.profile)
    for folder, stems in found.unused.items():
        shown = ", ".join(stems[:6]) + (f" and {len(stems) - 6} more" if len(stems) > 6 else "")
        print(f"{folder.relative_to(store.committed_root())}: {len(stems)} run(s) no current key uses: {shown}")
        if args.remove:
            remove(folder, stems)
    for line in found.not_swept:
        print(line)
    n = sum(map(len, found.unused.values()))
    done = "removed" if args.remove else "found (--remove removes them)"
    print(f"{args.profile}: {n} stored run(s) no current key uses, {done}" if n else f"{args.profile}: none unused")
    return int(bool(found.not_swept))


def add_command(actions: Any) -> None:
    """``results gc`` on the ``results`` command's subparsers."""
    gc = actions.add_parser("gc", help="list (and with --remove, remove) committed runs no current key uses")
    gc.add_argument("--profile", default="default", choices=store.STORED_PROFILES)
    gc.add_argument("--remove", action="store_true", help="remove them (default: list them only)")
