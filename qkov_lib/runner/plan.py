"""What a run would do before it does it: each chapter current or stale (and why), its last wall time, the time
budget (a stale chapter that would not fit is deferred), and the page a deferred chapter shows."""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from ..core import files, results
from ..core.chapter import as_dict
from ..core.contents import GATHERERS, title
from ..core.device import cpu_workers, pick_device
from ..core.paths import RESULTS_ROOT
from . import catalog, stored
from .catalog import resolve
from .checks import folder_path, prepare, results_folders
from .execute import under_title
from .fingerprint import fingerprint, stale_reason


@dataclass
class Plan:
    """One chapter as ``reproduce`` finds it before running: current (``reason`` None) or stale and why, and how long
    its last run took (None: never run, or unreadable)."""

    chapter: str
    profile: str
    reason: str | None
    estimate_s: float | None
    deferred: bool = False  # stale, but it would not fit in the time budget
    note: str = ""
    runs: int = 0  # the stored runs it would compute (``stored_compute``)
    compute_s: float | None = None  # their CPU seconds by the compute times the store records (None: none recorded)

    def expected_s(self, workers: int) -> float | None:
        """How long a rerun should take: its last wall time, or its runs' stored CPU time over ``workers`` processes
        where that is longer (None: neither known)."""
        spread = None if self.compute_s is None else self.compute_s / max(workers, 1)
        known = [t for t in (self.estimate_s, spread) if t is not None]
        return max(known) if known else None


def stored_compute(
    chapter: str, profile: str, overrides: dict[str, Any], results_root: Path, force: bool = False
) -> tuple[int, float | None]:
    """How many of the chapter's stored runs a rerun computes (not current: ``results status``; under ``force``,
    every one), and their CPU seconds by the compute times the store records for them (runs without one counted at
    the mean of the others; None where none has one); (0, None) for a chapter without stored runs, or whose runs
    cannot be listed."""
    if not stored.has_stored_runs(chapter):
        return 0, None
    runs = stored.chapter_runs(chapter, profile, overrides, results_root).runs
    todo = [r for r in runs if force or r.state != "current"]
    known = [r.compute_s for r in todo if r.compute_s is not None]
    return len(todo), (sum(known) * len(todo) / len(known) if known else None)


def last_wall_time(final: Path, chapter: str) -> float | None:
    """The runner's wall time of the chapter's last unit in ``final``, None when there is none."""
    try:
        wall = files.read_meta(final, chapter).get("runner_wall_time_s")
    except results.ResultsError:
        return None
    return float(wall) if isinstance(wall, (int, float)) else None


def chapter_state(
    chapter: str, profile: str, overrides: dict[str, Any], results_root: Path, force: bool = False
) -> Plan:
    """Whether the chapter's published unit is current, and why not (read-only: takes no lock, writes nothing)."""
    profile, setup = resolve(chapter, profile, overrides)
    final = results_root / profile
    fp = fingerprint(chapter, profile, as_dict(setup), results_root)
    reason = "--force" if force else stale_reason(final, chapter, fp)[0]
    runs, compute_s = stored_compute(chapter, profile, overrides, results_root, force) if reason else (0, None)
    return Plan(chapter, profile, reason, last_wall_time(final, chapter), runs=runs, compute_s=compute_s)


def plan(
    profile: str = "auto",
    pairs: Sequence[tuple[str, Any]] = (),
    only: Sequence[str] | None = None,
    force: bool = False,
    results_root: Path = RESULTS_ROOT,
    budget_minutes: float | None = None,
) -> list[Plan]:
    """What ``reproduce`` would do, chapter by chapter, without running or writing anything (``--dry-run``). With a
    budget, the stale chapters whose last wall time would no longer fit are marked deferred."""
    chapters, profile, per_chapter = prepare(profile, pairs, only, budget_minutes)
    results_root = folder_path(results_root, "--results")
    results_folders(results_root, profile, create=False)
    plans: list[Plan] = []
    spent = 0.0
    for c in chapters:
        p = chapter_state(c, profile, per_chapter[c], results_root, force)
        if p.reason is not None and budget_minutes is not None:
            p.deferred = over_budget(spent, p.expected_s(cpu_workers(pick_device())), budget_minutes)
            spent += 0.0 if p.deferred else p.expected_s(cpu_workers(pick_device())) or 0.0
        if p.reason is None and c in GATHERERS and any(q.reason and not q.deferred for q in plans):
            p.note = "reruns if the chapters above change their claims"
        plans.append(p)
    return plans


def format_plan(plans: Sequence[Plan]) -> str:
    """The dry run's table: chapter, current or stale (or deferred), its last wall time, the stored runs it would
    compute with their stored CPU time, and the reason; then a line of totals (``plan_line``)."""
    rows = [("chapter", "state", "last run", "to compute", "reason")]
    for p in plans:
        state = "current" if p.reason is None else "deferred" if p.deferred else "stale"
        last = "?" if p.estimate_s is None else f"{p.estimate_s / 60:.1f} min"
        rows.append((p.chapter, state, last, _runs_words(p), p.reason or p.note))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    table = "\n".join(
        f"{r[0]:{widths[0]}}  {r[1]:{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:{widths[3]}}  {r[4]}".rstrip()
        for r in rows
    )
    return f"{table}\n{plan_line(plans)}"


def _runs_words(p: Plan) -> str:
    if not p.runs:
        return ""
    cpu = "" if p.compute_s is None else f", {p.compute_s / 60:.0f} CPU-min"
    return f"{p.runs} run{'s' if p.runs != 1 else ''}{cpu}"


def plan_line(plans: Sequence[Plan]) -> str:
    """The plan of a whole build in one line: '16 chapters: 14 current, 2 to run (5 stored runs to compute, about 6
    CPU-minutes by their stored compute times)'."""
    stale = [p for p in plans if p.reason is not None and not p.deferred]
    runs, cpu = sum(p.runs for p in stale), [p.compute_s for p in stale if p.compute_s is not None]
    deferred = sum(p.deferred for p in plans)
    what = f"{runs} stored run{'s' if runs != 1 else ''} to compute" if runs else "no stored run to compute"
    cost = f", about {sum(cpu) / 60:.0f} CPU-minutes by their stored compute times" if cpu else ""
    later = f", {deferred} deferred" if deferred else ""
    current = len(plans) - len(stale) - deferred
    return f"{len(plans)} chapters: {current} current, {len(stale)} to run{later} ({what}{cost})"


def over_budget(spent_s: float, estimate_s: float | None, budget_minutes: float) -> bool:
    """Whether a chapter expected to take ``estimate_s`` (unknown: 0) would end past the budget."""
    return spent_s + (estimate_s or 0.0) > budget_minutes * 60


def defer(
    chapter: str,
    profile: str,
    reason: str,
    final: Path,
    out_dir: Path,
    started: bool = False,
    stored_only: bool = False,
) -> None:
    """Leave a stale chapter for the next run (the time budget is spent; or, ``stored_only``, it would train and this
    run computes only what the results store holds): the book shows its last unit, with a line saying it was not
    rerun and why; or, when there is none intact, a page saying the chapter is not computed and how to compute it.
    The published unit is left as it is."""
    if stored_only:
        why = f"this build computes only what the results store holds (`--stored-only`), and {reason}"
        note = f"*Not rerun in this build: {why}. This page is from the run named above.*"
        missing = (
            f"*Not computed (profile `{profile}`): {why}. `python -m qkov_lib reproduce --profile {profile} --only "
            f"{chapter}` computes it.*"
        )
    else:
        note = (
            f"*Not rerun in this build, for want of time ({reason}): this page is from the run named above. "
            f"The next build reruns it.*"
        )
        when = f"in the middle of it: {reason}" if started else "before this chapter"
        missing = (
            f"*Not computed yet (profile `{profile}`): this build's time budget ran out {when}. "
            "The next build runs it.*"
        )
    if not show_last(final, chapter, note, out_dir):
        heading = f"# {title(chapter, catalog.source(chapter).parent)}\n\n"
        text = heading + missing + (f"\n\n{extra}" if (extra := absent_note(chapter, profile)) else "")
        write_page(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)]), chapter, out_dir)


def absent_note(chapter: str, profile: str) -> str:
    """What a chapter says on its page when it is not computed under ``profile``: its ``absent(profile)`` (for a
    chapter that is a package, its ``pages`` module's), '' when it has none."""
    module = catalog.chapter_module(chapter)
    if hasattr(module, "__path__") and importlib.util.find_spec(f"{module.__name__}.pages"):
        module = importlib.import_module(f"{module.__name__}.pages")
    absent = getattr(module, "absent", None)
    return str(absent(profile)) if absent else ""


def show_last(final: Path, chapter: str, note: str, out_dir: Path) -> bool:
    """Make the book's page of ``chapter`` its last intact unit's notebook with ``note`` under the title; False (and
    nothing written) when there is no intact unit."""
    try:
        files.check(final, chapter)
        nb = nbformat.read(final / f"{chapter}.ipynb", as_version=4)
    except (results.ResultsError, OSError, ValueError):
        return False
    under_title(nb, note)
    write_page(nb, chapter, out_dir)
    return True


def write_page(nb: nbformat.NotebookNode, chapter: str, out_dir: Path) -> None:
    """Write a chapter's page into the book through a temporary file: the page is whole or as it was."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{chapter}.", suffix=".tmp")
    os.close(fd)
    try:
        nbformat.write(nb, tmp)
        files.umask_mode(tmp)
        os.replace(tmp, out_dir / f"{chapter}.ipynb")
    finally:
        Path(tmp).unlink(missing_ok=True)
