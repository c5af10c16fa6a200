"""Sweeps over a grid on Dask (dask.distributed): one task per grid cell, from a laptop to a cluster.

By default an embedded ``LocalCluster`` (one single-threaded worker process per core); an existing scheduler by its
address (``scheduler=``, or $QKOV_DASK_SCHEDULER), for instance one started on a batch cluster with dask-jobqueue;
or ``"serial"``: every cell here, one after another, without Dask. Each finished cell's rows are written at once to
its own file (atomically, under a name derived from the cell), so an interrupted sweep resumes where it stopped and
a cell is never counted twice. Under the runner's time budget ($QKOV_DEADLINE) a sweep starts no cell, and waits for
none, past the deadline: it raises ``OutOfTime``, its finished cells kept for the next run. A worker lost mid-task is
Dask's to handle: the scheduler reruns the task on another
worker; the rows are written here, by the client, once per cell. Every task trains on one torch thread, so a cell's
numbers do not depend on where it ran.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..core import portable
from ..core.budget import OutOfTime, deadline
from ..core.chapter import current_scope
from ..core.codehash import task_fingerprint
from ..core.files import write_atomic
from ..core.progress import bar
from ..core.results import results_root
from ..core.workers import run_each, timed
from .store import Batch, Done, Executor, Piece

SCHEDULER_ENV = "QKOV_DASK_SCHEDULER"  # address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786
SERIAL = "serial"
CELL = "cell"  # the column naming each row's cell


Cell = Mapping[str, Any]
CellFn = Callable[[Cell, Mapping[str, Any]], pd.DataFrame]


def cell_id(cell: Cell) -> str:
    """A short stable name for a grid cell: the sha256 of its sorted JSON, 16 hex digits."""
    return hashlib.sha256(json.dumps(dict(cell), sort_keys=True).encode()).hexdigest()[:16]


def cell_folder(name: str, common: Mapping[str, Any], fn: CellFn) -> Path:
    """Where a sweep keeps its finished cells: results/sweeps/<name>/<digest of the settings every cell shares and
    of the code ``fn`` can execute (its module's closure in qkov_lib, ``codehash``)>, so cells are reused only by
    the same code with the same shared settings."""
    digest = hashlib.sha256((json.dumps(dict(common), sort_keys=True) + task_fingerprint(fn)).encode()).hexdigest()
    return results_root() / "sweeps" / name / digest[:16]


def _out_of_time(folder: Path, done: int, total: int) -> OutOfTime:
    return OutOfTime(
        f"the time budget ran out in the middle of the sweep: {done} of {total} cells are finished and "
        f"kept in {folder.parent.name}/{folder.name}; the next run continues from them"
    )


@dataclass
class SweepRun:
    """What a sweep did: its rows (every cell, in the grid's order), and how many cells ran or were reused."""

    rows: pd.DataFrame
    ran: int
    reused: int


def run_sweep(
    fn: CellFn,
    cells: Sequence[Cell],
    common: Mapping[str, Any],
    folder: Path,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool = True,
    desc: str = "sweep",
) -> SweepRun:
    """``fn(cell, common)`` for every cell not yet in ``folder`` (one CSV per cell), then every cell's rows.

    ``fn`` must be importable by the workers (a module-level function) and return a DataFrame; ``scheduler`` is
    ``"serial"``, a scheduler address, or None ($QKOV_DASK_SCHEDULER, else a LocalCluster of ``workers`` processes,
    default one per core)."""
    ids = [cell_id(c) for c in cells]
    if len(set(ids)) != len(ids):
        raise ValueError("the sweep's grid names a cell twice")
    if current_scope() is not None:  # in a chapter: every cell a stored run
        return _stored(fn, cells, common, scheduler or os.environ.get(SCHEDULER_ENV) or None, workers, progress, desc)
    folder.mkdir(parents=True, exist_ok=True)
    todo = [(i, c) for i, c in zip(ids, cells) if not (folder / f"{i}.csv").exists()]
    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    end = deadline()
    if todo and address == SERIAL:
        for n, (i, c) in enumerate(bar(todo, desc, enabled=progress)):
            if end is not None and time.time() > end:
                raise _out_of_time(folder, len(cells) - len(todo) + n, len(cells))
            _write(folder, i, fn(c, common))
    elif todo:
        _on_dask(fn, todo, common, folder, address, workers, progress, desc, end)
    rows = pd.concat([_read(folder, i) for i in ids], ignore_index=True)
    return SweepRun(rows, ran=len(todo), reused=len(cells) - len(todo))


def _stored(
    fn: CellFn,
    cells: Sequence[Cell],
    common: Mapping[str, Any],
    address: str | None,
    workers: int | None,
    progress: bool,
    desc: str,
) -> SweepRun:
    """``run_sweep`` inside a chapter: one stored run per cell (``store.Batch``, keyed by the cell, the settings
    every cell shares and the code ``fn`` can execute), the rest computed here one after another (``"serial"``) or
    on Dask, each stored as it finishes."""
    ids = [cell_id(c) for c in cells]
    batch = Batch([Piece(i, {"cell": dict(c), "common": dict(common)}) for i, c in zip(ids, cells)], [fn.__module__])
    todo = batch.missing
    execute = run_each if address == SERIAL else on_dask(address, progress, desc)
    tasks = [(cells[i], common) for i in todo]
    batch.compute(
        fn, tasks, 1 if address == SERIAL else workers or 0, lambda t, rows: {todo[t]: {"main": rows}}, execute
    )
    rows = [t["main"].assign(**{CELL: i}) for t, i in zip(batch.tables(), ids)]
    return SweepRun(pd.concat(rows, ignore_index=True), ran=len(todo), reused=len(cells) - len(todo))


def on_dask(address: str | None, progress: bool, desc: str) -> Executor:
    """An executor (``core.workers.run_each``'s signature) on Dask: every task submitted at once to the scheduler at
    ``address`` (None: a LocalCluster of ``workers`` processes, 0 meaning one per core), each handed to ``done`` as it
    finishes; once ``go_on()`` fails (the time budget), the rest are cancelled."""

    def execute(fn: Callable, tasks: Sequence[tuple], workers: int, done: Done, go_on: Callable[[], bool]) -> int:
        from dask.distributed import as_completed  # lazy: Dask takes a second to import; only sweeps on it need it

        end = deadline()
        with dask_client(address, workers or None) as client:
            futures = {
                client.submit(timed, fn, *task, key=f"{desc}-{k}", pure=False): k for k, task in enumerate(tasks)
            }
            ran = 0
            try:
                waiting = as_completed(futures, timeout=None if end is None else max(end - time.time(), 0.0))
                for future in bar(waiting, desc, enabled=progress, total=len(futures)):
                    done(futures[future], *future.result())
                    ran += 1
                    if not go_on():
                        break
            except TimeoutError:  # as_completed's, when the deadline passes before every cell is finished
                pass
            finally:
                client.cancel(list(futures))
            return ran

    return execute


def _write(folder: Path, name: str, rows: pd.DataFrame) -> None:
    write_atomic(folder / f"{name}.csv", rows.assign(**{CELL: name}).to_csv(index=False))


def _read(folder: Path, name: str) -> pd.DataFrame:
    path = folder / f"{name}.csv"
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise ValueError(
            f"the sweep's cell file {path.name} cannot be read ({err}); delete it and rerun to recompute that cell"
        ) from None


def _on_dask(
    fn: CellFn,
    todo: list[tuple[str, Cell]],
    common: Mapping[str, Any],
    folder: Path,
    address: str | None,
    workers: int | None,
    progress: bool,
    desc: str,
    end: float | None,
) -> None:
    from dask.distributed import as_completed  # lazy: Dask takes a second to import; only sweeps on it need it

    with dask_client(address, workers) as client:
        futures = {client.submit(fn, c, common, key=f"{desc}-{i}", pure=False): i for i, c in todo}
        written = 0
        try:
            waiting = as_completed(futures, timeout=None if end is None else max(end - time.time(), 0.0))
            for future in bar(waiting, desc, enabled=progress, total=len(futures)):
                _write(folder, futures[future], future.result())
                written += 1
        except TimeoutError:  # as_completed's, when the deadline passes before every cell is finished
            client.cancel(list(futures))
            total = len(list(folder.glob("*.csv")))
            raise _out_of_time(folder, total, total + len(futures) - written) from None
        except BaseException:
            client.cancel(list(futures))
            raise


def same_arithmetic(workers: Mapping[str, dict[str, str]]) -> None:
    """Every worker computes with this process's portable arithmetic settings, or one clear error (a worker started
    outside this environment would give other bits for the same cell)."""
    ours = portable.settings()
    other = sorted(w for w, theirs in workers.items() if theirs != ours)
    if other:
        raise ValueError(
            f"Dask workers {', '.join(other)} compute with other arithmetic settings than this process "
            f"({ours or 'the portable mode off'}); start them with the same {portable.ENV} (and the "
            f"same environment), or they give other numbers for the same cell"
        )


@contextmanager
def dask_client(address: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A Dask client: connected to ``address``, or to an embedded LocalCluster of ``workers`` single-threaded
    worker processes (default: one per core), closed on exit."""
    from dask.distributed import Client, LocalCluster  # lazy: as above

    if address:
        with Client(address) as client:
            same_arithmetic(client.run(portable.settings))
            yield client
        return
    n = workers or os.cpu_count() or 1
    with (
        LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client
