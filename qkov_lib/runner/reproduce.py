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
from ..core.device import cpu_workers, pick_device
from ..core.paths import BOOK_CHAPTERS, RESULTS_ROOT
from ..core.progress import bar as progress_bar
from ..core.results import UNAVAILABLE
from ..core.workers import end_leftovers
from ..data import DATA_ENV, data_dir
from ..data.registry import not_found
from ..runs import store
from . import execute, published, stored, units, watch
from .bundle import BundleError
from .catalog import resolve
from .checks import folder_path, prepare, results_folders, writable_folder
from .execute import ChapterFailed
from .fingerprint import data_identities, fingerprint, stale_reason, without_data
from .plan import chapter_state, defer, over_budget, plan_line, show_last
from .unpack import recover


@dataclass
class Summary:
    """What a ``reproduce`` run did: chapters by outcome, and the failure messages."""

    done: dict[str, list[str]] = field(default_factory=dict)  # 'ran' | 'skipped' | 'restored' | 'deferred' -> chapters
    no_data: list[str] = field(default_factory=list)  # chapters whose dataset is not available here
    kept: list[str] = field(default_factory=list)  # no data here, so the last unit with results stays
    failures: list[str] = field(default_factory=list)


def run_chapter(
    chapter: str,
    profile: str,
    overrides: dict[str, Any],
    out_dir: Path = BOOK_CHAPTERS,
    results_root: Path = RESULTS_ROOT,
    force: bool = False,
    deadline: float | None = None,
) -> str:
    """Run one chapter unless its published unit is intact and current. Returns 'ran', 'skipped', 'restored' (the
    unit was current; the book's copy of its notebook was missing or different and was copied back in), 'no data'
    (the chapter's dataset is not available; its unit says so) or 'kept' (this run had no data, and the last unit
    with results stays: a unit without data never replaces one with results; the page says so). A failure or an
    interruption leaves the published unit as it was; so does a sweep stopped at ``deadline`` (ChapterOutOfTime)."""
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
        good = units.with_results(final, chapter)
        if good and not stored.has_stored_runs(chapter) and (absent := _absent_here(chapter, setup)):
            return _keep(chapter, good, absent, final, out_dir)
        tqdm.write(f"running {chapter} ({profile}): {reason}")
        if stored.has_stored_runs(chapter):
            found = stored.chapter_runs(chapter, profile, overrides, results_root)
            tqdm.write(f"  {found.forced if force else found.line}")
        staging = results_root / f"{units.STAGING}{chapter}"
        units.make_staging(staging)
        try:
            start = time.perf_counter()
            try:
                missing = execute.run_notebook(
                    chapter, profile, overrides, staging, results_root, deadline=deadline, force=force
                )
            except execute.ChapterOutOfTime:
                raise
            except ChapterFailed as err:
                raise ChapterFailed(f"{err}\n  {units.keep_failed(staging, chapter, final, out_dir)}") from None
            if missing and good:
                return _keep(chapter, good, missing, final, out_dir)
            execute.tidy(staging / f"{chapter}.ipynb")
            if missing:
                execute.without_data(staging, chapter, profile, params, missing)
            execute.add_banner(staging, chapter)
            units.seal(staging, chapter, fp, time.perf_counter() - start)
            units.move_in(chapter, staging, final, out_dir)
        except OSError as err:
            raise ChapterFailed(
                f"chapter {chapter!r} ran but its results could not be written ({err}); free space "
                f"or fix permissions, then run it again"
            ) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (final / units.FAILED / f"{chapter}.ipynb").unlink(missing_ok=True)
    return "no data" if missing else "ran"


def _absent_here(chapter: str, setup: Any) -> str | None:
    """The message a run of the chapter would stop with for want of data, known before it starts: a dataset of
    which nothing is on this disk, where no download will be tried ($QKOV_DATA_DIR set, or ``download`` off). Not
    asked of a chapter with stored runs: the store makes its page without the data, or its run says what to get."""
    absent = without_data(data_identities(chapter))
    if absent and (data_dir() is not None or not getattr(setup, "download", False)):
        why = f"{DATA_ENV} is set and holds none of its files" if data_dir() else "no download is tried: download=False"
        return str(not_found(absent[0], why))
    return None


def _keep(chapter: str, good: dict[str, Any], message: str, final: Path, out_dir: Path) -> str:
    """Keep the chapter's last unit with results, whose data is not here, and say so: one line, and a note on its
    page. Returns 'kept'."""
    commit = str(good["git_commit"])[:12] if good.get("git_commit") else "an unknown commit"
    tqdm.write(f"kept the results of {commit} for {chapter}; this run had no data: {message}")
    when = f"commit `{commit}`" if good.get("git_commit") else commit
    show_last(
        final,
        chapter,
        f"*This build had no data for this chapter, so the page shows its last results, "
        f"computed at {when} ({_on(good)}). To rerun it: {message}*",
        out_dir,
    )
    return "kept"


def _on(meta: dict[str, Any]) -> str:
    """The data a unit was computed on, in words."""
    releases = {i.get("release") for i in meta.get("data_identity", {}).values() if isinstance(i, dict)}
    words: dict[frozenset[Any], str] = {
        frozenset({"canonical"}): "on the canonical release",
        frozenset({"offline"}): "on the offline copies",
    }
    return words.get(frozenset(releases), "on the data it records")


def reproduce(
    profile: str = "auto",
    pairs: Sequence[tuple[str, Any]] = (),
    only: Sequence[str] | None = None,
    force: bool = False,
    out_dir: Path | str = BOOK_CHAPTERS,
    results_root: Path | str = RESULTS_ROOT,
    budget_minutes: float | None = None,
    fetch: bool = True,
    stored_only: bool = False,
) -> Summary:
    """Run the selected chapters; every parameter and setting is checked before any chapter starts. With ``fetch``
    (and without ``force``), the published results are read first and every unit of theirs that is current here is
    taken in (``published.fetch``). A chapter whose dataset is not available ends with a page saying how to get it
    and is listed in ``no_data`` (in ``kept`` where its last results stay). With a budget, a stale chapter whose last
    wall time would end the run past it is not started ('deferred'); with ``stored_only``, nor is a stale chapter
    that would train (a run the results store does not hold): its page shows its last results, or says so."""
    chapters, profile, per_chapter = prepare(profile, pairs, only, budget_minutes)
    out_dir, results_root = folder_path(out_dir, "--out"), folder_path(results_root, "--results")
    writable_folder(out_dir, "--out")
    results_folders(results_root, profile, create=True)
    try:
        for line in recover(results_root):
            tqdm.write(line)
    except BundleError as err:
        tqdm.write(f"an interrupted unpack is still to be finished: {err}")
    if ended := end_leftovers():
        tqdm.write(f"ended {len(ended)} process(es) left behind by a run that was killed: {'; '.join(ended)}")
    if fetch and not force:
        published.fetch(profile, chapters, per_chapter, results_root, say=tqdm.write)
    summary = Summary()
    began, stored_before = time.perf_counter(), watch.snapshot(store.committed_root())
    plans = [chapter_state(c, profile, per_chapter[c], results_root, force) for c in chapters]
    for p in plans if stored_only else ():  # one that would train is not started: none of its runs is computed
        p.deferred = bool(p.reason and p.runs)
    tqdm.write(plan_line(plans))
    for c in (bar := progress_bar(chapters, f"chapters ({profile})", unit="chapter")):
        bar.set_postfix_str(c)
        start = time.perf_counter()
        try:
            status = None
            if budget_minutes is not None:
                state = chapter_state(c, profile, per_chapter[c], results_root, force)
                expected = state.expected_s(cpu_workers(pick_device()))
                if state.reason and over_budget(start - began, expected, budget_minutes):
                    last = "unknown" if expected is None else f"{expected / 60:.1f} min"
                    tqdm.write(
                        f"not starting {c} ({state.reason}; it should take {last}, by its last run and its stored "
                        f"runs' compute times): the {budget_minutes:g}-minute budget would be exceeded"
                    )
                    defer(c, state.profile, state.reason, results_root / state.profile, out_dir)
                    status = "deferred"
            if stored_only and status is None:
                status = _stored_only(c, profile, per_chapter[c], out_dir, results_root, force)
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
        if status in ("no data", "kept"):
            (summary.no_data if status == "no data" else summary.kept).append(c)
        else:
            summary.done.setdefault(status, []).append(c)
        tqdm.write(f"{status:>8}  {c}  ({time.perf_counter() - start:.1f} s)")
    tqdm.write(watch.changed(stored_before, watch.snapshot(store.committed_root())))
    return summary


def _stored_only(
    chapter: str, profile: str, overrides: dict[str, Any], out_dir: Path, results_root: Path, force: bool
) -> str | None:
    """'deferred' (its page made by ``defer``) when the chapter is stale and would train a run the results store does
    not hold (``stored.not_stored``); None when it may run."""
    state = chapter_state(chapter, profile, overrides, results_root, force)
    missing = state.reason and stored.not_stored(chapter, state.profile, overrides, results_root)
    if not missing:
        return None
    tqdm.write(f"not starting {chapter} ({state.reason}): {missing}, and --stored-only trains nothing")
    defer(chapter, state.profile, missing, results_root / state.profile, out_dir, stored_only=True)
    return "deferred"
