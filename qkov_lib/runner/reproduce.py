"""The papermill runner: run chapters (jupytext sources) under a profile and publish each chapter's results and
executed notebook as one unit, skipping chapters whose unit is intact and whose inputs are unchanged.

A run executes into a staging folder, seals the unit there (the metadata lists every file with its sha256 and the
fingerprint of what the results depend on), checks it, and only then moves it in, metadata last. One chapter runs
at a time per results folder (a lock); a staging folder left by a killed run is removed by the next run. The steps
live beside this module: ``catalog`` (the chapters), ``checks`` (everything checked up front), ``fingerprint``,
``execute`` (papermill), ``units`` (locks, staging, seal, move in) and ``plan`` (dry run, time budget)."""
from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..core import results
from ..core.chapter import as_dict
from ..core.paths import BOOK_CHAPTERS, RESULTS_ROOT
from ..core.progress import bar as progress_bar
from ..core.results import UNAVAILABLE
from . import execute, units
from .catalog import CHAPTERS, resolve
from .checks import prepare, results_folders, writable_folder
from .execute import ChapterFailed
from .fingerprint import fingerprint, stale_reason
from .plan import chapter_state, defer, over_budget

__all__ = ["CHAPTERS", "ChapterFailed", "Summary", "reproduce", "resolve", "run_chapter"]


@dataclass
class Summary:
    """What a ``reproduce`` run did: chapters by outcome, and the failure messages."""

    done: dict[str, list[str]] = field(default_factory=dict)  # 'ran' | 'skipped' | 'restored' | 'deferred' -> chapters
    no_data: list[str] = field(default_factory=list)  # chapters whose dataset is not available here
    failures: list[str] = field(default_factory=list)


def run_chapter(chapter: str, profile: str, overrides: dict[str, Any], out_dir: Path = BOOK_CHAPTERS,
                results_root: Path = RESULTS_ROOT, force: bool = False, deadline: float | None = None) -> str:
    """Run one chapter unless its published unit is intact and current. Returns 'ran', 'skipped', 'restored' (the
    unit was current; the book's copy of its notebook was missing or different and was copied back in), or
    'no data' (the chapter's dataset is not available; its unit says so). A failure or an interruption leaves the
    published unit as it was; so does a sweep stopped at ``deadline`` (ChapterOutOfTime)."""
    profile, setup = resolve(chapter, profile, overrides)
    params = as_dict(setup)
    final = results_root / profile
    results_root.mkdir(parents=True, exist_ok=True)
    with units.chapter_lock(results_root, chapter):
        if units.clear_stale_staging(results_root, chapter):
            tqdm.write(f"removed the staging folder of an interrupted run of {chapter}")
        fp = fingerprint(chapter, profile, params, results_root)
        reason, meta = ("--force", {}) if force else stale_reason(final, chapter, fp)
        if reason is None:
            copy = out_dir / f"{chapter}.ipynb"
            status = "skipped"
            if not copy.is_file() or results.sha256_file(copy) != meta["files"][copy.name]:
                units.copy_in(final / copy.name, copy)
                status = "restored"
            return "no data" if meta.get("status") == UNAVAILABLE else status
        tqdm.write(f"running {chapter} ({profile}): {reason}")
        staging = results_root / f"{units.STAGING}{chapter}"
        staging.mkdir()
        try:
            start = time.perf_counter()
            try:
                missing = execute.run_notebook(chapter, profile, overrides, staging, results_root, deadline=deadline)
            except execute.ChapterOutOfTime:
                raise
            except ChapterFailed as err:
                raise ChapterFailed(f"{err}\n  {units.keep_failed(staging, chapter, final, out_dir)}") from None
            execute.tidy(staging / f"{chapter}.ipynb")
            if missing:
                execute.without_data(staging, chapter, profile, params, missing)
            execute.add_banner(staging, chapter)
            units.seal(staging, chapter, fp, time.perf_counter() - start)
            units.move_in(chapter, staging, final, out_dir)
        except OSError as err:
            raise ChapterFailed(f"chapter {chapter!r} ran but its results could not be written ({err}); free space "
                                f"or fix permissions, then run it again") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (final / units.FAILED / f"{chapter}.ipynb").unlink(missing_ok=True)
    return "no data" if missing else "ran"


def reproduce(profile: str = "auto", pairs: Sequence[tuple[str, Any]] = (), only: Sequence[str] | None = None,
              force: bool = False, out_dir: Path = BOOK_CHAPTERS, results_root: Path = RESULTS_ROOT,
              budget_minutes: float | None = None) -> Summary:
    """Run the selected chapters; every parameter and setting is checked before any chapter starts. A chapter
    whose dataset is not available ends with a page saying how to get it and is listed in ``no_data``. With a
    budget, a stale chapter whose last wall time would end the run past it is not started ('deferred')."""
    chapters, profile, per_chapter = prepare(profile, pairs, only, budget_minutes)
    writable_folder(out_dir, "--out")
    results_folders(results_root, profile, create=True)
    summary = Summary()
    began = time.perf_counter()
    for c in (bar := progress_bar(chapters, f"chapters ({profile})", unit="chapter")):
        bar.set_postfix_str(c)
        start = time.perf_counter()
        try:
            status = None
            if budget_minutes is not None:
                state = chapter_state(c, profile, per_chapter[c], results_root, force)
                if state.reason and over_budget(start - began, state.estimate_s, budget_minutes):
                    last = "unknown" if state.estimate_s is None else f"{state.estimate_s / 60:.1f} min"
                    tqdm.write(f"not starting {c} ({state.reason}; its last run took {last}): the "
                               f"{budget_minutes:g}-minute budget would be exceeded")
                    defer(c, state.profile, state.reason, results_root / state.profile, out_dir)
                    status = "deferred"
            end = None if budget_minutes is None else time.time() + budget_minutes * 60 - (start - began)
            status = status or run_chapter(c, profile, per_chapter[c], out_dir, results_root, force, deadline=end)
        except execute.ChapterOutOfTime as err:
            tqdm.write(f"stopped {c}: {err}")
            defer(c, profile, str(err), results_root / profile, out_dir, started=True)
            status = "deferred"
        except ChapterFailed as err:
            summary.failures.append(str(err))
            tqdm.write(f"FAILED {err}")
            continue
        if status == "no data":
            summary.no_data.append(c)
        else:
            summary.done.setdefault(status, []).append(c)
        tqdm.write(f"{status:>8}  {c}  ({time.perf_counter() - start:.1f} s)")
    return summary
