"""The published results: each profile's sealed units beside its book on the site, ``<site>/<profile>/results/``
(one results bundle per chapter, ``<chapter>.tar.gz``, and ``index.json`` naming each one's fingerprint, data,
commit, wall time, size and sha256). The publishing job writes them (``write``); ``reproduce`` reads them before it
runs anything (``fetch``) and takes in each unit whose fingerprint is this checkout's, so that a fresh clone
computes only what its checkout changed.

Where from: ``$QKOV_RESULTS_URL`` (the site's address, the folder holding ``<profile>/``; empty turns fetching off),
else the GitHub Pages address of the repository the checkout was cloned from. A download is checked against the
index's size and sha256 as it streams, then unpacked through the bundle's staged checks (every file against its
unit's seal), and each unit's fingerprint is checked again before it moves in; a unit that is current here is never
replaced. Anything wrong (offline, a timeout, an HTTP error, a redirect to another host, a damaged or foreign file)
is one line, nothing local changes, and the run computes what it must."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import files, results
from ..core.chapter import as_dict
from ..core.contents import GATHERERS
from ..core.paths import REPO_ROOT
from . import bundle, catalog
from .catalog import resolve
from .fingerprint import fingerprint, stale_reason, unit_reason
from .site_read import (
    ARCHIVE,
    FOLDER,
    FORMAT,
    INDEX,
    RESULTS_URL_ENV,
    TIMEOUT_S,
    VERSION,
    FetchError,
    Unreachable,
    download,
    read_index,
)
from .unpack import Unpacked, unpack

GITHUB = re.compile(
    r"(?:https://github\.com/|git@github\.com:|ssh://git@github\.com/)(?P<owner>[A-Za-z0-9-]+)/"
    r"(?P<repo>[A-Za-z0-9._-]+?)(?:\.git)?/?"
)


# ---- writing (the publishing job) -------------------------------------------------------------------------------


def write(folder: Path, profile: str, results_root: Path) -> dict[str, Any]:
    """Pack each intact unit of ``profile`` that holds results as a bundle of its own into ``folder`` and write the
    index naming them; returns the index. A unit written for want of data is not published."""
    folder.mkdir(parents=True, exist_ok=True)
    units, _ = bundle.unit_files(results_root / profile)
    entries = {}
    for chapter in units:
        meta = files.read_meta(results_root / profile, chapter)
        if meta.get("status") == results.UNAVAILABLE:
            continue
        target = folder / ARCHIVE.format(chapter=chapter)
        bundle.pack(profile, target, results_root, chapters=[chapter])
        entries[chapter] = {
            "file": target.name,
            "size": target.stat().st_size,
            "sha256": results.sha256_file(target),
            "fingerprint": meta.get("fingerprint"),
            "data_identity": meta.get("data_identity"),
            "files": sorted(meta.get("files", {})),
            "commit": meta.get("git_commit"),
            "wall_time_s": meta.get("runner_wall_time_s"),
            "stored_runs": len((meta.get("stored_runs") or {}).get("keys") or {}),
        }
    index = {
        "format": FORMAT,
        "version": VERSION,
        "profile": profile,
        "commit": results.git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "chapters": entries,
    }
    files.write_atomic(folder / INDEX, json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


# ---- where from -------------------------------------------------------------------------------------------------


def pages_url(remote: str | None) -> str | None:
    """The GitHub Pages address of a GitHub repository's remote URL (https or ssh), None for any other remote."""
    match = GITHUB.fullmatch(remote or "")
    if not match:
        return None
    owner, repo = match["owner"].lower(), match["repo"]
    return f"https://{owner}.github.io" if repo.lower() == f"{owner}.github.io" else f"https://{owner}.github.io/{repo}"


def repository_url(remote: str | None) -> str | None:
    """The web address of a GitHub repository's remote URL (https or ssh), None for any other remote."""
    match = GITHUB.fullmatch(remote or "")
    return f"https://github.com/{match['owner']}/{match['repo']}" if match else None


def origin_url() -> str | None:
    """The checkout's ``origin`` remote, None outside git or without one."""
    try:
        return (
            subprocess.run(
                ["git", "config", "--get", "remote.origin.url"],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.CalledProcessError):
        return None


def site_url() -> tuple[str | None, str]:
    """(the published site's address, or None; where it comes from, in words)."""
    value = os.environ.get(RESULTS_URL_ENV)
    if value is not None:
        return value.strip().rstrip("/") or None, f"{RESULTS_URL_ENV} is empty"
    remote = origin_url()
    url = pages_url(remote)
    return url, (
        f"the Pages site of {remote}"
        if url
        else f"{RESULTS_URL_ENV} is unset and the checkout's origin ({remote or 'none'}) is not a GitHub repository"
    )


# ---- taking them in ----------------------------------------------------------------------------------------------


@dataclass
class Fetched:
    """What ``fetch`` did: the chapters taken from the published results, those current here already, those whose
    published unit matched but was refused (damaged, or not what its index said), the lines it printed, and the
    published wall time of each chapter still to run (seconds; None: unknown), and the stored runs taken for
    chapters whose published page is stale here (their runs' keys may still match: the page is re-made from them)."""

    taken: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    to_run: dict[str, float | None] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)  # stored runs taken for a chapter still to run (stale page)
    lines: list[str] = field(default_factory=list)
    commit: str | None = None


def fetch(
    profile: str,
    chapters: Sequence[str],
    overrides: dict[str, dict[str, Any]],
    results_root: Path,
    url: str | None = None,
    timeout: float = TIMEOUT_S,
    say: Callable[[str], None] = print,
) -> Fetched:
    """Take in, before anything runs, every published unit of ``chapters`` (and of the profiles their pages set
    beside them) whose fingerprint is this checkout's and which is not current here; one line on the outcome."""
    done = Fetched()
    if url is None:
        url, where = site_url()
        if url is None:
            if not where.endswith("is empty"):
                say(f"no published results to start from: {where}; every stale chapter runs here")
            return done
    try:
        for other in sorted(
            {b for c in chapters for b in getattr(catalog.chapter_module(c), "BESIDE", ()) if b != profile}
        ):
            beside = [c for c in chapters if other in getattr(catalog.chapter_module(c), "BESIDE", ())]
            try:
                _take(other, beside, {c: {} for c in beside}, results_root, url, timeout, Fetched(), say)
            except Unreachable:
                raise
            except FetchError as err:  # the pages then set no (or their local) results of it beside their own
                say(f"published {other} results, which the {profile} pages set beside their own, not used: {err}")
        _take(profile, chapters, overrides, results_root, url, timeout, done, say)
    except FetchError as err:
        say(f"published results not used: {err}; every stale chapter runs here")
        return done
    say(_outcome(done, len(chapters), url))
    return done


def _take(
    profile: str,
    chapters: Sequence[str],
    overrides: dict[str, dict[str, Any]],
    results_root: Path,
    url: str,
    timeout: float,
    done: Fetched,
    say: Callable[[str], None],
) -> None:
    """Fetch ``profile``'s units of ``chapters``: the others first, then the pages that gather them (their inputs
    are the others' units, as fetched)."""
    index = read_index(url, profile, timeout)
    done.commit = index.get("commit")
    ordered = [c for c in chapters if c not in GATHERERS] + [c for c in chapters if c in GATHERERS]
    with tempfile.TemporaryDirectory(prefix="qkov-fetch-") as tmp:
        for chapter in ordered:
            concrete, setup = resolve(chapter, profile, overrides[chapter])
            fp = fingerprint(chapter, concrete, as_dict(setup), results_root)
            if stale_reason(results_root / concrete, chapter, fp)[0] is None:
                done.current.append(chapter)
                continue
            entry = index["chapters"].get(chapter)
            stale = entry is None or unit_reason(entry, chapter, fp) is not None
            if stale:
                done.to_run[chapter] = (entry or {}).get("wall_time_s")
                if not _has_runs(entry):
                    continue
            try:
                got = _take_one(
                    f"{url}/{profile}/{FOLDER}/{entry['file']}",
                    Path(tmp),
                    chapter,
                    concrete,
                    entry,
                    fp,
                    results_root,
                    timeout,
                )
            except Unreachable:
                raise
            except (FetchError, bundle.BundleError, results.ResultsError) as err:
                say(f"published {chapter} not used: {err}")
                if not stale:
                    done.refused.append(chapter)
                    done.to_run[chapter] = entry.get("wall_time_s")
                continue
            _count(done, chapter, entry, got, stale, say)


def _count(done: Fetched, chapter: str, entry: dict[str, Any], got: Unpacked, stale: bool, say: Callable) -> None:
    """What a chapter's archive really brought: its unit (taken), or its stored runs alone (the chapter runs, from
    them), or nothing usable (said, and the chapter runs)."""
    if chapter in got.units:
        done.taken.append(chapter)
        return
    done.to_run[chapter] = entry.get("wall_time_s")
    if got.stored_runs:
        done.runs[chapter] = got.stored_runs
    elif not stale:
        say(f"published {chapter} not used: its archive holds no unit of {chapter}")
        done.refused.append(chapter)


def _take_one(
    url: str,
    tmp: Path,
    chapter: str,
    profile: str,
    entry: dict[str, Any],
    fp: dict[str, str],
    results_root: Path,
    timeout: float,
) -> Unpacked:
    """Download one chapter's archive and move its unit in through the bundle's checks, refusing it unless its
    own metadata carries this checkout's fingerprint; the stored runs it carries go to the scratch store even then
    (each is taken where its key matches). What was moved in."""
    archive = files.plain_name(entry["file"], tmp, f"{url}'s index entry")
    download(url, archive, entry, timeout)

    def accept(name: str, meta: dict[str, Any]) -> str | None:
        if name != chapter:  # refuses the whole archive, its stored runs too
            raise bundle.BundleError(f"{archive.name}'s unit {name} is refused (it holds {name}, not {chapter})")
        return unit_reason(meta, name, fp)

    return unpack(archive, results_root, profile, accept=accept, runs_of_refused=True)


def _has_runs(entry: dict[str, Any] | None) -> bool:
    """Whether a published chapter whose page is stale here carries stored runs worth taking."""
    runs = (entry or {}).get("stored_runs")
    return isinstance(runs, int) and not isinstance(runs, bool) and runs > 0


def _outcome(done: Fetched, total: int, url: str) -> str:
    """The line said before any work: how many chapters come from the published results, how many run here."""
    commit = f" (commit {str(done.commit)[:7]})" if done.commit else ""
    if not done.taken and not done.to_run:
        return f"every chapter is current here already; nothing taken from the published results at {url}"
    known = [t for t in done.to_run.values() if t is not None]
    minutes = (
        (
            f", about {max(1, round(sum(known) / 60))} min (from their published wall times"
            f"{'; some unknown' if len(known) < len(done.to_run) else ''})"
        )
        if known
        else ""
    )
    here = f"; {len(done.current)} current here already" if done.current else ""
    if done.runs:
        here += (
            f"; {sum(done.runs.values())} stored runs taken for {len(done.runs)} of the chapters to run (their "
            f"pages are re-made here, computing only the runs whose keys differ)"
        )
    refused = f"; {len(done.refused)} refused (said above)" if done.refused else ""
    if not done.taken and done.refused:
        return (
            f"0 of {total} chapters from the published results at {url}{commit}{refused}{here}; "
            f"{len(done.to_run)} to run{minutes}"
        )
    if not done.taken:
        return (
            f"the published results at {url}{commit} match none of the {len(done.to_run)} stale chapters "
            f"(their code, parameters or data differ here){here}; {len(done.to_run)} to run{minutes}"
        )
    return (
        f"{len(done.taken)} of {total} chapters from the published results{commit}{refused}{here}; "
        f"{len(done.to_run)} to run{minutes}"
    )
