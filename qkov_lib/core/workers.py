"""Independent tasks side by side: a pool of worker processes, each on one torch thread, so that a task's numbers do
not depend on the machine's core count or on how many workers there are."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

import psutil
import torch

RUN_ENV = "QKOV_RUN"  # "<pid>:<start time>" of the runner whose chapter a process serves (kernels, their workers)
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends


def _worker_init() -> None:
    """One torch thread; Ctrl-C is the parent's to handle (it shuts the pool down), so workers ignore it; and the
    worker dies with its parent, however the parent ends (``die_with_parent``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    torch.set_num_threads(1)


def die_with_parent() -> None:
    """Ask the kernel to kill this process when its parent ends, even by SIGKILL (Linux's PR_SET_PDEATHSIG), so that
    a killed kernel leaves no worker behind; elsewhere nothing (the next run's ``end_leftovers`` finds them)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the next run's check is what is left
        return
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(1)


def run_marker() -> str:
    """This process's mark for the processes it starts (``RUN_ENV``): its pid and start time, which no later process
    shares."""
    return f"{os.getpid()}:{psutil.Process().create_time():.3f}"


def _alive(marker: str) -> bool:
    pid, _, started = marker.partition(":")
    try:
        return f"{psutil.Process(int(pid)).create_time():.3f}" == started
    except (ValueError, psutil.Error):
        return False


def leftovers() -> list[psutil.Process]:
    """Processes left by a runner that was killed: marked with ``RUN_ENV`` by a runner no longer alive."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            marker = proc.environ().get(RUN_ENV)
            if marker and proc.pid != os.getpid() and not _alive(marker):
                found.append(proc)
    return found


def end_leftovers() -> list[str]:
    """End the processes a killed run left behind (``leftovers``); each named (pid, command, memory)."""
    named = []
    procs = leftovers()
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            named.append(
                f"pid {proc.pid} ({' '.join(proc.cmdline()[:3]) or proc.name()}, {proc.memory_info().rss / 1e6:.0f} MB)"
            )
            proc.kill()
    psutil.wait_procs(procs, timeout=5)
    return named


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


def timed(fn: Callable, *args: Any) -> tuple[Any, float]:
    """``fn(*args)`` and the seconds it took."""
    start = time.perf_counter()
    return fn(*args), time.perf_counter() - start


def run_each(
    fn: Callable,
    tasks: Sequence[tuple],
    workers: int,
    done: Callable[[int, Any, float], None],
    go_on: Callable[[], bool],
) -> int:
    """``done(i, fn(*tasks[i]), seconds it took)`` for each task as it finishes, in a pool of ``workers`` spawned
    processes (here when one worker or one task), each on one torch thread as in ``run_independent``. A task is
    started only while ``go_on()`` holds, so a time budget stops the run between tasks: the tasks running then
    finish and are handed to ``done``. Returns how many tasks ran."""
    if workers <= 1 or len(tasks) <= 1:
        with one_thread():
            for i, task in enumerate(tasks):
                if not go_on():
                    return i
                done(i, *timed(fn, *task))
        return len(tasks)
    context = multiprocessing.get_context("spawn")
    ran = 0
    with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=context, initializer=_worker_init) as pool:
        waiting = list(enumerate(tasks))
        running: dict[Future, int] = {}
        try:
            while running or (waiting and go_on()):
                while waiting and len(running) < workers and go_on():
                    i, task = waiting.pop(0)
                    running[pool.submit(timed, fn, *task)] = i
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    done(running.pop(future), *future.result())
                    ran += 1
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return ran


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
