"""How a chapter's stored computation runs when it is not there to compute: planned, or rechecked; and when every
run is computed afresh (``forcing``).

``plan`` (``results status``): the chapter runs through its stored computations while the store holds every run of
them, and stops at the first that it does not (``Planned``), computing nothing; each names its runs and their states.
``recheck`` (``results verify``, ``results rekey --recompute``): the chapter runs as far as the computation that holds
the chosen runs; those are computed afresh from today's code, compared with the stored ones file by file (the sha256
the seal records), and the chapter stops (``Rechecked``); nothing is written. A computation after the first (a run
stored apart, ``core.chapter.apart``) is reached only where every run before it is current.

``forcing`` (``reproduce --force``: ``OFF_ENV`` set to ``recompute``): every run is computed afresh, and stored only
where the store holds none under its key or the stored one's files differ from it (``differences``); a run that
computes the same bytes stays as it was stored, its commit and date with it. ``OFF_ENV`` set to ``off`` computes
every run afresh and reads and writes none (a check of the store)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import pandas as pd

from ..core import files, results
from ..core.chapter import Scope, scoped
from . import store_columns


@dataclass(frozen=True)
class RunState:
    """What the store holds of one run: ``current``, ``stale`` (``why``: the parts of its key that changed),
    ``damaged`` (``why``: what is wrong with its files) or ``missing``; the commit it was computed at and its compute
    time, where stored; the store folder it lies in (its chapter's, or a part's stored apart)."""

    name: str
    state: str
    why: tuple[str, ...] = ()
    commit: str | None = None
    compute_s: float | None = None
    folder: str = ""


class Planned(Exception):
    """Raised by a batch while planning (``plan``): the chapter's stored runs so far and their states."""

    def __init__(self, states: list[RunState]):
        super().__init__(f"{len(states)} stored runs planned")
        self.states = states


class Rechecked(Exception):
    """Raised by a batch once it has recomputed the runs a ``Recheck`` chose: the chapter goes no further."""


class RecheckError(Exception):
    """A run to recheck cannot be reached: a run before it is not current, or it is not a stored run."""


T = TypeVar("T")


class Deferred(Generic[T]):
    """A task's argument made only where a task runs (``store.Batch.compute``), once: a chapter's data, which a page
    made from stored runs never reads (its identity in the keys is its files' sha256)."""

    def __init__(self, make: Callable[[], T]):
        self._make, self._made = make, cast(list[T], [])

    def value(self) -> T:
        if not self._made:
            self._made.append(self._make())
        return self._made[0]


def made(task: tuple) -> tuple:
    """A task's arguments with each ``Deferred`` made."""
    return tuple(a.value() if isinstance(a, Deferred) else a for a in task)


OFF_ENV = "QKOV_STORE"  # "off": no stored run read or written; "recompute": every run computed afresh (``forcing``)
RECOMPUTE = "recompute"
PLANNING: list[list[RunState]] = []  # while ``plan`` runs a chapter: the states of its computations so far


@dataclass
class Recheck:
    """The runs of one store folder to compute afresh (their names), and each one's outcome once computed: '' where
    every file it writes has the stored run's bytes, else what differs. ``stale``: the chosen runs may be stale (a
    re-key after a change that should compute the same), and then each run of their computation's new key and values
    are kept (``keys``)."""

    folder: str
    names: frozenset[str]
    stale: bool = False
    outcomes: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    keys: dict[str, tuple[Any, dict[str, Any]]] = field(default_factory=dict)  # name -> (its Key now, its values)

    def take(self, folder: str, pieces: Sequence[Any], keys: Sequence[Any], found: dict[int, Any]) -> bool:
        """At a batch (its store ``folder``, ``pieces`` and their ``keys``; ``found``: index -> tables of the runs
        the store holds under today's key): the chosen runs become missing, to compute, and with ``stale`` the
        batch's other runs count as found (the chapter stops after the chosen ones); whether it holds any chosen.
        RecheckError where a run of another folder before them, or (without ``stale``) a chosen run, is not
        current."""
        names = [p.name for p in pieces]
        chosen = {i for i, name in enumerate(names) if name in self.names} if folder == self.folder else set()
        behind = [names[i] for i in range(len(names)) if i not in found and not (chosen and self.stale)]
        if behind:
            raise RecheckError(
                f"{folder}: {', '.join(behind[:3])}{' ...' if len(behind) > 3 else ''} not current (results status "
                "says why): only current runs are rechecked, and only past current ones"
            )
        if chosen and self.stale:
            self.keys = {p.name: (k, dict(p.values)) for p, k in zip(pieces, keys)}
            found.update({i: {} for i in range(len(names)) if i not in found and i not in chosen})
        for i in chosen:
            found.pop(i, None)
        return bool(chosen)

    def compare(self, folder: Path, name: str, tables: Mapping[str, pd.DataFrame], seconds: float) -> None:
        """Set a recomputed run's outcome beside the stored run ``folder/name`` (``differences``)."""
        why = differences(folder, name, tables)
        self.outcomes[name] = "no committed run to compare with" if why is None else why
        self.seconds[name] = seconds


def differences(folder: Path, name: str, tables: Mapping[str, pd.DataFrame]) -> str | None:
    """What differs between a computed run and the stored run ``folder/name``: each table's sha256, and its constant
    columns (``store_columns.factor``), as the seal records them; '' where none, None where no sound run is stored."""
    try:
        stored = files.check(folder, name)
    except results.ResultsError:
        return None
    kept, constants = store_columns.factor(tables)
    with tempfile.TemporaryDirectory() as tmp:
        written = results.save(Path(tmp), name, kept, {})
        now = {p.name: results.sha256_file(p) for p in written if p.suffix == ".csv"}
    was = dict(stored.get("files") or {})
    differ = sorted(n for n in was.keys() | now.keys() if was.get(n) != now.get(n))
    same_constants = json.loads(json.dumps(constants, default=str)) == (stored.get(store_columns.META_KEY) or {})
    return "; ".join(
        [*([f"files differ: {', '.join(differ)}"] if differ else []), *([] if same_constants else ["columns"])]
    )


def forcing() -> bool:
    """Whether every run is computed afresh though the store holds it (``reproduce --force``), outside a plan or a
    recheck."""
    return os.environ.get(OFF_ENV, "").lower() == RECOMPUTE and not (PLANNING or RECHECKING)


RECHECKING: list[Recheck] = []  # the recheck of the chapter ``recheck`` runs, if any


def plan(run: Callable[[], Any], scope: Scope) -> list[RunState] | None:
    """The stored runs of the chapter whose ``run`` is given, and what the store holds of each, computing nothing:
    those of each computation up to the first the store does not hold whole; None when it has none."""
    PLANNING.append([])
    try:
        with scoped(scope):
            run()
    except Planned as planned:
        return planned.states
    finally:
        states = PLANNING.pop()
    return states or None


def recheck(
    run: Callable[[], Any], scope: Scope, names: frozenset[str], folder: str = "", stale: bool = False
) -> Recheck:
    """Run the chapter (``run``) until the computation holding ``names`` (in the store ``folder``: default, the
    chapter's own) has recomputed them (``Recheck``), writing nothing; RecheckError where they are not reached."""
    check = Recheck(folder or scope.chapter, names, stale)
    RECHECKING.append(check)
    try:
        with scoped(scope):
            run()
    except Rechecked:
        return check
    finally:
        RECHECKING.pop()
    raise RecheckError(f"the chapter {scope.chapter} finished without reaching {', '.join(sorted(names))}")
