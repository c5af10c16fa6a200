"""A real-data chapter's data through the store: read only where something is computed (``loaded``), and what its
page reads of it kept as a stored run of its own (``kept``, ``real_facts``), so that a page is made from the store
without the dataset."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from . import real_facts
from .real_facts import DataFacts, facts_table, from_table
from .real_setup import RealSetup
from .store import Batch, Piece, setup_values
from .store_modes import Deferred

FACTS = "data-facts"  # the stored run's name in a chapter's folder
T = TypeVar("T")


def loaded(load: Callable[[], T]) -> Deferred[T]:
    """``load()`` deferred: made where a run of the chapter's is computed (``store.Batch.compute``), never where the
    store holds them all, nor while it plans (``results status``). The data's identity in each key is its files'
    sha256, read all the same. Where the dataset is not here, a run to compute names the files to get before
    anything is loaded (``store.Batch``)."""
    return Deferred(load)


def kept(data: Any, setup: RealSetup, uniform: Mapping[str, RealSetup] | None = None) -> DataFacts:
    """The facts of the chapter's data for ``setup`` (its data settings) and the uniform MRTA of each of ``uniform``'s
    setups, from the store where it holds them, else computed from ``data`` (``loaded``) and stored, as a chapter's
    runs are."""
    uniform = dict(uniform or {})
    values = {"setup": setup_values(setup), "uniform": {k: setup_values(s) for k, s in uniform.items()}}
    batch = Batch([Piece(FACTS, values)], [real_facts.__name__])
    tasks = [(data, uniform)] if batch.missing else []
    batch.compute(facts_table, tasks, 1, lambda t, out: {0: {"main": out}})
    return from_table(batch.tables()[0]["main"])
