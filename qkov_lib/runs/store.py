"""The results store: a chapter's expensive computation kept in small stored runs (one per seed and condition, per
panel and seed), each keyed by exactly what it depends on, so that a page is re-made from them in seconds and a
change recomputes only the runs it touches.

A stored run's key has five parts: ``setup`` (the setup values that reach the computation: the page's own fields,
``PAGE_FIELDS``, are left out), ``code`` (the library modules the computation can execute and those its datasets are
read through, docstrings aside; the versions of the numerical libraries and of the datasets' tokenisers and taggers;
not the page's code, ``present/``, nor the verdict rules), ``data`` (the identity of the datasets it reads),
``arithmetic`` (the portable mode's settings) and ``engine`` (the device, and the synthetic engine where the code
reaches it). Its tables are plain CSV beside a sealed JSON
(``core.results.save``): the key, the values, the code's module digests, the commit it was computed at, its compute
time.

Where: the ``default`` and ``official`` runs of the book's runner (no overrides) go to the committed store,
``data/store/<profile>/<chapter>/`` (one ``manifest.json`` per folder lists every file's sha256); every other run
(``smoke``, overrides, JupyterLab, papermill) to ``<results>/store/`` beside the git-ignored results, one file set
per key. Reading tries the committed store first. Computed runs are read back from their files, so a page made from
the store and one made from a fresh computation see the same bytes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..core import codehash, files, paths, portable, progress, results
from ..core.budget import OutOfTime, deadline
from ..core.chapter import Scope, as_dict, current_scope
from ..core.device import engine_backend
from ..core.workers import run_each
from ..data.loaders import ENGINES, loader
from ..data.registry import data_identity, not_found
from . import store_columns, store_modes
from .store_columns import interleave, round_trip  # noqa: F401 (the chapters' runs import them from here)
from .store_modes import OFF_ENV, PLANNING, RECHECKING, Planned, Rechecked, RunState
from .store_verify import check_writable, computed_at, damage, manifested, refuse_links, write_manifest

STORED_PROFILES = ("default", "official")  # the profiles whose runs are committed
ROOT_ENV = "QKOV_STORE_ROOT"  # moves the committed store (tests)
WRITE_ENV = "QKOV_STORE_WRITE"  # "1": the runner's run of a stored profile, whose runs go to the committed store
KEY_PARTS = ("setup", "code", "data", "arithmetic", "engine")
# where and how a run is computed changes none of its numbers: these modules are no part of its code's key
ORCHESTRATION = (
    "qkov_lib.runs.store",
    "qkov_lib.runs.store_columns",
    "qkov_lib.runs.store_modes",
    "qkov_lib.runs.sweep",
    "qkov_lib.core.workers",
    "qkov_lib.core.progress",
)
# what the page shows and decides: a computation may sit in a module that imports them (a chapter's), but never
# calls them, so they are no part of its key either (tests/unit/runs/test_store.py keeps the runs' own modules free
# of them)
PAGE = ("qkov_lib.present", "qkov_lib.metrics.verdicts", "qkov_lib.metrics.official", "qkov_lib.chapters.atlas.pages")
Tables = dict[str, pd.DataFrame]


def committed_root() -> Path:
    """The committed store: data/store, or $QKOV_STORE_ROOT."""
    return Path(os.environ.get(ROOT_ENV) or paths.STORE_ROOT)


def scratch_root() -> Path:
    """Where runs that are not committed are kept: beside the git-ignored results."""
    return results.results_root() / "store"


def sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def setup_values(setup: Any, drop: Sequence[str] = ()) -> dict[str, Any]:
    """The setup values that reach a computation: every parameter but the page's own (the setup's ``PAGE_FIELDS``)
    and ``drop`` (what a run's name carries instead, as its seed)."""
    left_out = set(getattr(setup, "PAGE_FIELDS", ())) | set(drop)
    return {k: v for k, v in as_dict(setup).items() if k not in left_out}


def slug(text: str) -> str:
    """``text`` as a stored run's name: letters, digits, ``-`` and ``_`` (``"collapsed + bias-0"`` ->
    ``"collapsed-bias-0"``)."""
    return re.sub(r"[^A-Za-z0-9_]+", "-", text).strip("-")


@dataclass(frozen=True)
class Piece:
    """One stored run: its name within the chapter (letters, digits, ``-`` and ``_``: its files' stem) and the setup
    values that reach it (JSON)."""

    name: str
    values: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not self.name or slug(self.name) != self.name:
            raise ValueError(f"a stored run's name must be letters, digits, - and _ (got {self.name!r})")


@dataclass(frozen=True)
class Key:
    """A stored run's key, part by part (``KEY_PARTS``), with the code's module digests and what the engine is."""

    parts: dict[str, str]
    code: codehash.CodeState
    computed_by: dict[str, str]

    @property
    def digest(self) -> str:
        return sha(self.parts)


def computed_by(code: codehash.CodeState, device: torch.device) -> dict[str, str]:
    """What computes a run's numbers beyond its code and the arithmetic mode: the device, and the engine that trains
    synthetic stacks where the code reaches it (the engines agree closely, not to the bit)."""
    out = {"device": device.type}
    if "qkov_lib.train.backends" in code.modules:
        out["synthetic_engine"] = engine_backend(device)
    return out


def make_key(piece: Piece, code: codehash.CodeState, datasets: Sequence[str], device: torch.device) -> Key:
    by = computed_by(code, device)
    parts = {
        "setup": sha(piece.values),
        "code": code.digest,
        "data": sha({name: data_identity(name) for name in datasets}),
        "arithmetic": sha(portable.settings()),
        "engine": sha(by),
    }
    return Key(parts, code, by)


def code_of(modules: Sequence[str], datasets: Sequence[str] = ()) -> codehash.CodeState:
    """The code a run can execute: the closure of ``modules`` and of the loaders of the ``datasets`` it reads
    (``registry.loader``: how their files become tokens), less the orchestration (``ORCHESTRATION``) and the page's
    modules (``PAGE``); with the versions of the numerical libraries and of what makes the datasets' tokens
    (``registry.ENGINES``: the tokeniser's model, the tagger)."""
    state = codehash.code_state([*modules, *map(loader, datasets)], exclude=excluded())
    engines = codehash.library_versions([p for d in datasets for p in ENGINES.get(d, ())])
    return codehash.CodeState(state.modules, state.versions | engines)


def excluded() -> set[str]:
    """The package's modules that are no part of a stored run's key: ``ORCHESTRATION``, and ``PAGE`` with what lies
    inside them."""
    names = {
        ".".join(("qkov_lib", *p.relative_to(paths.PACKAGE_DIR).with_suffix("").parts)).removesuffix(".__init__")
        for p in paths.PACKAGE_DIR.rglob("*.py")
    }
    return set(ORCHESTRATION) | {n for n in names if any(n == p or n.startswith(p + ".") for p in PAGE)}


_COMPUTING: list[bool] = []  # non-empty while a batch computes its runs here (a sweep's cell, serially)


def _folder(root: Path, scope: Scope) -> Path:
    """A chapter's folder of the store at ``root``; StoreError when it, or a folder above it in the store, is a link."""
    folder = root / scope.profile / scope.chapter
    refuse_links(root, folder)
    return folder


def _target(scope: Scope) -> tuple[Path, bool]:
    """Where the runs of ``scope`` computed here go, and whether that is the committed store (``commits``)."""
    committed = commits(scope)
    return _folder(committed_root() if committed else scratch_root(), scope), committed


def _stem(piece: Piece, key: Key, committed: bool) -> str:
    """A run's file stem: its name in the committed store (one run per name), its name and key elsewhere."""
    return piece.name if committed else f"{piece.name}-{key.digest[:12]}"


def _read(folder: Path, stem: str, committed: bool = False) -> tuple[Tables, dict[str, Any]] | None:
    """A stored run's tables and metadata after checking its seal and files (and, in the committed store, that
    its folder's manifest names it: a file no manifest names is never read); None when absent or damaged."""
    if committed and not manifested(folder, stem):
        return None
    try:
        tables, meta = files.load(folder, stem)
        return store_columns.restore(tables, meta), meta
    except (results.ResultsError, OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def changed_parts(meta: Mapping[str, Any], key: Key, values: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The parts of ``key`` a stored run's metadata differs in; the code's with the modules that changed, the
    setup's with the parameters whose values differ from ``values`` (the run's setup values now)."""
    old: dict[str, Any] = meta["key"] if isinstance(meta.get("key"), dict) else {}
    out = []
    for part in KEY_PARTS:
        if old.get(part) != key.parts[part]:
            named = []
            if part == "code":
                named = codehash.what_changed(meta.get("code") or {}, key.code)
            elif part == "setup" and values is not None and isinstance(meta.get("values"), dict):
                was = meta["values"]
                moved = sorted(k for k in was.keys() | values.keys() if sha(was.get(k)) != sha(values.get(k)))
                named = [f"{k}: {_shown(was.get(k))} -> {_shown(values.get(k))}" for k in moved]
            out.append(f"{part} ({', '.join(named)})" if named else part)
    return tuple(out)


def _shown(value: Any) -> str:
    """A setup value as ``results status`` names it (JSON, at most 40 characters)."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _but_data(stored: Any, parts: Mapping[str, str]) -> bool:
    return isinstance(stored, dict) and all(stored.get(p) == parts[p] for p in KEY_PARTS if p != "data")


@dataclass(frozen=True)
class Found:
    """A stored run found under its key: its tables, its metadata, and whether it lies in the committed store."""

    tables: Tables
    meta: dict[str, Any]
    committed: bool


def lookup(scope: Scope, piece: Piece, key: Key, unseen: bool = False) -> tuple[Found | None, RunState]:
    """A run where the store holds it under ``key`` (the committed store first), and its state. ``unseen``: a
    dataset the run reads is not on this machine, so a committed run whose key differs in its data part alone is
    read as it was stored (its data cannot be checked here, and nothing can be computed without it)."""
    stale: RunState | None = None
    for root, committed in ((committed_root(), True), (scratch_root(), False)):
        folder, stem = _folder(root, scope), _stem(piece, key, committed)
        found = _read(folder, stem, committed)
        if found is None:
            if committed and (why := damage(folder, stem)):
                stale = RunState(piece.name, "damaged", (why,))
            continue
        tables, meta = found
        state = RunState(piece.name, "current", (), meta.get("git_commit"), meta.get("compute_s"))
        if meta.get("key") == key.parts or (committed and unseen and _but_data(meta.get("key"), key.parts)):
            return Found(tables, meta, committed), state
        if committed:
            stale = RunState(piece.name, "stale", changed_parts(meta, key, piece.values), state.commit, state.compute_s)
    return None, stale or RunState(piece.name, "missing")


def commits(scope: Scope) -> bool:
    """Whether this process's runs of ``scope`` go to the committed store: the runner's run of a stored profile,
    no overrides."""
    return bool(os.environ.get(WRITE_ENV)) and scope.as_profile and scope.profile in STORED_PROFILES


def write(
    scope: Scope, piece: Piece, key: Key, tables: Tables, compute_s: float, made: Mapping[str, Any] | None = None
) -> Tables:
    """Store a computed run (the committed store for the runner's run of a stored profile, else the scratch store)
    and return its tables as read back from the files. ``made``: where and when a run found in the scratch store was
    computed (its commit, date and compute time), kept as it is committed."""
    folder, committed = _target(scope)
    stem = _stem(piece, key, committed)
    before = _read(folder, stem)
    meta = {
        "run": piece.name,
        "chapter": scope.chapter,
        "profile": scope.profile,
        "key": key.parts,
        "values": dict(piece.values),
        "code": key.code.as_meta(),
        "computed_by": key.computed_by,
        "arithmetic": portable.effective(),
        "git_commit": computed_at(committed_root()),
        "date": time.strftime("%Y-%m-%d"),
        "compute_s": round(compute_s, 1),
        **{k: v for k, v in (made or {}).items() if k in ("git_commit", "date", "compute_s")},
    }
    kept, constants = store_columns.factor(tables)
    for path in results.save(folder, stem, kept, meta | ({store_columns.META_KEY: constants} if constants else {})):
        files.umask_mode(path)  # as any new file, not 0600: the store is shared through the repository
    if before is not None:  # files of the run's last version that this one no longer has
        for name in set(before[1].get("files", {})) - {results.table_path(folder, stem, t).name for t in tables}:
            files.plain_name(name, folder, folder / f"{stem}.json").unlink(missing_ok=True)
    if committed:
        write_manifest(folder)
    found = _read(folder, stem)
    if found is None:
        raise results.ResultsError(f"the stored run {folder / stem} did not read back whole; run it again")
    return found[0]


Split = Callable[[int, Any], Mapping[int, Tables]]  # (task index, its result) -> {piece index: its tables}
Done = Callable[[int, Any, float], None]  # (task index, its result, its seconds)
Executor = Callable[[Callable, Sequence[tuple], int, Done, Callable[[], bool]], int]  # ``core.workers.run_each``
CPU = torch.device("cpu")


@dataclass
class Batch:
    """A chapter's stored runs for one computation: which the store holds, and the rest computed as tasks, each
    stored as it finishes. Outside a chapter (a library function called directly) nothing is stored."""

    pieces: Sequence[Piece]
    modules: Sequence[str]  # the modules whose code the runs execute (their closure is the key's code)
    device: torch.device = CPU
    found: dict[int, Tables] = field(default_factory=dict)
    keys: list[Key] = field(default_factory=list)
    rechecks: bool = False  # whether it computes runs afresh to compare with the stored ones (``store_modes``)
    stored_s: dict[int, float | None] = field(default_factory=dict)  # each run's compute time, where stored

    def __post_init__(self) -> None:
        off = _COMPUTING or os.environ.get(OFF_ENV, "").lower() == "off"  # a run inside a stored run is part of it
        self.scope = None if off else current_scope()
        if len({p.name for p in self.pieces}) != len(self.pieces):
            raise ValueError("two stored runs of one computation share a name")
        if self.scope is None:
            return
        code = code_of(self.modules, self.scope.datasets)
        self.keys = [make_key(p, code, self.scope.datasets, self.device) for p in self.pieces]
        unseen = [d for d in self.scope.datasets if data_identity(d)["release"] is None]
        states, forced = [], store_modes.forcing()
        for i, (piece, key) in enumerate(zip(self.pieces, self.keys)):
            found, state = lookup(self.scope, piece, key, bool(unseen))
            states.append(replace(state, folder=self.scope.chapter))
            self.stored_s[i] = state.compute_s
            if found is None or forced:  # --force: computed afresh, and kept where it differs (``_keep``)
                continue
            self.found[i] = found.tables
            if not found.committed and commits(self.scope) and not (PLANNING or RECHECKING):  # committed now
                self.found[i] = write(self.scope, piece, key, found.tables, 0.0, found.meta)
            self.scope.used.append({"name": piece.name, "key": key.digest, "from_store": True, **_used(state)})
            if unseen:  # read as stored, under its stored key: the page says its data was not here to check it
                self.scope.used[-1] |= {"data_unseen": unseen, "key": sha(found.meta.get("key"))}
        if unseen and (self.missing or RECHECKING):  # what must be computed needs the data: said first
            raise not_found(unseen[0], f"the store does not hold this setup's runs of {self.scope.chapter}")
        if PLANNING:  # a computation all current is read, and the chapter goes on to its next
            PLANNING[-1].extend(states)
            if len(self.found) < len(self.pieces):
                raise Planned(PLANNING[-1])
        self.rechecks = bool(RECHECKING) and RECHECKING[-1].take(self.scope.chapter, self.pieces, self.keys, self.found)
        n, said = len(self.pieces), f"{self.scope.chapter} ({self.scope.profile}): {len(self.found)} of"
        if not (PLANNING or self.rechecks):  # the runner's line before a computation
            print(f"{said} {n} runs from the store, {n - len(self.found)} to compute", flush=True)

    @property
    def missing(self) -> list[int]:
        """The indices of the runs still to compute."""
        return [i for i in range(len(self.pieces)) if i not in self.found]

    def compute(
        self, fn: Callable, tasks: Sequence[tuple], workers: int, split: Split, execute: Executor = run_each
    ) -> None:
        """Run ``fn(*task)`` for each task (``execute``: ``core.workers.run_each``, or a sweep's Dask executor) and
        store the runs each covers as it finishes (``split``). Under the runner's time budget no task starts past the
        deadline: ``OutOfTime``, the finished runs kept for the next run (outside a chapter, where nothing is kept,
        and inside a stored run, the budget is its caller's to keep)."""
        end = deadline() if self.scope is not None else None
        if self.scope is not None and self.missing and not self.rechecks:  # a store that cannot take them: said now
            check_writable(*_target(self.scope))

        def done(t: int, result: Any, seconds: float) -> None:
            runs = split(t, result)
            for i, tables in runs.items():
                self._keep(i, tables, seconds / max(len(runs), 1))
                progress.runs_event(event="done", run=self.pieces[i].name, seconds=seconds / max(len(runs), 1))

        if self.scope is not None and tasks:  # the runner's progress lines (``runner.watch``)
            known = [s for i in self.missing if (s := self.stored_s.get(i)) is not None]
            estimate = sum(known) * len(self.missing) / len(known) if known else None
            progress.runs_event(
                event="start",
                chapter=self.scope.chapter,
                runs=len(self.missing),
                workers=min(workers, len(tasks)),
                estimate_s=estimate,
            )

        def go_on() -> bool:
            return end is None or time.time() < end

        _COMPUTING.append(True)
        try:  # a Deferred argument (a chapter's data) is made now, where a task runs
            ran = execute(fn, [store_modes.made(t) for t in tasks], workers, done, go_on) if tasks else 0
        finally:
            _COMPUTING.pop()
        if self.rechecks:
            raise Rechecked()
        if self.missing:
            raise OutOfTime(
                f"the time budget ran out with {len(self.missing)} of {len(self.pieces)} stored runs of "
                f"{self.scope.chapter if self.scope else 'this chapter'} to compute ({ran} computed now, kept); "
                f"the next run continues from them"
            )

    def _keep(self, i: int, tables: Tables, compute_s: float) -> None:
        if self.rechecks and self.scope is not None:  # compared with the stored run, never written
            RECHECKING[-1].compare(_folder(committed_root(), self.scope), self.pieces[i].name, tables, compute_s)
            return
        if self.scope is None:
            self.found[i] = round_trip(tables)
            return
        folder, committed = _target(self.scope)
        stem, commit = _stem(self.pieces[i], self.keys[i], committed), computed_at(committed_root())
        stored = _read(folder, stem, committed) if store_modes.forcing() else None
        stored = stored if stored and stored[1].get("key") == self.keys[i].parts else None  # a stale one: replaced
        why = store_modes.differences(folder, stem, tables) if stored else None
        if why == "" and stored:  # --force computed the stored bytes: the run is left as stored, commit and all
            self.found[i], commit = stored[0], stored[1].get("git_commit")
        else:
            self.found[i] = write(self.scope, self.pieces[i], self.keys[i], tables, compute_s)
        if why:  # said here, and by the runner (``runner.watch``)
            said = f"{self.scope.chapter}: {self.pieces[i].name} replaced, its stored run differed ({why})"
            print(said, flush=True)
            progress.runs_event(event="note", text=said)
        self.scope.used.append(
            {
                "name": self.pieces[i].name,
                "key": self.keys[i].digest,
                "from_store": False,
                "commit": commit,
                "compute_s": compute_s,
            }
        )

    def tables(self) -> list[Tables]:
        """Every run's tables, in the pieces' order."""
        if self.missing:
            raise RuntimeError(f"{len(self.missing)} stored runs were not computed")
        return [self.found[i] for i in range(len(self.pieces))]


def _used(state: RunState) -> dict[str, Any]:
    return {"commit": state.commit, "compute_s": state.compute_s}


def plan(run: Callable[[], Any], scope: Scope) -> list[RunState] | None:
    """The stored runs of the chapter whose ``run`` is given, and what the store holds of each, computing nothing
    (``store_modes.plan``); None when it computes without stored runs, or the store is off (``OFF_ENV``)."""
    return None if os.environ.get(OFF_ENV, "").lower() == "off" else store_modes.plan(run, scope)


# the committed store's size for both profiles (tests/project/test_committed_store.py): default holds about 31 MB,
# two thirds of it the corollaries' update ratios (a row every 50 steps of 45 runs), official about 19 MB
BUDGET_MB = 60
