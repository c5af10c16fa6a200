"""The papermill runner: run chapters (jupytext sources) under a profile and publish each chapter's results and
executed notebook as one unit, skipping chapters whose unit is intact and whose inputs are unchanged.

A run executes into a staging folder, seals the unit there (the metadata lists every file with its sha256 and the
fingerprint of what the results depend on), checks it, and only then moves it in, metadata last. One chapter runs
at a time per results folder (a lock); a staging folder left by a killed run is removed by the next run."""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import jupytext
import nbformat
import papermill
from papermill.exceptions import PapermillExecutionError
from tqdm import tqdm

from .. import chapters
from ..core import codehash, portable, results
from ..core.chapter import ParameterError, as_dict, concrete_profile, parameters, resolve as resolve_setup
from ..core.contents import GATHERERS, chapter_names, run_order, title
from ..core.device import cpu_workers, engine_backend, pick_device
from ..core.paths import BOOK_CHAPTERS, NOTEBOOKS_DIR, PACKAGE_DIR, RESULTS_ROOT
from ..core.progress import PROGRESS_ENV, TERMINAL, kind as progress_kind
from ..core.progress import bar as progress_bar
from ..core.results import UNAVAILABLE
from ..data import cache_dir, data_dir
from ..data.registry import DataUnavailable, data_state
from ..runs.sweep import DEADLINE_ENV, SCHEDULER_ENV, OutOfTime

STAGING = ".staging-"  # <results root>/.staging-<chapter>: a run in progress
LOCKS = ".locks"  # <results root>/.locks/<chapter>.lock: held while a chapter runs
FAILED = "failed"  # <results root>/<profile>/failed/<chapter>.ipynb: the last failed run, for reading


class ChapterFailed(RuntimeError):
    """A chapter raised while running; the message names the chapter and the failing cell."""


class ChapterOutOfTime(ChapterFailed):
    """The time budget ran out in the middle of the chapter's sweep (``sweep.OutOfTime``): its finished cells are
    kept, and the chapter is left for the next run like one not started."""


class ChapterBusy(ChapterFailed):
    """Another process is running the same chapter into the same results folder."""


def _chapter_module(name: str) -> ModuleType:
    """A chapter's module, ``qkov_lib.chapters.<name>``: imported by name because the table of contents, not a list
    in the code, says which chapters the book has."""
    return importlib.import_module(f"{chapters.__name__}.{name}")


CHAPTERS: dict[str, ModuleType] = {name: _chapter_module(name) for name in chapter_names()}


def chapter_module(name: str) -> ModuleType:
    """The module of a chapter of the book; ParameterError naming the chapters for an unknown one."""
    if name not in CHAPTERS:
        raise ParameterError(f"unknown chapter {name!r}; chapters: {', '.join(CHAPTERS)}")
    return CHAPTERS[name]


def resolve(chapter: str, profile: str, overrides: dict[str, Any] | None = None,
            has_gpu: bool | None = None) -> tuple[str, Any]:
    """(concrete profile, typed setup) of a chapter by name (``chapter.resolve``)."""
    return resolve_setup(chapter_module(chapter), profile, overrides, has_gpu)


@dataclass
class Summary:
    """What a ``reproduce`` run did: chapters by outcome, and the failure messages."""

    done: dict[str, list[str]] = field(default_factory=dict)  # 'ran' | 'skipped' | 'restored' | 'deferred' -> chapters
    no_data: list[str] = field(default_factory=list)  # chapters whose dataset is not available here
    failures: list[str] = field(default_factory=list)


def split_overrides(chapters: Sequence[str], pairs: Sequence[tuple[str, Any]]) -> dict[str, dict[str, Any]]:
    """Give each -p NAME VALUE to every selected chapter that has NAME; a NAME that none has, or one given twice,
    is an error."""
    out: dict[str, dict[str, Any]] = {c: {} for c in chapters}
    seen: set[str] = set()
    for name, value in pairs:
        if name in seen:
            raise ParameterError(f"parameter {name!r} is given twice in -p; give each parameter once")
        seen.add(name)
        owners = [c for c in chapters if name in parameters(chapter_module(c).Setup)]
        if not owners:
            known = sorted({k for c in chapters for k in parameters(chapter_module(c).Setup)})
            raise ParameterError(f"unknown parameter {name!r} in -p; the selected chapters take: {', '.join(known)}")
        for c in owners:
            out[c][name] = value
    return out


def select(only: Sequence[str] | None) -> list[str]:
    """Chapters in book order; ``only`` picks some of them by name (None: all; empty or repeated: an error)."""
    order = run_order(list(CHAPTERS))
    if only is None:
        return order
    if not only:
        raise ParameterError("--only names no chapter; give comma-separated names (`python -m qkov_lib chapters` "
                             "lists them), or leave --only out to run every chapter")
    for i, name in enumerate(only):
        chapter_module(name)
        if name in only[:i]:
            raise ParameterError(f"chapter {name!r} is named twice in --only; name each chapter once")
    return [c for c in order if c in only]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chapter_code(chapter: str) -> codehash.CodeState:
    """The library code the chapter can execute (its imports' closure in qkov_lib) and the numerical libraries'
    versions (``codehash``)."""
    return codehash.chapter_code(NOTEBOOKS_DIR / f"{chapter}.md")


def fingerprint(chapter: str, profile: str, params: dict[str, Any], results_root: Path = RESULTS_ROOT
                ) -> dict[str, str]:
    """What a chapter's output depends on, part by part: its source (its cells, not the notebook's metadata, which
    JupyterLab rewrites on opening), its resolved parameters, its code (the library
    modules it can execute, docstrings aside, and the numerical libraries' versions), the files and settings of the
    datasets it reads, the portable arithmetic mode's settings, the device and engine that compute (``computed_by``),
    and, for a page that gathers results, the other chapters' units (their metadata, which holds every file's
    sha256); a chapter whose page sets another profile's results beside its own (``BESIDE``, e.g. the authors'
    setup under ``official``) depends on that profile's unit of it too (every chapter's, for a gathering page)."""
    module = chapter_module(chapter)
    datasets = getattr(module, "DATASETS", ())
    code = chapter_code(chapter)
    parts = {"source": codehash.source_digest(NOTEBOOKS_DIR / f"{chapter}.md"),
             "parameters": _sha(json.dumps({"profile": profile, "params": params}, sort_keys=True).encode()),
             "code": code.digest,
             "arithmetic": _sha(json.dumps(portable.settings(), sort_keys=True).encode()),
             "engine": _sha(json.dumps(computed_by(code), sort_keys=True).encode())}
    if datasets:
        state = {name: data_state(name) for name in datasets}
        parts["data"] = _sha(json.dumps(state, sort_keys=True).encode())
    if chapter in GATHERERS:
        parts["inputs"] = _units_digest(results_root / profile, None)
    for other in getattr(module, "BESIDE", ()):
        if other != profile:
            parts[f"beside {other}"] = _units_digest(results_root / other, None if chapter in GATHERERS else chapter)
    return parts


def _units_digest(folder: Path, chapter: str | None) -> str:
    """The digest of a profile folder's units (their metadata, which holds every file's sha256): ``chapter``'s
    alone, or every chapter's but the gathering pages' (None)."""
    units = sorted(p for p in folder.glob("*.json") if p.stem not in GATHERERS and chapter in (None, p.stem))
    return _sha(b"".join(p.name.encode() + p.read_bytes() for p in units))


def computed_by(code: codehash.CodeState) -> dict[str, str]:
    """What computes a chapter's numbers, beyond its code and the arithmetic mode: the device, and the engine that
    trains synthetic stacks where the chapter's code can reach it (the engines agree closely, not to the bit)."""
    device = pick_device()
    out = {"device": device.type}
    if "qkov_lib.train.backends" in code.modules:
        out["synthetic_engine"] = engine_backend(device)
    return out


def stale_reason(final: Path, chapter: str, fp: dict[str, str]) -> tuple[str | None, dict[str, Any]]:
    """Why the published unit cannot be reused (missing, damaged, or an input changed), None when it can; and
    its metadata ({} when unreadable)."""
    try:
        meta = results.check(final, chapter)
    except results.ResultsError as err:
        return str(err), {}
    old = meta.get("fingerprint")
    if not isinstance(old, dict):
        return "the results were not written by this runner (a chapter run by hand, or an older version)", meta
    changed = sorted(k for k in fp.keys() | old.keys() if fp.get(k) != old.get(k))
    if changed:
        return f"{', '.join(_named(k, chapter, meta) for k in changed)} changed", meta
    if f"{chapter}.ipynb" not in meta.get("files", {}):
        return "the results hold no executed notebook", meta
    return None, meta


def _named(part: str, chapter: str, meta: dict[str, Any]) -> str:
    """A changed fingerprint part; for the code, with the modules (and library versions) that changed when the
    unit recorded its code."""
    if part == "engine" and isinstance(meta.get("computed_by"), dict):
        now = computed_by(chapter_code(chapter))
        what = [f"{k} {meta['computed_by'].get(k, 'none')} -> {now.get(k, 'none')}" for k in sorted(now)
                if meta["computed_by"].get(k) != now.get(k)]
        return f"engine ({', '.join(what)})" if what else part
    if part != "code" or not isinstance(meta.get("code"), dict):
        return part
    what = codehash.what_changed(meta["code"], chapter_code(chapter))
    return f"code ({', '.join(what)})" if what else part


def _try_lock(fh) -> bool:
    try:
        import fcntl  # platform: POSIX only
    except ImportError:  # Windows
        import msvcrt  # platform: Windows only
        try:
            msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@contextmanager
def chapter_lock(results_root: Path, chapter: str) -> Iterator[None]:
    """Hold <results root>/.locks/<chapter>.lock, or raise ChapterBusy naming its holder. The operating system
    releases the lock when the process ends, however it ends."""
    path = results_root / LOCKS / f"{chapter}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        if not _try_lock(fh):
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise ChapterBusy(f"chapter {chapter!r} is already running into {results_root} ({holder}); wait for "
                              f"it to finish, or pass another --results folder")
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        fh.flush()
        yield


def clear_stale_staging(results_root: Path, chapter: str) -> int:
    """Remove staging folders of ``chapter`` left by runs that were killed; call only while holding its lock."""
    stale = [p for p in results_root.glob(f"{STAGING}{chapter}*")
             if p.name == f"{STAGING}{chapter}" or p.name.startswith(f"{STAGING}{chapter}-")]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return len(stale)


def _execute(chapter: str, profile: str, overrides: dict[str, Any], staging: Path, results_root: Path,
             progress: bool = True, deadline: float | None = None) -> str | None:
    """Run the chapter with papermill into ``staging`` (notebook and results), its sweeps stopping at ``deadline``
    (seconds since the epoch). Returns None, or the message of the DataUnavailable error that stopped it; raises
    ChapterOutOfTime when the deadline stopped a sweep, ChapterFailed for any other error."""
    nb = jupytext.read(NOTEBOOKS_DIR / f"{chapter}.md")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    executed = staging / f"{chapter}.ipynb"
    env = {results.RESULTS_ENV: str(staging), results.ROOT_ENV: str(results_root), PROGRESS_ENV: "0",
           DEADLINE_ENV: "" if deadline is None else repr(deadline),
           # the kernel imports this very qkov_lib, not whichever checkout an editable install points to
           "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_DIR.parent), os.environ.get("PYTHONPATH")]))}
    previous = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # progress off: the runner shows cell progress
    try:
        papermill.execute_notebook(nb, str(executed), parameters={"profile": profile, "overrides": overrides},
                                   kernel_name="python3", cwd=str(NOTEBOOKS_DIR),
                                   progress_bar=progress and progress_kind() == TERMINAL,  # a log: no cell bar
                                   extra_arguments=["--IPKernelApp.log_level=ERROR"])  # no transport notice
    except PapermillExecutionError as err:
        if err.ename == DataUnavailable.__name__:
            return str(err.evalue)
        if err.ename == OutOfTime.__name__:
            raise ChapterOutOfTime(str(err.evalue)) from None
        raise ChapterFailed(f"chapter {chapter!r} failed in cell {err.cell_index} (execution count "
                            f"{err.exec_count}): {err.ename}: {err.evalue}") from None
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not (staging / f"{chapter}.json").exists():
        raise ChapterFailed(f"chapter {chapter!r} ran but saved no results (it must call Chapter.save)")
    return None


def _tidy(executed: Path) -> None:
    """Remove papermill's input/output paths from the notebook metadata (the book offers the .ipynb for download),
    number the cells instead of papermill's random ids (a rerun writes the same cells), and hide the parameters
    cells from the book (the folded settings box under the title lists every effective parameter). What else the
    page shows of a cell, each chapter's notebook says in its cells' tags."""
    nb = nbformat.read(executed, as_version=4)
    for key in ("input_path", "output_path"):
        nb.metadata.get("papermill", {}).pop(key, None)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
        tags = cell.metadata.get("tags", [])
        if {"parameters", "injected-parameters"} & set(tags) and "remove-cell" not in tags:
            cell.metadata["tags"] = tags + ["remove-cell"]  # the book shows the effective parameters once
    nbformat.write(nb, executed)


def banner(meta: dict[str, Any]) -> str:
    """One line on how a page was made, from its results' metadata: profile, device, commit, date, wall time."""
    parts = [f"profile `{meta['profile']}`"]
    if "device" in meta:
        parts.append(f"{meta['device']} ({meta.get('device_name', '?')})")
    if commit := meta.get("git_commit"):
        parts.append(f"commit `{commit[:12]}{'+dirty' if commit.endswith('+dirty') else ''}`")
    if "date" in meta:
        parts.append(meta["date"])
    if "wall_time_s" in meta:
        parts.append(f"{meta['wall_time_s'] / 60:.1f} min" if meta["wall_time_s"] >= 60 else
                     f"{meta['wall_time_s']:.0f} s")
    return "*This page was run with " + " · ".join(parts) + ".*"


def _add_banner(staging: Path, chapter: str) -> None:
    """Put the banner under the page's title (the first line of its first cell)."""
    path = staging / f"{chapter}.ipynb"
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    heading, _, rest = first.source.partition("\n")
    first.source = f"{heading}\n\n{banner(results.read_meta(staging, chapter))}\n{rest}"
    nbformat.write(nb, path)


def _without_data(staging: Path, chapter: str, profile: str, params: dict[str, Any], message: str) -> None:
    """Make the stopped run a unit of its own: the page ends at the cell that found no data, with a note on how to
    get it; the unit holds no claims and says why (its status), which the scorecard and the summary report."""
    path = staging / f"{chapter}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "papermill-error-cell-tag" not in c.metadata.get("tags", [])]
    stop = next(i for i, c in enumerate(cells) if any(o.get("ename") == DataUnavailable.__name__
                                                      for o in c.get("outputs", [])))
    note = ("**This chapter stopped here: its data is not available where this page was built.** The message above "
            f"says how to get it; then `python -m qkov_lib reproduce --only {chapter}` runs the rest.")
    cells[stop].outputs = [o for o in cells[stop].outputs if o.get("name") != "stderr"]  # library warnings, paths
    nb.cells = cells[:stop + 1] + [nbformat.v4.new_markdown_cell(note)]
    nbformat.write(nb, path)
    results.save(staging, chapter, {},
                 {"chapter": chapter, "profile": profile, "parameters": params, "status": UNAVAILABLE,
                  "message": message, "git_commit": results.git_commit()})


def _seal(staging: Path, chapter: str, fp: dict[str, str], wall: float) -> None:
    """Stamp the staged unit: every file with its sha256, the fingerprint (and each code module's digest, to name
    what changed later), the runner's wall time; then check it."""
    strays = [p.name for p in staging.iterdir() if not p.name.startswith(f"{chapter}.")]
    if strays:
        raise ChapterFailed(f"chapter {chapter!r} wrote files not named {chapter}.*: {', '.join(strays)}")
    meta = results.read_meta(staging, chapter)
    code = chapter_code(chapter)
    meta.update(fingerprint=fp, code=code.as_meta(), computed_by=computed_by(code), runner_wall_time_s=round(wall, 3),
                files={p.name: results.sha256_file(p) for p in sorted(staging.iterdir())
                       if p.name != f"{chapter}.json"})
    results.write_meta(staging, chapter, meta)
    results.check(staging, chapter)


def _copy_in(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file beside it: ``target`` is whole or untouched."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _publish(chapter: str, staging: Path, final: Path, out_dir: Path) -> None:
    """Move a sealed unit into ``final``, metadata last (the unit reads as absent, never as mixed, until it lands),
    then copy its notebook into the book."""
    meta = f"{chapter}.json"
    final.mkdir(parents=True, exist_ok=True)
    (final / meta).unlink(missing_ok=True)
    for old in final.glob(f"{chapter}.*"):
        old.unlink()
    for path in staging.iterdir():
        if path.name != meta:
            os.replace(path, final / path.name)
    os.replace(staging / meta, final / meta)
    _copy_in(final / f"{chapter}.ipynb", out_dir / f"{chapter}.ipynb")


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
    with chapter_lock(results_root, chapter):
        if clear_stale_staging(results_root, chapter):
            tqdm.write(f"removed the staging folder of an interrupted run of {chapter}")
        fp = fingerprint(chapter, profile, params, results_root)
        reason, meta = ("--force", {}) if force else stale_reason(final, chapter, fp)
        if reason is None:
            copy = out_dir / f"{chapter}.ipynb"
            status = "skipped"
            if not copy.is_file() or results.sha256_file(copy) != meta["files"][copy.name]:
                _copy_in(final / copy.name, copy)
                status = "restored"
            return "no data" if meta.get("status") == UNAVAILABLE else status
        tqdm.write(f"running {chapter} ({profile}): {reason}")
        staging = results_root / f"{STAGING}{chapter}"
        staging.mkdir()
        try:
            start = time.perf_counter()
            try:
                missing = _execute(chapter, profile, overrides, staging, results_root, deadline=deadline)
            except ChapterOutOfTime:
                raise
            except ChapterFailed as err:
                raise ChapterFailed(f"{err}\n  {_keep_failed(staging, chapter, final, out_dir)}") from None
            _tidy(staging / f"{chapter}.ipynb")
            if missing:
                _without_data(staging, chapter, profile, params, missing)
            _add_banner(staging, chapter)
            _seal(staging, chapter, fp, time.perf_counter() - start)
            _publish(chapter, staging, final, out_dir)
        except OSError as err:
            raise ChapterFailed(f"chapter {chapter!r} ran but its results could not be written ({err}); free space "
                                f"or fix permissions, then run it again") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (final / FAILED / f"{chapter}.ipynb").unlink(missing_ok=True)
    return "no data" if missing else "ran"


def _keep_failed(staging: Path, chapter: str, final: Path, out_dir: Path) -> str:
    """Keep a failed run's notebook in <profile>/failed/ and show it as the chapter's page (the published results
    stay as they were, and the next run that succeeds replaces the page); returns a line saying where it is."""
    executed = staging / f"{chapter}.ipynb"
    if not executed.exists():
        return "no notebook was written"
    _tidy(executed)
    kept = final / FAILED / f"{chapter}.ipynb"
    _copy_in(executed, kept)
    _copy_in(executed, out_dir / f"{chapter}.ipynb")
    return f"the failed notebook is kept at {kept} and shown as the chapter's page"


def _writable_folder(path: Path, flag: str) -> None:
    """``path`` is, or can become, a writable folder; else one ParameterError naming the flag."""
    if path.exists() and not path.is_dir():
        raise ParameterError(f"{flag} {path} is a file; name a folder (it is created when missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ParameterError(f"{flag} {path} cannot be created ({err.strerror}); name a writable folder") from None
    if not os.access(path, os.W_OK):
        raise ParameterError(f"{flag} {path} is not writable; name a writable folder")


def check_environment() -> None:
    """The environment settings every chapter reads (device, engine, workers, data and cache folders, the portable
    mode), checked once up front."""
    try:
        device = pick_device()
        engine_backend(device)
        cpu_workers(device)
        data_dir()
        cache_dir()
        portable.level()
    except (ValueError, RuntimeError) as err:
        raise ParameterError(str(err)) from None


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


def last_wall_time(final: Path, chapter: str) -> float | None:
    """The runner's wall time of the chapter's last unit in ``final``, None when there is none."""
    try:
        wall = results.read_meta(final, chapter).get("runner_wall_time_s")
    except results.ResultsError:
        return None
    return float(wall) if isinstance(wall, (int, float)) else None


def chapter_state(chapter: str, profile: str, overrides: dict[str, Any], results_root: Path, force: bool = False
                  ) -> Plan:
    """Whether the chapter's published unit is current, and why not (read-only: takes no lock, writes nothing)."""
    profile, setup = resolve(chapter, profile, overrides)
    final = results_root / profile
    fp = fingerprint(chapter, profile, as_dict(setup), results_root)
    reason = "--force" if force else stale_reason(final, chapter, fp)[0]
    return Plan(chapter, profile, reason, last_wall_time(final, chapter))


def _prepare(profile: str, pairs: Sequence[tuple[str, Any]], only: Sequence[str] | None,
             budget_minutes: float | None) -> tuple[list[str], str, dict[str, dict[str, Any]]]:
    """Check every argument and setting up front: the chapters, the concrete profile, each chapter's overrides."""
    if budget_minutes is not None and not budget_minutes > 0:
        raise ParameterError(f"--budget-minutes {budget_minutes} is not a positive number of minutes; give one, or "
                             f"leave it out to run every stale chapter")
    chapters = select(only)
    check_environment()
    profile = concrete_profile(profile)
    per_chapter = split_overrides(chapters, pairs)
    for c in chapters:
        _warn_serial(c, profile, resolve(c, profile, per_chapter[c])[1])
    return chapters, profile, per_chapter


def _warn_serial(chapter: str, profile: str, setup: Any) -> None:
    """One line when $QKOV_DASK_SCHEDULER is set but the chapter's sweep runs serially (its profile says so)."""
    address = os.environ.get(SCHEDULER_ENV)
    if address and getattr(setup, "scheduler", None) == "serial":
        print(f"note: {SCHEDULER_ENV}={address} is not used by {chapter}: profile {profile} runs its sweep serially "
              f"(scheduler='serial'); add -p scheduler {address} to run it there", file=sys.stderr)


def results_folders(results_root: Path, profile: str, create: bool) -> Path:
    """The profile's folder of published units under ``results_root``, checked up front: neither it nor the root may
    be a file (and, with ``create``, both are made writable folders); ParameterError naming the fix."""
    final = results_root / profile
    for path, what in ((results_root, "--results"), (final, f"profile {profile}'s results folder")):
        if path.exists() and not path.is_dir():
            raise ParameterError(f"{what} {path} is a file, not a folder; move the file away, or name another "
                                 f"folder with --results")
    if create:
        _writable_folder(results_root, "--results")
        _writable_folder(final, "--results")
    return final


def plan(profile: str = "auto", pairs: Sequence[tuple[str, Any]] = (), only: Sequence[str] | None = None,
         force: bool = False, results_root: Path = RESULTS_ROOT, budget_minutes: float | None = None) -> list[Plan]:
    """What ``reproduce`` would do, chapter by chapter, without running or writing anything (``--dry-run``). With a
    budget, the stale chapters whose last wall time would no longer fit are marked deferred."""
    chapters, profile, per_chapter = _prepare(profile, pairs, only, budget_minutes)
    results_folders(results_root, profile, create=False)
    plans, spent = [], 0.0
    for c in chapters:
        p = chapter_state(c, profile, per_chapter[c], results_root, force)
        if p.reason is not None and budget_minutes is not None:
            p.deferred = _over_budget(spent, p.estimate_s, budget_minutes)
            spent += 0.0 if p.deferred else p.estimate_s or 0.0
        if p.reason is None and c in GATHERERS and any(q.reason and not q.deferred for q in plans):
            p.note = "reruns if the chapters above change their claims"
        plans.append(p)
    return plans


def format_plan(plans: Sequence[Plan]) -> str:
    """The dry run's table: chapter, current or stale (or deferred), its last wall time, and the reason."""
    rows = [("chapter", "state", "last run", "reason")]
    for p in plans:
        state = "current" if p.reason is None else "deferred" if p.deferred else "stale"
        last = "?" if p.estimate_s is None else f"{p.estimate_s / 60:.1f} min"
        rows.append((p.chapter, state, last, p.reason or p.note))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:{widths[0]}}  {r[1]:{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}".rstrip() for r in rows)


def _over_budget(spent_s: float, estimate_s: float | None, budget_minutes: float) -> bool:
    """Whether a chapter expected to take ``estimate_s`` (unknown: 0) would end past the budget."""
    return spent_s + (estimate_s or 0.0) > budget_minutes * 60


def defer(chapter: str, profile: str, reason: str, final: Path, out_dir: Path, started: bool = False) -> None:
    """Leave a stale chapter for the next run (the time budget is spent): the book shows its last unit, with a line
    saying it was not rerun and why; or, when there is none intact, a page saying the chapter is not computed yet.
    The published unit is left as it is."""
    note = (f"*Not rerun in this build, for want of time ({reason}): this page is from the run named above. "
            f"The next build reruns it.*")
    try:
        results.check(final, chapter)
        nb = nbformat.read(final / f"{chapter}.ipynb", as_version=4)
    except (results.ResultsError, OSError, ValueError):
        when = f"in the middle of it: {reason}" if started else "before this chapter"
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
            f"# {title(chapter, NOTEBOOKS_DIR)}\n\n*Not computed yet (profile `{profile}`): this build's time "
            f"budget ran out {when}. The next build runs it.*")])
    else:
        first = next(c for c in nb.cells if c.cell_type == "markdown")
        heading, _, rest = first.source.partition("\n")
        first.source = f"{heading}\n\n{note}\n{rest}"
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{chapter}.", suffix=".tmp")
    os.close(fd)
    try:
        nbformat.write(nb, tmp)
        os.replace(tmp, out_dir / f"{chapter}.ipynb")
    finally:
        Path(tmp).unlink(missing_ok=True)


def reproduce(profile: str = "auto", pairs: Sequence[tuple[str, Any]] = (), only: Sequence[str] | None = None,
              force: bool = False, out_dir: Path = BOOK_CHAPTERS, results_root: Path = RESULTS_ROOT,
              budget_minutes: float | None = None) -> Summary:
    """Run the selected chapters; every parameter and setting is checked before any chapter starts. A chapter
    whose dataset is not available ends with a page saying how to get it and is listed in ``no_data``. With a
    budget, a stale chapter whose last wall time would end the run past it is not started ('deferred')."""
    chapters, profile, per_chapter = _prepare(profile, pairs, only, budget_minutes)
    _writable_folder(out_dir, "--out")
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
                if state.reason and _over_budget(start - began, state.estimate_s, budget_minutes):
                    last = "unknown" if state.estimate_s is None else f"{state.estimate_s / 60:.1f} min"
                    tqdm.write(f"not starting {c} ({state.reason}; its last run took {last}): the "
                               f"{budget_minutes:g}-minute budget would be exceeded")
                    defer(c, state.profile, state.reason, results_root / state.profile, out_dir)
                    status = "deferred"
            end = None if budget_minutes is None else time.time() + budget_minutes * 60 - (start - began)
            status = status or run_chapter(c, profile, per_chapter[c], out_dir, results_root, force, deadline=end)
        except ChapterOutOfTime as err:
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
