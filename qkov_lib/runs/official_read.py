"""The run under ``official`` that a page or the summary sets beside its own, read from the results on disk (the
reading is here, so that ``metrics.official`` decides on tables and never opens a file)."""

from __future__ import annotations

import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.chapter import name_of
from ..core.results import ResultsError, load, results_root
from ..metrics.official import OFFICIAL, Guard, OfficialUnit, departures


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
