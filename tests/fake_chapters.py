"""Tiny chapters (jupytext MyST sources) for the runner's tests: one that saves a table and a claim, one that fails;
the module the runner takes each for; a notebooks folder holding the first, registered with the runner; a
sealed unit as the runner leaves it (`seal_unit`); and the hand-made per-seed tables of the claim tests
(`fig2_rows`: Figure 2's summary, `table1_rows`: Table 1's rows, over three seeds)."""

import dataclasses
import json
import types
from pathlib import Path

import pandas as pd
import pytest

from qkov_lib.core import results
from qkov_lib.runner import catalog

HEAD = """---
kernelspec: {display_name: Python 3, language: python, name: python3}
jupytext: {text_representation: {extension: .md, format_name: myst}}
---
# A chapter for the tests

```{code-cell} ipython3
:tags: [parameters]

profile = "default"
overrides = {}
```
"""
TINY = (
    HEAD
    + """
```{code-cell} ipython3
import pandas as pd
from qkov_lib.core import results
from qkov_lib.metrics.verdicts import Claim, check, claim_table
x = overrides.get("x", 1)
claims = claim_table([Claim("positive", "x is positive", str(x), check(x > 0), "holds if x > 0")])
results.save(results.results_dir(profile), "tiny", {"main": pd.DataFrame({"x": [x]}), "claims": claims},
             {"profile": profile, "parameters": {"x": x}})
```
"""
)
NEEDS_DATA = (
    HEAD
    + """
```{code-cell} ipython3
import pandas as pd
from qkov_lib.core import results
from qkov_lib.data import sva
splits, info = sva.load(download=False)  # DataUnavailable when the data is not here
results.save(results.results_dir(profile), "needs_data", {"main": pd.DataFrame({"splits": [len(splits)]})},
             {"profile": profile, "parameters": {"x": overrides.get("x", 1)}})
```
"""
)
BROKEN = (
    HEAD
    + """
```{code-cell} ipython3
raise ValueError("deliberate failure")
```
"""
)


def fake_module(name: str, datasets: tuple[str, ...] = (), **params: int) -> types.ModuleType:
    """A chapter module as the runner sees it: a ``Setup`` whose parameters are ``params`` (with those defaults),
    no profile changes, and the datasets it reads."""
    setup = dataclasses.make_dataclass(
        "Setup", [(k, type(v), dataclasses.field(default=v)) for k, v in params.items()], frozen=True, kw_only=True
    )
    module = types.ModuleType(f"qkov_lib.chapters.{name}")
    module.Setup, module.PROFILES, module.DATASETS = setup, {}, datasets
    return module


def tiny_book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...] = ("tiny",)) -> Path:
    """A notebooks folder in ``tmp_path`` holding the tiny chapter (``TINY``) under each of ``names`` (``tiny.md``,
    ...), which the runner reads for this test, each module taking one parameter, x = 1; returns the folder."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for name in names:
        (notebooks / f"{name}.md").write_text(TINY.replace('"tiny"', f'"{name}"'))
        monkeypatch.setitem(catalog.CHAPTERS, name, fake_module(name, x=1))
    monkeypatch.setattr(catalog, "NOTEBOOKS_DIR", notebooks)
    return notebooks


def seal_unit(folder: Path, chapter: str, x: int) -> None:
    """A unit as the runner leaves it: tables, an executed notebook, metadata listing every file's sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{chapter}.ipynb").write_text(json.dumps({"cells": [], "x": x}))
    results.save(
        folder,
        chapter,
        {"main": pd.DataFrame({"x": [x]}), "claims": pd.DataFrame({"ok": [True]})},
        {"profile": folder.name, "git_commit": "0" * 40, "runner_wall_time_s": 1.0},
    )
    meta = results.read_meta(folder, chapter)
    meta["files"] = {
        p.name: results.sha256_file(p) for p in sorted(folder.glob(f"{chapter}.*")) if p.name != f"{chapter}.json"
    }
    results.write_meta(folder, chapter, meta)
    results.check(folder, chapter)


T_975_2 = 4.302652729911275  # the 97.5% point of Student's t with 2 degrees of freedom: three seeds' interval
HALF_3 = T_975_2 / 3**0.5  # the half-width of three seeds' 95% interval when their standard deviation is 1


def per_seed_rows(values: dict[str, dict[str, list[float]]], key: str = "panel", **extra: object) -> pd.DataFrame:
    """Per-seed rows from ``values`` (metric -> group -> one value per seed): one row per group and seed, the group
    in column ``key``, with the columns ``extra`` set to the same value in every row."""
    metrics = list(values)
    groups = list(values[metrics[0]])
    seeds = range(len(values[metrics[0]][groups[0]]))
    return pd.DataFrame(
        [{key: g, "seed": s, **{m: values[m][g][s] for m in metrics}, **extra} for g in groups for s in seeds]
    )


def fig2_rows(
    acmc: dict[str, list[float]] | None = None,
    top_left: dict[str, list[float]] | None = None,
    accuracy: dict[str, list[float]] | None = None,
    **extra: object,
) -> pd.DataFrame:
    """Figure 2's per-seed summary (panel a-h, seed, ACMC, top_left, accuracy, in %) for three seeds, on which each
    of its claims holds: (b), (d) well above 50% ACMC, (a) 40% top-left, every faster panel's ACMC 5 to 20 points
    above its base panel's, accuracy the same everywhere; ``acmc``, ``top_left``, ``accuracy`` replace panels."""
    holds = {
        "ACMC": {
            "a": [20, 21, 22],
            "b": [79, 80, 81],
            "c": [30, 31, 32],
            "d": [69, 70, 71],
            "e": [40, 42, 41],  # (e) - (a): 20, 21, 19
            "f": [35, 37, 36],  # (f) - (a): 15, 16, 14
            "g": [79, 81, 80],  # (g) - (d): 10, 11, 9
            "h": [74, 76, 75],  # (h) - (d): 5, 6, 4, the weakest gain
        },
        "top_left": {p: [39, 40, 41] if p == "a" else [5, 6, 7] for p in "abcdefgh"},
        "accuracy": {p: [90, 91, 92] for p in "abcdefgh"},
    }
    for metric, changed in (("ACMC", acmc), ("top_left", top_left), ("accuracy", accuracy)):
        holds[metric] = {**holds[metric], **(changed or {})}
    return per_seed_rows({m: {k: [float(x) for x in v] for k, v in p.items()} for m, p in holds.items()}, **extra)


TABLE1_BASE = {  # a baseline's per-seed Table 1 metrics, three seeds (percentages, and the faithfulness scores)
    "accuracy": [70.0, 71.0, 72.0],
    "AC": [20.0, 21.0, 22.0],
    "ACMC": [15.0, 16.0, 17.0],
    "sufficiency": [0.50, 0.52, 0.51],
    "comprehensiveness": [0.30, 0.31, 0.32],
}
TABLE1_CHANGE = {  # faster QK minus the baseline, per seed, on which every Table 1 claim holds
    "accuracy": [1.0, 2.0, 3.0],
    "AC": [10.0, 11.0, 12.0],
    "ACMC": [8.0, 9.0, 10.0],
    "sufficiency": [-0.10, -0.11, -0.12],
    "comprehensiveness": [0.10, 0.12, 0.11],
}


def table1_rows(performance: str = "accuracy", examples: int = 100, **change: list[float]) -> pd.DataFrame:
    """Table 1's per-seed rows of a baseline and a faster-QK condition (``real_verdicts.claims``' input), three seeds:
    the metrics of ``TABLE1_BASE`` and, for faster QK, those plus ``TABLE1_CHANGE`` with ``change`` replacing a
    metric's per-seed change; ``performance`` names the task metric (accuracy, or F1); the counts behind an
    accuracy (``correct`` of ``examples``, two classes predicted) for the majority-class floor."""
    deltas = {**TABLE1_CHANGE, **change}
    base = {m: {"baseline": v, "faster QK": [b + d for b, d in zip(v, deltas[m])]} for m, v in TABLE1_BASE.items()}
    rows = per_seed_rows(base, key="condition", examples=examples, predicted_classes=2)
    rows["correct"] = (rows["accuracy"] * examples / 100).round().astype(int)
    return rows.rename(columns={"accuracy": performance})
