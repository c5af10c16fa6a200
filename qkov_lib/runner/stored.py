"""What the results store holds of each chapter (``runs.store``): ``results status`` and the runner's line before a
chapter runs, and ``results repair``. A chapter's stored runs are found by running it in planning mode
(``store.plan``): its ``run`` goes as far as its first stored computation, which names its runs and stops, computing
nothing."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import codehash, results
from ..core.chapter import PART, PROFILES, Scope
from ..core.contents import GATHERERS
from ..core.device import pick_device
from ..data.registry import DataUnavailable
from ..runs import store, store_verify
from . import catalog


def has_stored_runs(chapter: str) -> bool:
    """Whether the chapter's code can reach a stored computation (a gathering page reads the others' results)."""
    if chapter in GATHERERS:
        return False
    return "qkov_lib.runs.store" in codehash.closure(codehash.notebook_modules(catalog.source(chapter)))


@dataclass(frozen=True)
class ChapterRuns:
    """A chapter's stored runs under one profile, or why they could not be listed (``error``)."""

    chapter: str
    profile: str
    runs: Sequence[store.RunState] = ()
    error: str | None = None

    def count(self, state: str) -> int:
        return sum(r.state == state for r in self.runs)

    @property
    def line(self) -> str:
        """The one line the runner says before a chapter runs."""
        if self.error:
            return f"{self.chapter} ({self.profile}): its stored runs cannot be listed ({self.error})"
        current, n = self.count("current"), len(self.runs)
        return f"{self.chapter} ({self.profile}): {current} of {n} runs from the store, {n - current} to compute"

    @property
    def forced(self) -> str:
        """The line under ``--force``, which computes every stored run afresh."""
        if self.error:
            return self.line
        return (
            f"{self.chapter} ({self.profile}): {len(self.runs)} stored runs, each computed afresh (--force); one "
            "whose files differ from the stored run's replaces it"
        )


def chapter_runs(
    chapter: str, profile: str, overrides: dict[str, Any] | None = None, results_root: Path | None = None
) -> ChapterRuns:
    """The chapter's stored runs and what the store holds of each, computing and downloading nothing;
    ``results_root``: the results folder whose scratch store a run would read (default: $QKOV_RESULTS_ROOT, else
    data/results)."""
    concrete, setup = catalog.resolve(chapter, profile, overrides)
    if hasattr(setup, "download"):  # listing runs downloads nothing (where data comes from is no part of a key)
        setup = dataclasses.replace(setup, download=False)
    module = catalog.chapter_module(chapter)
    scope = Scope(chapter, concrete, getattr(module, "DATASETS", ()), not overrides)
    try:
        with _results_in(results_root):
            states = store.plan(lambda: module.run(setup, device=pick_device(), progress=False), scope)
    except DataUnavailable as err:
        return ChapterRuns(chapter, concrete, error=f"data unavailable: {str(err).splitlines()[0]}")
    except Exception as err:  # the chapter's own run says what failed; here one line names it
        return ChapterRuns(chapter, concrete, error=f"{type(err).__name__}: {err}")
    if states is None and os.environ.get(store.OFF_ENV, "").lower() == "off":
        return ChapterRuns(chapter, concrete, error=f"the store is off ({store.OFF_ENV}=off): every run computed")
    return ChapterRuns(chapter, concrete, states or ())


def not_stored(chapter: str, profile: str, overrides: dict[str, Any], results_root: Path) -> str | None:
    """Why the chapter would train (its runs the store does not hold, or why they cannot be listed), None when it
    would not: it has no stored computation, or the store holds every run of it (``chapter_runs``)."""
    if not has_stored_runs(chapter):
        return None
    runs = chapter_runs(chapter, profile, overrides, results_root)
    if runs.error:
        return runs.error
    missing = len(runs.runs) - runs.count("current")
    if not missing:
        return None
    stale = runs.count("stale")
    kinds = ", ".join(f"{n} {w}" for n, w in ((stale, "stale"), (missing - stale, "missing or damaged")) if n)
    return f"{missing} of {len(runs.runs)} runs not in the store under today's key ({kinds})"


@contextlib.contextmanager
def _results_in(root: Path | None) -> Iterator[None]:
    """$QKOV_RESULTS_ROOT at ``root`` inside the block (as a chapter's kernel sees it), where one is given."""
    before = os.environ.get(results.ROOT_ENV)
    if root is not None:
        os.environ[results.ROOT_ENV] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(results.ROOT_ENV, None)
        else:
            os.environ[results.ROOT_ENV] = before


def _run_line(run: store.RunState) -> str:
    name = f"{run.folder}/{run.name}" if PART in run.folder else run.name  # a run stored apart: its folder too
    if run.state == "damaged":
        return f"  {run.state:8} {name}: {'; '.join(run.why)}"
    where = f"computed at {run.commit[:12]}" if run.commit else "never computed"
    took = f" in {run.compute_s:.0f} s" if run.compute_s is not None else ""
    why = f": {', '.join(run.why)} changed" if run.why else ""
    return f"  {run.state:8} {name}{why} ({where}{took})"


def status(profile: str, chapters: Sequence[str] | None = None, verbose: bool = True) -> list[ChapterRuns]:
    """Every chapter's stored runs under ``profile``, printed: first a line counting them all (``total_line``), then
    a line per chapter, with ``verbose`` one per run that is not current (why)."""
    out = [chapter_runs(c, profile) for c in chapters or [c for c in catalog.CHAPTERS if has_stored_runs(c)]]
    print(total_line(profile, out))
    for found in out:
        shown = (
            ("current", "stale", "damaged", "missing") if found.count("damaged") else ("current", "stale", "missing")
        )
        counts = ", ".join(f"{found.count(s)} {s}" for s in shown)
        print(found.line if found.error else f"{found.chapter} ({found.profile}): {len(found.runs)} runs, {counts}")
        for run in found.runs if verbose else ():
            if run.state != "current":  # a current run needs no line: the chapter's count says it
                print(_run_line(run))
    return out


def total_line(profile: str, found: Sequence[ChapterRuns]) -> str:
    """The first line of ``results status``: the profile's runs over every chapter listed, by state."""
    runs = [r for f in found for r in f.runs]
    states = ", ".join(f"{sum(r.state == s for r in runs)} {s}" for s in ("current", "stale", "damaged", "missing"))
    unlisted = sum(f.error is not None for f in found)
    cannot = f"; {unlisted} chapter(s) whose runs cannot be listed (below)" if unlisted else ""
    return f"{profile}: {len(found)} chapters, {len(runs)} stored runs: {states}{cannot}"


def command(args: Any) -> int:
    """``results status [--profile P] [--only C,..] [--check] [--brief]``: 1 with ``--check`` when a run is stale,
    damaged or missing, a chapter's runs cannot be listed, or a file of the profile's committed store is stray,
    edited or damaged (``store_verify.verify``, each named)."""
    found = status(args.profile, args.only.split(",") if args.only else None, not args.brief)
    bad = [f for f in found if f.error or f.count("current") < len(f.runs)]
    problems = store_verify.verify(store.committed_root(), args.profile) if args.check else []
    for line in problems:
        print(line)
    if args.check and problems:
        print(f"the committed store's {args.profile} folders: {len(problems)} problem(s), named above", file=sys.stderr)
    if args.check and bad:
        print(f"not current: {', '.join(f.chapter for f in bad)}", file=sys.stderr)
    return int(args.check and bool(bad or problems))


def repair(args: Any) -> int:
    """``results repair [--profile P]``: rebuild the manifest of each folder of the committed store (one profile's, or
    every stored profile's) from the runs whose seals hold (``store_verify.repair``), a line per folder and per run
    left out; 1 when a run was left out (its files are strays now: compute it again, or remove them) or a folder is
    a link."""
    root, left_out = store.committed_root(), 0
    try:
        for profile in [args.profile] if args.profile else store.STORED_PROFILES:
            for folder in sorted(f for f in (root / profile).glob("*") if f.is_dir()):
                store_verify.refuse_links(root, folder)
                kept, left = store_verify.repair(folder)
                print(f"{folder}: manifest rebuilt from {kept} sealed run(s), {len(left)} left out")
                for line in left:
                    print(f"  {line}", file=sys.stderr)
                left_out += len(left)
    except results.ResultsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return int(left_out > 0)


def add_command(actions: Any) -> None:
    """``results status`` on the ``results`` command's subparsers."""
    st = actions.add_parser("status", help="list each chapter's stored runs: current, stale (why) or missing")
    st.add_argument("--profile", default="default", choices=PROFILES)
    st.add_argument("--only", help="comma-separated chapter names (default: every chapter with stored runs)")
    st.add_argument("--check", action="store_true", help="exit 1 when a stored run is stale or missing")
    st.add_argument("--brief", action="store_true", help="one line per chapter")
    rp = actions.add_parser("repair", help="rebuild the committed store's manifests from the runs whose seals hold")
    rp.add_argument("--profile", choices=store.STORED_PROFILES, help="one profile (default: every stored profile)")
