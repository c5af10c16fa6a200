"""How a chapter's stored computation runs when it is not there to compute: planned, or rechecked.

``plan`` (``results status``): the chapter runs as far as its first stored computation, which names its runs and
their states and stops (``Planned``), computing nothing. ``recheck`` (``results verify``): the chapter runs as far as
the computation that holds the chosen runs; those are computed afresh from today's code, compared with the stored
ones file by file (the sha256 the seal records), and the chapter stops (``Rechecked``); nothing is written. A run
stored apart (``core.chapter.apart``), or in a computation after the first, is reached only where every run before it
is current."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..core import files, results
from ..core.chapter import Scope, scoped
from . import store_columns


class Planned(Exception):
    """Raised by a batch while planning (``plan``): the chapter's stored runs and their states, nothing computed."""

    def __init__(self, states: list[Any]):
        super().__init__(f"{len(states)} stored runs planned")
        self.states = states


class Rechecked(Exception):
    """Raised by a batch once it has recomputed the runs a ``Recheck`` chose: the chapter goes no further."""


class RecheckError(Exception):
    """A run to recheck cannot be reached: a run before it is not current, or it is not a stored run."""


PLANNING: list[bool] = []  # non-empty while ``plan`` runs a chapter


@dataclass
class Recheck:
    """The runs of one chapter to compute afresh (their names), and each one's outcome once computed: '' where every
    file it writes has the stored run's bytes, else what differs."""

    names: frozenset[str]
    outcomes: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def take(self, names: list[str], found: dict[int, Any]) -> bool:
        """At a batch (its runs' ``names``; ``found``: index -> tables of the runs the store holds under today's
        key): the chosen runs become missing, to compute; whether this batch holds any. RecheckError where a chosen
        run is not current, or (before the chosen runs are reached) any run is not."""
        chosen = {i for i, name in enumerate(names) if name in self.names}
        behind = [names[i] for i in range(len(names)) if i not in found]
        if behind:
            raise RecheckError(
                f"{', '.join(behind[:3])}{' ...' if len(behind) > 3 else ''} not current (results status says why): "
                "only current runs are rechecked, and only past current ones"
            )
        for i in chosen:
            del found[i]
        return bool(chosen)

    def compare(self, folder: Path, name: str, tables: Mapping[str, pd.DataFrame], seconds: float) -> None:
        """Set a recomputed run's files beside the stored run ``folder/name``: each table's sha256, and its constant
        columns (``store_columns.factor``), as the seal records them."""
        try:
            stored = files.check(folder, name)
        except results.ResultsError as err:
            self.outcomes[name] = f"no committed run to compare with ({err})"
            return
        kept, constants = store_columns.factor(tables)
        with tempfile.TemporaryDirectory() as tmp:
            written = results.save(Path(tmp), name, kept, {})
            now = {p.name: results.sha256_file(p) for p in written if p.suffix == ".csv"}
        was = dict(stored.get("files") or {})
        differ = sorted(n for n in was.keys() | now.keys() if was.get(n) != now.get(n))
        same_constants = json.loads(json.dumps(constants, default=str)) == (stored.get(store_columns.META_KEY) or {})
        self.outcomes[name] = "; ".join(
            [*([f"files differ: {', '.join(differ)}"] if differ else []), *([] if same_constants else ["columns"])]
        )
        self.seconds[name] = seconds


RECHECKING: list[Recheck] = []  # the recheck of the chapter ``recheck`` runs, if any


def plan(run: Callable[[], Any], scope: Scope) -> list[Any] | None:
    """The stored runs of the chapter whose ``run`` is given, and what the store holds of each (``store.RunState``),
    computing nothing; None when it computes without stored runs."""
    PLANNING.append(True)
    try:
        with scoped(scope):
            run()
    except Planned as planned:
        return planned.states
    finally:
        PLANNING.pop()
    return None


def recheck(run: Callable[[], Any], scope: Scope, names: frozenset[str]) -> Recheck:
    """Run the chapter (``run``) until the computation holding ``names`` has recomputed them (``Recheck``), writing
    nothing; RecheckError where they are not reached."""
    check = Recheck(names)
    RECHECKING.append(check)
    try:
        with scoped(scope):
            run()
    except Rechecked:
        return check
    finally:
        RECHECKING.pop()
    raise RecheckError(f"the chapter {scope.chapter} finished without reaching {', '.join(sorted(names))}")
