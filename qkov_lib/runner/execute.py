"""Running a chapter's notebook with papermill into a staging folder, and what the runner then writes into the
executed notebook: its tidied metadata, the banner under its title, the note of a run that found no data."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import pandas as pd
import papermill
from jupyter_client import AsyncKernelManager
from papermill.exceptions import PapermillExecutionError

from ..core import results
from ..core.budget import DEADLINE_ENV, OutOfTime
from ..core.paths import PACKAGE_DIR
from ..core.progress import PROGRESS_ENV, TERMINAL
from ..core.progress import kind as progress_kind
from ..core.results import UNAVAILABLE
from ..core.workers import RUN_ENV, run_marker
from ..data.registry import DataUnavailable
from ..metrics.verdicts import HOLDS, counts
from ..runs import store, store_modes
from . import catalog
from .watch import watching

SOCKET_PATH_MAX = 90  # a Unix socket's path holds at most 107 bytes: the folder, "/kernel-" and a number


class ChapterFailed(RuntimeError):
    """A chapter raised while running; the message names the chapter and the failing cell."""


class ChapterOutOfTime(ChapterFailed):
    """The time budget ran out in the middle of the chapter's sweep (``sweep.OutOfTime``): its finished cells are
    kept, and the chapter is left for the next run like one not started."""


def run_notebook(
    chapter: str,
    profile: str,
    overrides: dict[str, Any],
    staging: Path,
    results_root: Path,
    progress: bool = True,
    deadline: float | None = None,
    force: bool = False,
) -> str | None:
    """Run the chapter with papermill into ``staging`` (notebook and results), its sweeps stopping at ``deadline``
    (seconds since the epoch); ``force``: its stored runs computed afresh too (``store_modes.forcing``). Returns
    None, or the message of the DataUnavailable error that stopped it; raises ChapterOutOfTime when the deadline
    stopped a sweep, ChapterFailed for any other error."""
    nb = jupytext.read(catalog.source(chapter))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    executed = staging / f"{chapter}.ipynb"
    env = {
        results.RESULTS_ENV: str(staging),
        results.ROOT_ENV: str(results_root),
        PROGRESS_ENV: "0",
        DEADLINE_ENV: "" if deadline is None else repr(deadline),
        # the default and official runs of the book, no overrides, go to the committed store (``runs.store``)
        store.WRITE_ENV: "1" if profile in store.STORED_PROFILES and not overrides else "",
        store.OFF_ENV: _store_mode(force),
        RUN_ENV: run_marker(),  # the kernel and its workers carry it: the next run finds them if this one is killed
        # the kernel imports this very qkov_lib, not whichever checkout an editable install points to
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_DIR.parent), os.environ.get("PYTHONPATH")])),
    }
    previous = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # progress off: the runner shows cell progress
    try:
        with watching(profile), kernel_sockets() as sockets:  # the stored computations' progress, as lines
            papermill.execute_notebook(
                nb,
                str(executed),
                parameters={"profile": profile, "overrides": overrides},
                kernel_name="python3",
                cwd=str(catalog.source(chapter).parent),
                progress_bar=progress and progress_kind() == TERMINAL,  # a log: no cell bar
                # the kernel's own log tells a build nothing: a failing cell is papermill's error, a dead kernel
                # nbclient's; what it printed was a shutdown's "KeyboardInterrupt caught in kernel"
                extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
                **sockets,
            )  # no transport notice
    except PapermillExecutionError as err:
        if err.ename == DataUnavailable.__name__:
            return str(err.evalue)
        if err.ename == OutOfTime.__name__:
            raise ChapterOutOfTime(str(err.evalue)) from None
        raise ChapterFailed(
            f"chapter {chapter!r} failed in cell {err.cell_index} (execution count "
            f"{err.exec_count}): {err.ename}: {err.evalue}"
        ) from None
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not (staging / f"{chapter}.json").exists():
        raise ChapterFailed(f"chapter {chapter!r} ran but saved no results (it must call Chapter.save)")
    return None


@contextlib.contextmanager
def kernel_sockets() -> Iterator[dict[str, Any]]:
    """papermill's keyword for a kernel that talks through Unix sockets in a folder of its own, removed after it (on
    POSIX): a TCP port one process finds free can be taken by another before its kernel binds it ("Address already in
    use" where chapters run side by side). Elsewhere, or where the folder's path is too long for a socket, TCP."""
    folder = Path(tempfile.mkdtemp(prefix="qkov-kernel-")) if os.name == "posix" else None
    if folder is None or len(str(folder)) > SOCKET_PATH_MAX:
        if folder is not None:
            folder.rmdir()
        yield {}
        return
    prefix = str(folder / "kernel")

    class Sockets(AsyncKernelManager):
        def __init__(self, **kw: Any) -> None:
            super().__init__(transport="ipc", ip=prefix, **kw)

    try:
        yield {"kernel_manager_class": Sockets}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _store_mode(force: bool) -> str:
    """The kernel's store mode: ``recompute`` under ``--force`` (every stored run computed afresh), unless the store
    is off; else as this process has it."""
    mode = os.environ.get(store.OFF_ENV, "")
    return store_modes.RECOMPUTE if force and mode.lower() != "off" else mode


def tidy(executed: Path) -> None:
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
            cell.metadata["tags"] = [*tags, "remove-cell"]  # the book shows the effective parameters once
    nbformat.write(nb, executed)


def banner(meta: dict[str, Any]) -> str:
    """One line on how a page was made, from its results' metadata: profile, device, commit, date, wall time."""
    parts = [f"profile `{meta['profile']}`"]
    if "device" in meta:
        parts.append(f"{meta['device']} ({meta.get('device_name', '?')})")
    if commit := meta.get("git_commit"):
        parts.append(f"commit {_short(commit)}")
    if "date" in meta:
        parts.append(meta["date"])
    if "wall_time_s" in meta:
        parts.append(
            f"{meta['wall_time_s'] / 60:.1f} min" if meta["wall_time_s"] >= 60 else f"{meta['wall_time_s']:.0f} s"
        )
    if isinstance(runs := meta.get("stored_runs"), dict) and runs.get("runs"):
        parts.append(_stored_words(runs))
    return "*This page was run with " + " · ".join(parts) + ".*"


def _stored_words(runs: dict[str, Any]) -> str:
    """The banner's words on a page's stored runs (``core.chapter.stored_runs``): the commits they were computed
    at (their number, beyond three), their compute time, how many came from the store."""
    commits = [_short(c) for c in runs.get("commits", [])]
    at, named = ", ".join(commits) or "an unknown commit", ""
    if len(commits) > 3:  # a page computed in pieces over many commits: a count, not a wall of hashes
        at, named = f"{len(commits)} commits", "; `python -m qkov_lib results status` names each run's commit"
    minutes = float(runs.get("compute_s", 0)) / 60
    unseen = runs.get("data_unseen") or []
    trusted = (
        f"; read without their data ({', '.join(unseen)}), which was not here to check them against" if unseen else ""
    )
    return (
        f"its {runs['runs']} stored runs computed at {at} ({minutes:.1f} min of "
        f"compute; {runs.get('from_store', 0)} of them read from the store{named}{trusted})"
    )


def _short(commit: str) -> str:
    """A commit as the banner shows it: its first 12 characters, '+dirty' kept, in backticks."""
    return f"`{commit[:12]}{'+dirty' if commit.endswith('+dirty') else ''}`"


def under_title(nb: nbformat.NotebookNode, text: str) -> None:
    """Put ``text`` under the page's title (the first line of its first Markdown cell)."""
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    heading, _, rest = first.source.partition("\n")
    first.source = f"{heading}\n\n{text}\n{rest}"


CLAIMS_HEADING = "## The claims, checked"  # the section of a chapter page that judges its claims


def verdict_line(claims: pd.DataFrame, chapter: str) -> str:
    """The page's first line: its claims' tally ('4 of 6 claims hold; 1 fails, 1 undecided'), linking to the section
    that judges them (labelled ``<chapter>-claims`` by ``add_banner``)."""
    told = counts(claims["verdict"])
    rest = ", ".join(f"{k} {w}" for w, k in told.items() if k and w != HOLDS)
    held = (
        f"{told[HOLDS]} of {len(claims)} claim{'s' if len(claims) != 1 else ''} hold{'s' if len(claims) == 1 else ''}"
    )
    return f"**Verdict: {held}{'; ' + rest if rest else ''}**, each with its reason in {{ref}}`{chapter}-claims`."


def add_banner(staging: Path, chapter: str) -> None:
    """Put the banner under the page's title, and above it the claims' tally (``verdict_line``) where the page judges
    claims (a ``CLAIMS_HEADING`` section, which gets the label the line links to, and its unit's ``claims`` table, or
    a ``main`` table of verdicts as the errata's)."""
    path = staging / f"{chapter}.ipynb"
    nb = nbformat.read(path, as_version=4)
    under_title(nb, banner(results.read_meta(staging, chapter)))
    section = [c for c in nb.cells if c.cell_type == "markdown" and CLAIMS_HEADING in c.source.splitlines()]
    tables = (results.table_path(staging, chapter, t) for t in ("claims", "main"))
    judged = (
        next((t for t in map(pd.read_csv, filter(Path.is_file, tables)) if "verdict" in t), None) if section else None
    )
    if section and judged is not None:
        lines = section[0].source.splitlines()
        at = lines.index(CLAIMS_HEADING)
        section[0].source = "\n".join([*lines[:at], f"({chapter}-claims)=", *lines[at:]])
        under_title(nb, verdict_line(judged, chapter))
    nbformat.write(nb, path)


def without_data(staging: Path, chapter: str, profile: str, params: dict[str, Any], message: str) -> None:
    """Make the stopped run a unit of its own: the page ends at the cell that found no data, with a note on how to
    get it; the unit holds no claims and says why (its status), which the scorecard and the summary report."""
    path = staging / f"{chapter}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "papermill-error-cell-tag" not in c.metadata.get("tags", [])]
    stop = next(
        i for i, c in enumerate(cells) if any(o.get("ename") == DataUnavailable.__name__ for o in c.get("outputs", []))
    )
    note = (  # the error's own cell may be hidden on the page (remove-cell): its message is said here again
        "**This chapter stopped here: its data is not available where this page was built.** "
        f"{message.strip().splitlines()[0].rstrip('.')}. Then `python -m qkov_lib reproduce --only {chapter}` runs "
        "the rest."
    )
    cells[stop].outputs = [o for o in cells[stop].outputs if o.get("name") != "stderr"]  # library warnings, paths
    nb.cells = [*cells[: stop + 1], nbformat.v4.new_markdown_cell(note)]
    nbformat.write(nb, path)
    results.save(
        staging,
        chapter,
        {},
        {
            "chapter": chapter,
            "profile": profile,
            "parameters": params,
            "status": UNAVAILABLE,
            "message": message,
            "git_commit": results.git_commit(),
        },
    )
