"""Restoring a results bundle (``bundle``) into a results folder, and the ``results pack|unpack`` commands.

An unpack streams the bundle into a staging folder beside the target (``.unpack-<random>/``, locked by the unpacking
process for as long as it lives) and checks every file and unit there; only then, holding the lock of every chapter
the bundle holds, it marks the staging folder ready and moves the units in, metadata last, then the stored runs (into
the scratch store, ``bundle_store``). A kill before the mark leaves nothing changed; one after it is finished by the
next unpack or ``reproduce`` (``recover``)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import files
from ..core.chapter import PROFILES, ParameterError
from ..core.paths import RESULTS_ROOT
from . import bundle_store, rekey, store_gc, stored, units, verify
from .bundle import BundleError, pack
from .bundle_check import check_into
from .checks import folder_path
from .units import chapter_lock

STAGED = ".unpack-"  # <results root>/.unpack-<random>/: an unpack in progress (the bundle, checked, and its lock)
HELD = ".held"  # <staging>/.held: locked by the unpacking process for as long as it lives
UNLOCKED_GRACE_S = 60  # a staging folder without its lock file this old was left by a kill, not being set up
READY = ".ready.json"  # <staging>/.ready.json: every check passed; from here on the move is finished, not undone


@dataclass
class Unpacked:
    """What ``unpack`` restored: the manifest, the units moved in and the stored runs, and the units ``accept``
    refused (chapter -> why) where their stored runs alone were taken."""

    manifest: dict[str, Any]
    units: list[str]
    stored_runs: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    recovered: list[str] = field(default_factory=list)  # what became of unpacks a kill interrupted (``recover``)


def _hold(staging: Path) -> int | None:
    """Lock ``staging`` for this process (its ``HELD`` file), so that no other run takes it for abandoned; its
    descriptor, or None when another process holds it."""
    fd = units.open_private(staging / HELD, "an unpack's lock file")
    if units.try_lock(fd):
        return fd
    os.close(fd)
    return None


def _abandoned(results_root: Path) -> list[Path]:
    """The staging folders of unpacks whose process is gone (their lock is free)."""
    found = []
    for staging in sorted(results_root.glob(f"{STAGED}*")):
        units.refuse_link(staging, "an unpack's staging folder")
        try:
            fd = os.open(staging / HELD, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:  # killed before it took its lock (nothing was moved), or taking it now
            if time.time() - staging.stat().st_mtime > UNLOCKED_GRACE_S:
                found.append(staging)
            continue
        try:
            if units.try_lock(fd):
                found.append(staging)
        finally:
            os.close(fd)
    return found


def recover(results_root: Path) -> list[str]:
    """Finish or undo the unpacks a kill interrupted, one line each: one killed after all its checks had passed
    (``READY``) is finished from its staging copy; one killed before is removed, nothing having moved."""
    lines = []
    for staging in _abandoned(results_root) if results_root.is_dir() else []:
        if (fd := _hold(staging)) is None:
            continue  # taken up by another process since
        try:
            if (staging / READY).is_file():
                done = json.loads((staging / READY).read_text())
                moved, runs = _move_all(staging, done["profile"], results_root)
                lines.append(
                    f"finished an unpack of {done['source']} that was interrupted (packed at "
                    f"{str(done.get('commit') or 'an unknown commit')[:12]}): moved in the {len(moved)} "
                    f"unit(s) and {runs} stored run(s) it had left "
                    f"({', '.join(moved) or 'none'})"
                )
            else:
                lines.append(
                    f"removed the staging folder of an unpack interrupted before its checks ended "
                    f"({staging.name}); nothing had changed"
                )
        finally:
            os.close(fd)
        shutil.rmtree(staging, ignore_errors=True)
    return lines


def _move_all(staging: Path, profile: str, results_root: Path) -> tuple[list[str], int]:
    """Move every unit still staged (each under its chapter's lock, all taken before anything moves: a chapter
    running now is one BundleError and nothing moves), then the stored runs; the units moved and the runs."""
    staged, final = staging / profile, results_root / profile
    chapters = sorted(p.stem for p in staged.glob("*.json")) if staged.is_dir() else []
    try:
        bundle_store.refuse_links(staging, profile, results_root)
    except units.LinkedPath as err:
        raise BundleError(f"{err}; nothing was restored") from None
    with ExitStack() as locks:
        for chapter in chapters:
            try:
                locks.enter_context(chapter_lock(results_root, chapter))
            except units.ChapterBusy as err:
                raise BundleError(f"{err}; nothing was restored: unpack again when it is free") from None
            except units.LinkedPath as err:
                raise BundleError(f"{err}; nothing was restored") from None
        for chapter in chapters:
            units.move_unit(staged, final, chapter)
    return chapters, bundle_store.move_in(staging, profile, results_root)


Accept = Callable[[str, dict[str, Any]], "str | None"]  # (chapter, its staged metadata) -> why it is refused, or None


def unpack(
    source: Path,
    results_root: Path = RESULTS_ROOT,
    profile: str | None = None,
    accept: Accept | None = None,
    runs_of_refused: bool = False,
) -> Unpacked:
    """Restore a bundle into ``results_root``: stream it into a staging folder beside the target and check every
    file and unit there; only then, holding the lock of every chapter it holds, move the units in (each replacing
    the unit of the same chapter) and the stored runs. ``profile``, when given, must be the bundle's. On any error
    in the checks nothing in ``results_root`` has changed; a kill after them is finished by the next unpack or
    reproduce (``recover``). ``accept``, when given, is asked of every staged unit before anything moves: a reason
    from it refuses the bundle, or with ``runs_of_refused`` (and stored runs in the bundle) only that unit: its
    stored runs are still taken."""
    if results_root.exists() and not results_root.is_dir():
        raise BundleError(f"--results {results_root} is a file; name a folder (it is created when missing)")
    try:
        results_root.mkdir(parents=True, exist_ok=True)
        recovered = recover(results_root)
        tmp = Path(tempfile.mkdtemp(dir=results_root, prefix=STAGED))
        held = _hold(tmp)  # a folder of its own: no other process holds it
    except OSError as err:
        raise BundleError(
            f"cannot write into {results_root} ({err.strerror}); name a writable folder with --results"
        ) from None
    except units.ChapterFailed as err:
        raise BundleError(str(err)) from None
    try:
        try:
            manifest = check_into(source, tmp, profile)
        except OSError as err:
            raise BundleError(
                f"cannot write into {results_root} ({err.strerror}); free space or fix permissions, then unpack again"
            ) from None
        name = manifest["profile"]
        final = results_root / name
        if final.exists() and not final.is_dir():
            raise BundleError(
                f"{final} is a file, not the folder of profile {name}'s results; move it away, then unpack again"
            )
        refused = _refused(tmp / name, accept, source, runs_of_refused and bundle_store.count(manifest) > 0)
        files.write_atomic(
            tmp / READY, json.dumps({"source": str(source), "profile": name, "commit": manifest.get("commit")})
        )
        moved, runs = _move_all(tmp, name, results_root)
    finally:
        if held is not None:
            os.close(held)
        shutil.rmtree(tmp, ignore_errors=True)
    return Unpacked(manifest, moved, runs, refused, recovered)


def _refused(staged: Path, accept: Accept | None, source: Path, keep_runs: bool) -> dict[str, str]:
    """The staged units ``accept`` refuses (chapter -> why), removed from the staging folder when their stored runs
    are kept (``keep_runs``); else the first refusal is a BundleError."""
    refused: dict[str, str] = {}
    if accept is None:
        return refused
    for chapter in sorted(p.stem for p in staged.glob("*.json")):
        if why := accept(chapter, files.read_meta(staged, chapter)):
            if not keep_runs:
                raise BundleError(f"{source}'s unit {chapter} is refused ({why}); nothing was restored")
            refused[chapter] = why
            for name in [*files.read_meta(staged, chapter).get("files", {}), f"{chapter}.json"]:
                files.plain_name(name, staged, staged / f"{chapter}.json").unlink(missing_ok=True)
    return refused


def add_commands(sub: Any) -> None:
    """``results pack PROFILE FILE`` and ``results unpack FILE`` on the command line's subparsers."""
    cmd = sub.add_parser("results", help="pack a profile's results into one file (tar.gz), or restore one")
    actions = cmd.add_subparsers(dest="action", required=True)
    pk = actions.add_parser("pack", help="write a profile's units and their stored runs to FILE")
    pk.add_argument("profile", choices=PROFILES)
    pk.add_argument("file", type=Path)
    up = actions.add_parser("unpack", help="restore a bundle written by `results pack`")
    up.add_argument("file", type=Path)
    up.add_argument("--profile", choices=PROFILES, help="refuse a bundle of another profile")
    for p in (pk, up):
        p.add_argument("--results", default=RESULTS_ROOT, help="root of tidy results (<root>/<profile>)")
    stored.add_command(actions)
    rekey.add_command(actions)
    verify.add_command(actions)
    store_gc.add_command(actions)


def command(args: Any) -> int:
    """Run ``results pack``, ``results unpack`` (1 with one message when the bundle is refused), ``results status``
    (``stored.command``), ``results repair`` (``stored.repair``), ``results rekey`` (``rekey.command``), ``results
    verify`` (``verify.command``) or ``results gc`` (``store_gc.command``)."""
    if args.action == "status":
        return stored.command(args)
    if args.action == "repair":
        return stored.repair(args)
    if args.action == "rekey":
        return rekey.command(args)
    if args.action == "verify":
        return verify.command(args)
    if args.action == "gc":
        return store_gc.command(args)
    try:
        if args.action == "pack":
            packed = pack(args.profile, args.file, folder_path(args.results, "--results"))
            for chapter, why in packed.left_out.items():
                print(f"left out {chapter}: {why}", file=sys.stderr)
            print(
                f"packed {len(packed.units)} units of profile {args.profile} and {packed.stored_runs} stored runs "
                f"into {args.file} ({args.file.stat().st_size / 1e6:.1f} MB)"
            )
        else:
            done = unpack(args.file, folder_path(args.results, "--results"), args.profile)
            for line in done.recovered:
                print(line)
            commit = (done.manifest.get("commit") or "an unknown commit")[:12]
            print(
                f"restored {len(done.units)} units of profile {done.manifest['profile']} (packed at {commit}) and "
                f"{done.stored_runs} stored runs into {args.results}"
            )
    except (BundleError, ParameterError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
