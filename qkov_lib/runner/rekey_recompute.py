"""``results rekey --recompute``: stale committed runs re-keyed after one run of each of their computations is
computed again from today's code and gives the stored files byte for byte.

For a change that should compute the same numbers (a new setting at a value that keeps the old behaviour, a branch
no stored run takes), git cannot prove the runs unchanged (``rekey``: their modules' digests differ), and recomputing
every run would cost what the store cost. A computation's runs differ only in their seed; its first stale run is
recomputed (``verify.recheck``, nothing written) and compared with its files. Where every file is the same, each
stale run of that computation is re-keyed: its key's setup and code parts, its values and code digests are today's,
its numbers and the commit that computed them untouched, and ``rekeyed`` records which run was recomputed at which
commit. Only runs whose key differs in setup or code are re-keyed; a change of data, arithmetic or engine never is.
Any other run stays stale, to recompute."""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..core import files, results
from ..runs import store, store_modes
from ..runs.store_verify import computed_at, write_manifest
from . import catalog, stored, verify

REKEYABLE = frozenset({"setup", "code"})  # the key parts a recomputation byte for byte may move
SEED = re.compile(r"-seed\d+$")


def computation(name: str) -> str:
    """The computation a stored run belongs to: its name less its seed ('variant0-faster-seed1234' ->
    'variant0-faster')."""
    return SEED.sub("", name)


def rekeyable(run: store.RunState) -> bool:
    """A stale run whose key differs in its setup or code only (``RunState.why``: 'setup (causal)', 'code (...)')."""
    return run.state == "stale" and {w.split(" ", 1)[0] for w in run.why} <= REKEYABLE


def rekey_run(folder: Path, name: str, key: Any, values: dict[str, Any], why: str) -> bool:
    """Rewrite one stored run's key (``key``: a ``store.Key``), values and code digests, recording ``why``; False
    (nothing written) where its key differs in another part than setup and code."""
    meta = files.check(folder, name)
    old = meta["key"] if isinstance(meta.get("key"), dict) else {}
    if {p for p in store.KEY_PARTS if old.get(p) != key.parts[p]} - REKEYABLE:
        return False
    meta |= {
        "key": key.parts,
        "values": values,
        "code": key.code.as_meta(),
        "computed_by": key.computed_by,
        "rekeyed": {"from": store.sha(old), "why": why},
    }
    results.write_meta(folder, name, meta)
    return True


def rekey_folder(chapter: str, folder: str, profile: str, runs: list[store.RunState], commit: str) -> int:
    """Recompute the first stale run of each computation in one store folder and re-key its computation's stale runs
    where it came back byte for byte; a line per computation. The number of runs re-keyed."""
    groups: dict[str, list[str]] = defaultdict(list)
    for run in runs:
        groups[computation(run.name)].append(run.name)
    chosen = {group: sorted(names)[0] for group, names in groups.items()}
    print(f"{folder} ({profile}): recomputing {', '.join(chosen.values())}", flush=True)
    check = verify.recheck((chapter, folder), profile, list(chosen.values()), stale=True)
    path, done = store.committed_root() / profile / folder, 0
    for group, names in groups.items():
        pick, outcome = chosen[group], check.outcomes.get(chosen[group])
        if outcome != "":
            print(f"  {group}: {len(names)} run(s) left stale: {pick} {outcome or 'was not recomputed'}")
            continue
        why = f"{pick} recomputed at {commit[:12]} gave its files byte for byte ({check.seconds[pick]:.0f} s)"
        kept = sum(rekey_run(path, n, *check.keys[n], why) for n in names if n in check.keys)
        print(f"  {group}: {kept} of {len(names)} run(s) re-keyed ({why})")
        done += kept
    if done:
        write_manifest(path)
    return done


def command(profile: str, chapters: list[str] | None) -> int:
    """Re-key by recomputation over the chapters (default: every chapter with stored runs), each folder as far as
    planning reaches it (a part stored apart once the runs before it are current: up to three passes). 1 where a
    run stays stale, or the code is not committed (a recomputation must name the commit whose code it ran)."""
    commit = computed_at(store.committed_root())
    if commit is None or commit.endswith("+dirty"):
        print("error: commit the code first: a re-key names the commit whose code recomputed the runs", file=sys.stderr)
        return 1
    left = 0
    for chapter in chapters or [c for c in catalog.CHAPTERS if stored.has_stored_runs(c)]:
        for _ in range(3):
            found = stored.chapter_runs(chapter, profile)
            by_folder: dict[str, list[store.RunState]] = defaultdict(list)
            for run in filter(rekeyable, found.runs):
                by_folder[run.folder or chapter].append(run)
            if not by_folder:
                break
            try:
                if not sum(rekey_folder(chapter, f, profile, runs, commit) for f, runs in by_folder.items()):
                    break
            except store_modes.RecheckError as err:
                print(f"  cannot recompute: {err}", file=sys.stderr)
                break
        still = [r.name for r in stored.chapter_runs(chapter, profile).runs if r.state != "current"]
        left += len(still)
        print(
            f"{chapter} ({profile}): {len(still)} run(s) not current" + (f": {', '.join(still[:5])}" if still else "")
        )
    return int(left > 0)
