"""The runner's progress while a chapter computes stored runs: the kernel's computations write events to a file
(``core.progress.runs_event``), and a thread of the runner turns them into lines on stdout, "run k of n" with the time
elapsed and an estimate of the time left, as each run finishes and at least every ``LOG_INTERVAL`` seconds between.
Plain lines, no carriage return: the same in a terminal, a pipe and a CI log."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..core.progress import LOG_INTERVAL, RUNS_ENV
from ..core.results import sha256_file


def minutes(seconds: float) -> str:
    """A duration in words: '45 s', '12 min', '2.5 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


@dataclass
class Computation:
    """One stored computation of the chapter as its events tell it: its name, runs, workers, the estimate of its CPU
    time from the stored compute times of its runs (None: none stored), and each run done with its seconds."""

    chapter: str
    runs: int
    workers: int
    estimate_s: float | None
    started: float
    done: list[tuple[str, float]] = field(default_factory=list)

    def left(self) -> float | None:
        """Seconds left: the runs still to do at the mean time of those done (before any: the stored estimate's
        share), spread over the workers; None when nothing tells."""
        todo = self.runs - len(self.done)
        if self.done:
            per_run = sum(s for _, s in self.done) / len(self.done)
        elif self.estimate_s is not None:
            per_run = self.estimate_s / max(self.runs, 1)
        else:
            return None
        return per_run * todo / max(self.workers, 1)

    def line(self, now: float, last: str = "") -> str:
        """'sva (official): run 3 of 10 done (baseline-seed2, 612 s); 21 min elapsed, about 49 min left'."""
        left = self.left()
        guess = f", about {minutes(left)} left" if left is not None else ""
        what = (
            f"run {len(self.done)} of {self.runs} done ({last})"
            if last
            else f"{len(self.done)} of {self.runs} runs done"
        )
        return f"{self.chapter}: {what}; {minutes(now - self.started)} elapsed{guess}"


class Watch:
    """Reads a chapter's event file and prints its progress lines to ``out`` (``Computation``)."""

    def __init__(self, path: Path, profile: str, out: TextIO | None = None):
        self.path, self.profile, self.out = path, profile, out or sys.stdout
        self.offset, self.said = 0, time.time()
        self.current: Computation | None = None

    def _say(self, text: str) -> None:
        print(f"  {text}", file=self.out, flush=True)
        self.said = time.time()

    def _event(self, e: dict[str, Any]) -> None:
        if e.get("event") == "start":
            self.current = Computation(
                f"{e['chapter']} ({self.profile})", int(e["runs"]), int(e["workers"]), e.get("estimate_s"), e["time"]
            )
            est = e.get("estimate_s")
            cost = f", about {minutes(est)} of CPU time by their stored compute times" if est else ""
            self._say(f"{self.current.chapter}: computing {e['runs']} runs on {e['workers']} worker(s){cost}")
        elif e.get("event") == "note":  # a line the computation says (a stored run replaced under --force)
            self._say(str(e.get("text", "")))
        elif e.get("event") == "done" and self.current is not None:
            self.current.done.append((str(e["run"]), float(e["seconds"])))
            self._say(self.current.line(e["time"], f"{e['run']}, {minutes(float(e['seconds']))}"))

    def poll(self) -> None:
        """Print what the file holds that is new; a line of where the computation stands when nothing was said for
        ``LOG_INTERVAL`` seconds."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            chunk = ""
        whole = chunk[: chunk.rfind("\n") + 1]  # a line being written waits for its end
        self.offset += len(whole.encode("utf-8"))
        for raw in whole.splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self._event(json.loads(raw))
        now = time.time()
        if self.current is not None and len(self.current.done) < self.current.runs and now - self.said >= LOG_INTERVAL:
            self._say(self.current.line(now))


@contextlib.contextmanager
def watching(profile: str, every: float = 2.0) -> Iterator[None]:
    """Inside the block, a chapter's kernel writes its computations' events to a file of its own (``RUNS_ENV``), and
    a thread prints them (``Watch``) every ``every`` seconds; the file is removed after."""
    fd, name = tempfile.mkstemp(prefix="qkov-runs-", suffix=".jsonl")
    os.close(fd)
    watch, stop = Watch(Path(name), profile), threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            watch.poll()

    before = os.environ.get(RUNS_ENV)
    os.environ[RUNS_ENV] = name
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        watch.poll()
        if before is None:
            os.environ.pop(RUNS_ENV, None)
        else:
            os.environ[RUNS_ENV] = before
        Path(name).unlink(missing_ok=True)


def snapshot(root: Path) -> dict[str, str]:
    """Every file of the committed store (relative path -> sha256), to name what a build changed (``changed``)."""
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def changed(before: dict[str, str], after: dict[str, str]) -> str:
    """The build's last line about the committed store: how many of its files it wrote, removed or added, by folder
    (files the repository tracks: ``git status`` lists them), or that it changed none."""
    names = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    if not names:
        return "the committed store (data/store): no file changed"
    folders: dict[str, int] = {}
    for n in names:
        folder = n.rsplit("/", 1)[0]
        folders[folder] = folders.get(folder, 0) + 1
    listed = ", ".join(f"{f} ({k})" for f, k in sorted(folders.items()))
    return f"the committed store (data/store): {len(names)} file(s) written or removed, in {listed}: commit them"
