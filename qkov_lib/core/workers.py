"""Independent tasks side by side: a pool of worker processes, each on one torch thread, so that a task's numbers do
not depend on the machine's core count or on how many workers there are."""
from __future__ import annotations

import contextlib
import multiprocessing
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor

import psutil
import torch


def _worker_init() -> None:
    """One torch thread; Ctrl-C is the parent's to handle (it shuts the pool down), so workers ignore it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one CPU thread inside the block. A sum split over threads is added in another order, so the number
    of threads changes the last bits, and training turns those into visible differences."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_independent(fn: Callable, tasks: Sequence[tuple], workers: int) -> list:
    """``[fn(*task) for task in tasks]``, in a pool of ``workers`` processes (spawned) when there are several tasks
    and workers; results keep the tasks' order. Every task runs on one torch thread, in a worker or here, so its
    numbers do not depend on the machine's core count or on ``workers``. ``fn`` must be importable, and a script
    that ends up here needs the usual ``if __name__ == "__main__":`` guard (or QKOV_WORKERS=1)."""
    if workers <= 1 or len(tasks) <= 1:
        with one_thread():
            return [fn(*task) for task in tasks]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=context, initializer=_worker_init) as pool:
        futures = [pool.submit(fn, *task) for task in tasks]
        return [f.result() for f in futures]


def end_descendants() -> int:
    """Kill every process this one started, and every process they started (a chapter's kernel, its worker pools, a
    Dask cluster), at once: stopped first, so that none starts another while the rest are killed. The number ended."""
    found: dict[int, psutil.Process] = {}
    for _ in range(2):  # a second look finds what was started while the first ones were being stopped
        for proc in psutil.Process().children(recursive=True):
            if proc.pid not in found:
                found[proc.pid] = proc
                with contextlib.suppress(psutil.Error):
                    proc.suspend()
    for proc in found.values():
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(list(found.values()), timeout=5)
    return len(found)
