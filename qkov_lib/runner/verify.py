"""``results verify``: stored runs computed afresh from today's code and compared with the stored ones, file by file.

A seal proves that a run's files are those its metadata lists, untouched since it was sealed; it cannot prove that
today's code computes those numbers (a run forged and resealed by hand passes it, and so does one whose engine or
library has since drifted). Recomputing is the one check of that. ``--sample N`` draws N of the profile's current
runs (seeded, so a rerun draws the same), since recomputing every run takes as long as computing the store. Nothing
is written; the command exits 1 when a run differs or cannot be rechecked. Only runs ``results status`` lists are
drawn (a chapter's computations up to the first the store does not hold whole: ``store_modes``).

``--dirty`` draws only runs whose commit carries ``+dirty`` (computed with uncommitted changes: the commit they name
is not the code that made them). ``--record``, from a clean commit, writes into each run that came back byte for byte
``verified`` (that commit, the date and the seconds): a committed commit whose code computes the run's files."""

from __future__ import annotations

import dataclasses
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..core import files, results
from ..core.chapter import Scope
from ..core.device import pick_device
from ..data.registry import DataUnavailable
from ..runs import store, store_modes
from ..runs.store_verify import computed_at, write_manifest
from . import catalog, stored

DIRTY = "+dirty"
Place = tuple[str, str]  # (chapter, store folder: the chapter's own, or a part of it stored apart)


def drawn(
    profile: str, chapters: list[str] | None, sample: int | None, seed: int, dirty: bool = False
) -> dict[Place, list[str]]:
    """The current runs to recheck, (chapter, folder) -> run names: ``sample`` of them drawn with ``seed`` (None:
    all); ``dirty``: only those whose commit carries ``+dirty``."""
    pool = []
    for chapter in chapters or [c for c in catalog.CHAPTERS if stored.has_stored_runs(c)]:
        found = stored.chapter_runs(chapter, profile)
        for run in found.runs:
            if run.state == "current" and (not dirty or (run.commit or "").endswith(DIRTY)):
                pool.append((chapter, run.folder or chapter, run.name))
    chosen = pool if sample is None else random.Random(seed).sample(pool, min(sample, len(pool)))
    out: dict[Place, list[str]] = defaultdict(list)
    for chapter, folder, name in sorted(chosen):
        out[chapter, folder].append(name)
    return dict(out)


def recheck(place: Place, profile: str, names: list[str], stale: bool = False) -> store_modes.Recheck:
    """The chapter run until the runs ``names`` of its store folder are recomputed and compared
    (``store_modes.recheck``; ``stale``: they may be stale)."""
    chapter, folder = place
    concrete, setup = catalog.resolve(chapter, profile, None)
    if hasattr(setup, "download"):
        setup = dataclasses.replace(setup, download=False)
    module = catalog.chapter_module(chapter)
    scope = Scope(chapter, concrete, getattr(module, "DATASETS", ()), True)
    run = lambda: module.run(setup, device=pick_device(), progress=False)  # noqa: E731
    return store_modes.recheck(run, scope, frozenset(names), folder, stale)


def command(args: Any) -> int:
    """``results verify [--profile P] [--only C,..] [--sample N] [--seed S] [--dirty] [--record]``: a line per run
    rechecked ('same' or what differs), and a last line counting them; 1 when one differs or cannot be rechecked."""
    if args.sample is not None and args.sample < 1:
        print(f"error: --sample must be an integer >= 1 (got {args.sample})", file=sys.stderr)
        return 2
    commit = computed_at(store.committed_root())
    if args.record and (commit is None or commit.endswith(DIRTY)):
        print("error: commit the code first: --record names the commit whose code recomputed the runs", file=sys.stderr)
        return 1
    chosen = drawn(args.profile, args.only.split(",") if args.only else None, args.sample, args.seed, args.dirty)
    same = bad = 0
    for place, names in chosen.items():
        print(f"{place[1]} ({args.profile}): recomputing {', '.join(names)}", flush=True)
        start = time.time()
        try:
            check = recheck(place, args.profile, names)
        except (store_modes.RecheckError, DataUnavailable) as err:
            print(f"  cannot recheck: {str(err).splitlines()[0]}", file=sys.stderr)
            bad += len(names)
            continue
        for name in names:
            why = check.outcomes.get(name)
            ok = why == ""
            same, bad = same + ok, bad + (not ok)
            took = f"{check.seconds[name]:.0f} s" if name in check.seconds else "not computed"
            print(f"  {'same' if ok else 'DIFFERS'} {name} ({took}){'' if ok else ': ' + (why or 'not reached')}")
        if args.record and commit:
            kept = record(store.committed_root() / args.profile / place[1], check, commit)
            print(f"  recorded as verified at {commit[:12]}: {kept} run(s)")
        print(f"  {time.time() - start:.0f} s", flush=True)
    print(f"{args.profile}: {same + bad} stored runs recomputed, {same} the same byte for byte, {bad} not")
    return int(bad > 0 or not chosen)


def record(folder: Path, check: store_modes.Recheck, commit: str) -> int:
    """Write ``verified`` (``commit``, the date, the seconds) into each run of ``folder`` that ``check`` recomputed
    byte for byte, and the folder's manifest; how many."""
    done = [name for name, why in check.outcomes.items() if why == ""]
    for name in done:
        meta = files.check(folder, name)
        meta["verified"] = {"commit": commit, "date": time.strftime("%Y-%m-%d"), "seconds": round(check.seconds[name])}
        files.umask_mode(results.write_meta(folder, name, meta))
    if done:
        write_manifest(folder)
    return len(done)


def add_command(actions: Any) -> None:
    """``results verify`` on the ``results`` command's subparsers."""
    vf = actions.add_parser("verify", help="recompute stored runs and compare them with the stored files")
    vf.add_argument("--profile", default="default", choices=store.STORED_PROFILES)
    vf.add_argument("--only", help="comma-separated chapter names (default: every chapter with stored runs)")
    vf.add_argument("--sample", type=int, help="recheck this many current runs, drawn at random (default: all)")
    vf.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    vf.add_argument("--dirty", action="store_true", help="draw only runs computed with uncommitted changes (+dirty)")
    vf.add_argument(
        "--record",
        action="store_true",
        help="write into each run that comes back byte for byte the clean commit that recomputed it (verified)",
    )
