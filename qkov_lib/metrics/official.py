"""One guard for every comparison with the authors' stored numbers: whether a run under the ``official`` profile is
the authors' experiment (its parameters are the official profile's, at the authors' sizes) and whether its models
learned the task. A chapter page and the summary both read an official run through ``official_unit`` and draw a
reproduction verdict only where its ``Guard`` is ``comparable``; otherwise every verdict reads *undecided* and the
page says why (``Guard.note``)."""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.chapter import as_dict, name_of, resolve
from ..core.results import ResultsError, load, results_root

OFFICIAL = "official"  # the profile of the authors' setup
AUTHORS_SCALE: dict[str, dict[str, Any]] = {  # per chapter, the sizes of the authors' run its `official` profile
    # scales down to fit a CPU (None: every question): an official run at other sizes is not their experiment
    "squad": {"max_train": None, "max_test": None, "epochs": 100}
}
NOT_CHECKED = "its parameters were not recorded, so they cannot be checked against the official profile's"


def authors_parameters(module: types.ModuleType) -> dict[str, Any]:
    """The parameters of the authors' experiment for a chapter module: its ``official`` profile's, with the sizes
    that profile scales down set back to the authors' (``AUTHORS_SCALE``)."""
    return as_dict(resolve(module, OFFICIAL)[1]) | AUTHORS_SCALE.get(name_of(module), {})


def _value(value: Any) -> str:
    """A parameter's value in words: 'all' for None, thousands separated for an integer."""
    if value is None:
        return "all"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def departures(module: types.ModuleType, parameters: Mapping[str, Any] | None) -> tuple[str, ...]:
    """How a run of ``module`` with ``parameters`` (``Chapter.params``, or a unit's metadata) departs from the
    authors' experiment (``authors_parameters``), one phrase per parameter ('epochs 1 (theirs: 30)'): any override
    of the official profile, and every size it scales down; one phrase saying so when the parameters are unknown."""
    if parameters is None:
        return (NOT_CHECKED,)
    theirs = authors_parameters(module)
    return tuple(
        f"{name} {_value(parameters.get(name))} (theirs: {_value(full)})"
        for name, full in theirs.items()
        if name in parameters and _plain(parameters[name]) != _plain(full)
    )


def _plain(value: Any) -> Any:
    """A value as its metadata reads back (tuples as lists), so that a run's and a unit's compare alike."""
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


@dataclass(frozen=True)
class Guard:
    """Whether an official run may be set against the authors' numbers: how it departs from their experiment
    (``departures``; empty: it is theirs) and why its models are not evidence ('' : they learned the task)."""

    departures: tuple[str, ...] = ()
    not_learned: str = ""

    @property
    def comparable(self) -> bool:
        """Its models learned and it is the authors' experiment: a reproduction verdict may be drawn."""
        return not self.departures and not self.not_learned

    def learned(self, why_not: str) -> Guard:
        """This guard with a chapter's not-learned reason ('' where its models learned)."""
        return replace(self, not_learned=why_not) if why_not else self

    @property
    def reason(self) -> str:
        """Why no verdict is drawn, in a short phrase ('' where one is)."""
        parts = []
        if self.departures:
            parts.append("not the authors' experiment: " + ", ".join(self.departures))
        if self.not_learned:
            parts.append(f"not evidence: {self.not_learned}")
        return "; ".join(parts)

    def note(self, command: str = "") -> str:
        """What a page says below its table beside the authors' numbers when no verdict is drawn ('' otherwise):
        why, and the command that runs the authors' experiment."""
        if self.comparable:
            return ""
        rerun = f" `{command}` runs the authors' experiment." if command and self.departures else ""
        return (
            f"No reproduction verdict is drawn from the official run read here ({self.reason}): every verdict reads "
            f"*undecided*.{rerun}"
        )


@dataclass(frozen=True)
class OfficialUnit:
    """A chapter's run under ``official``: its tables and its guard (the departures; a chapter adds whether its
    models learned, ``Guard.learned``)."""

    tables: Mapping[str, pd.DataFrame]
    guard: Guard


def official_unit(
    module: types.ModuleType,
    profile: str,
    here: Mapping[str, pd.DataFrame] | None = None,
    parameters: Mapping[str, Any] | None = None,
    root: Path | None = None,
) -> OfficialUnit | None:
    """The chapter's run under ``official``, the one path every page and the summary read it by: this run's tables
    (``here``) and ``parameters`` when it runs under ``official`` itself, else the unit ``<root>/official/<chapter>``
    (its tables and the parameters its metadata records; root: ``results_root()``); None when there is none. Its
    guard names every departure from the authors' experiment (``departures``)."""
    if profile == OFFICIAL and here is not None:
        tables, params = here, parameters
    else:
        try:
            tables, meta = load((root or results_root()) / OFFICIAL, name_of(module))
        except ResultsError:
            return None
        params = meta.get("parameters")
    return OfficialUnit(tables, Guard(departures(module, params)))


def full_size_command(module: types.ModuleType) -> str:
    """The command that runs a chapter's official profile at the authors' sizes (``AUTHORS_SCALE``)."""
    name = name_of(module)
    sizes = " ".join(f"-p {k} {v}" for k, v in AUTHORS_SCALE.get(name, {}).items())
    return f"python -m qkov_lib reproduce --profile {OFFICIAL} --only {name} {sizes}".strip()
