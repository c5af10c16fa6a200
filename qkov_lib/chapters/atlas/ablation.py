"""The atlas's ablation: Figure 2 from the paper's text (``fig2_dtap.Setup()``) towards the authors' code
(``fig2_dtap.PROFILES["official"]``), one factor (``setup.FACTORS``) at a time, in both directions; each run one
cell of the atlas's sweep, its claims checked as the grid's, and which factor flips which claim."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from ...runs import fig2_panels
from ...runs.synthetic_runs import SyntheticTask
from .grid import RUN, SETTING, train
from .setup import FACTOR_KEYS, FACTORS, PAPER_LR, Factor, values

STEP_COUNTS = ("max_steps", "ramp_steps")  # with panel_steps' values: what the ablation's speedup divides


@dataclass(frozen=True)
class AblationRun:
    """One run of the ablation: its key, the factors set as the authors' code sets them, the end point it starts
    from (``paper`` or ``authors``) and the factor it switches (None: the end point itself)."""

    key: str
    on: tuple[str, ...]
    start: str
    factor: str | None


def runs(factors: Sequence[str] = FACTOR_KEYS) -> list[AblationRun]:
    """The paper's settings, each of ``factors`` switched on alone from them, the authors' settings, and each of
    ``factors`` switched off alone from them (Section 4 as written against the authors' notebooks)."""
    unknown = [f for f in factors if f not in FACTOR_KEYS]
    if unknown:
        raise ValueError(f"unknown ablation factors {unknown}; the factors are {', '.join(FACTOR_KEYS)}")
    every = tuple(FACTOR_KEYS)
    return (
        [AblationRun("paper", (), "paper", None)]
        + [AblationRun(f"paper+{f}", (f,), "paper", f) for f in factors]
        + [AblationRun("authors", every, "authors", None)]
        + [AblationRun(f"authors-{f}", tuple(g for g in every if g != f), "authors", f) for f in factors]
    )


def cells(factors: Sequence[str], speedup: int, cap: int | None) -> list[dict[str, Any]]:
    """The ablation's sweep cells: each run's key, its factors on, and the budget (speedup, cap)."""
    return [{RUN: r.key, "on": list(r.on), "speedup": speedup, "cap": cap} for r in runs(factors)]


def factor(key: str) -> Factor:
    """The factor named ``key``."""
    return next(f for f in FACTORS if f.key == key)


def factor_changes(on: Sequence[str]) -> dict[str, Any]:
    """fig2_dtap's official values of the keys of the factors ``on``; ValueError if that profile sets a key that no
    factor names (the ablation would silently leave it at the paper's value)."""
    official = fig2_panels.OFFICIAL
    named = {k for f in FACTORS for k in f.keys}
    if set(official) - named:
        raise ValueError(
            f"fig2_dtap's official profile sets {sorted(set(official) - named)}, which no factor of "
            f"the atlas's ablation names; add each to one of atlas.setup.FACTORS"
        )
    keys = {k for f in FACTORS if f.key in on for k in f.keys}
    return {k: v for k, v in official.items() if k in keys}


def run_setup(cell: Mapping[str, Any], common: Mapping[str, Any]) -> fig2_panels.Setup:
    """An ablation run's Figure 2 setup: the atlas's task (seeds, sizes, batch, loss target, bins), the paper's
    values (``fig2_dtap.Setup``) with the authors' for the factors on, then the budget rescaled: the rate times the
    speedup, every step count (the step caps, the per-panel budgets, the QK ramps) divided by it and capped at the
    cell's cap. The authors' stop rule keeps its epochs (100-250 steps): how often it is checked, not a budget."""
    paper = values(fig2_panels.Setup())
    task = {
        f.name: common[f.name]
        for f in fields(SyntheticTask)
        if f.init and f.name not in STEP_COUNTS and f.name != "eval_every"
    }
    chosen = {**paper, **task, **{k: paper[k] for f in FACTORS for k in f.keys}, **factor_changes(cell["on"])}
    k, cap = cell["speedup"], cell["cap"] or math.inf
    chosen["lr"] = PAPER_LR * k
    for name in STEP_COUNTS:
        chosen[name] = int(max(1, min(chosen[name] // k, cap)))
    chosen["panel_steps"] = {p: int(max(1, min(v // k, cap))) for p, v in chosen["panel_steps"].items()}
    return fig2_panels.Setup(**chosen)


def train_run(cell: Mapping[str, Any], common: Mapping[str, Any]) -> pd.DataFrame:
    """One ablation run, trained here on one thread: one row per panel and seed (the run's key, Figure 2's metrics,
    steps and whether the step cap stopped it)."""
    setup = run_setup(cell, common)
    rows = train(setup, fig2_panels.runs(setup))
    rows.insert(0, RUN, cell[RUN])
    return rows


def budget(speedup: int, cap: int | None, common: Mapping[str, Any]) -> dict[str, Any]:
    """What the ablation trains with: the rate, each end point's step caps (panel -> steps) and QK ramp length,
    against the paper's and the authors' own (speedup 1, no cap)."""
    ends = {}
    for key, on in (("paper", ()), ("authors", FACTOR_KEYS)):
        s = run_setup({RUN: key, "on": list(on), "speedup": speedup, "cap": cap}, common)
        full = run_setup({RUN: key, "on": list(on), "speedup": 1, "cap": None}, common)
        ends[key] = {
            "caps": {p.key: p.max_steps for p in fig2_panels.runs(s)},
            "full caps": {p.key: p.max_steps for p in fig2_panels.runs(full)},
            "ramp": s.ramp_steps,
            "full ramp": full.ramp_steps,
        }
    return {"lr": PAPER_LR * speedup, "paper lr": PAPER_LR, "speedup": speedup, "cap": cap, **ends}


def rows_of(rows: pd.DataFrame) -> pd.DataFrame:
    """The ablation's rows of a sweep's rows (the grid's left out)."""
    if RUN not in rows:
        return rows.iloc[:0]
    return rows[rows[RUN].notna()].drop(columns=[*SETTING, "mult_set"]).reset_index(drop=True)
